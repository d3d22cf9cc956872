"""Pretraining data made from a corpus itself, one registered data source each (``data.source: NAME``): ``ict``,
``bfs``, ``wlp``, ``spider``, ``simcse``, ``contriever``, and ``qgen`` (a generator's queries for the corpus)
(:mod:`ance_ir.pretrain_data.base` says what they share).
Train them with the ``contrastive`` task, in-batch negatives and ``nll`` (sampled softmax over the batch's
passages); ``python -m ance_ir.pretrain_data`` writes a source's pairs as training groups to inspect or reuse."""

from ance_ir.pretrain_data import bfs, contriever, ict, qgen, simcse, spider, wlp  # noqa: F401 - they register
from ance_ir.pretrain_data.base import Pair, PretrainSource
from ance_ir.pretrain_data.sentences import split_sentences

SOURCES = ("ict", "bfs", "wlp", "spider", "simcse", "contriever", "qgen")
__all__ = ["SOURCES", "Pair", "PretrainSource", "split_sentences"]
