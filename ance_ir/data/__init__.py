"""Readers and writers for corpora, topics, qrels and runs; every bad line raises :class:`InputError`."""

from ance_ir.data.atomic import atomic_directory, atomic_write, output_lock, remove_stale_temporaries
from ance_ir.data.checksum import sha256_file
from ance_ir.data.corpus import Passage, corpus_texts, iter_corpus, load_corpus, write_corpus
from ance_ir.data.errors import InputError
from ance_ir.data.groups import GroupPassage, TrainingGroup, read_groups, write_groups
from ance_ir.data.qrels import Qrels, positives, read_qrels, write_qrels
from ance_ir.data.runs import (
    Run,
    RunTable,
    check_run_tag,
    default_run_tag,
    min_max_scores,
    read_run,
    read_run_table,
    truncate,
    write_run,
    write_run_table,
)
from ance_ir.data.topics import Topics, read_topics, read_topics_jsonl, read_topics_tsv, write_topics_tsv

__all__ = [
    "GroupPassage", "InputError", "Passage", "Qrels", "Run", "RunTable", "Topics", "TrainingGroup",
    "atomic_directory", "atomic_write", "check_run_tag", "corpus_texts", "default_run_tag", "iter_corpus",
    "load_corpus", "min_max_scores", "output_lock", "positives", "read_groups", "read_qrels", "read_run",
    "read_run_table", "read_topics", "read_topics_jsonl", "read_topics_tsv", "remove_stale_temporaries",
    "sha256_file", "truncate", "write_corpus", "write_groups", "write_qrels", "write_run", "write_run_table",
    "write_topics_tsv",
]
