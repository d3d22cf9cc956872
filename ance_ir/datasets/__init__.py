"""Dataset registry: fetch the built-in data and resolve names given to ``--corpus/--topics/--qrels``."""

from ance_ir.datasets.registry import (
    DATASETS,
    fetch,
    qrels_for_topics,
    resolve_corpus,
    resolve_eval_qrels,
    resolve_qrels,
    resolve_topics,
)

__all__ = ["DATASETS", "fetch", "qrels_for_topics", "resolve_corpus", "resolve_eval_qrels", "resolve_qrels",
           "resolve_topics"]
