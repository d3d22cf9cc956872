"""Topics (queries) as TSV: ``qid\\tquery``."""

from __future__ import annotations

from pathlib import Path

from ance_ir.data.atomic import atomic_write
from ance_ir.data.errors import InputError
from ance_ir.data.lines import iter_lines, split_columns

Topics = dict[str, str]


def read_topics_tsv(path: str | Path) -> Topics:
    """Read ``qid\\tquery`` lines into an ordered dict; duplicate ids are errors."""
    topics: Topics = {}
    for lineno, line in iter_lines(path):
        qid, query = split_columns(path, lineno, line, "\t", (2,))
        qid = qid.strip()
        if not qid:
            raise InputError(path, "empty query id", lineno)
        if qid in topics:
            raise InputError(path, f"duplicate query id {qid!r}", lineno)
        topics[qid] = query.strip()
    return topics


def write_topics_tsv(topics: Topics, path: str | Path) -> None:
    with atomic_write(path) as f:
        for qid, query in topics.items():
            f.write(f"{qid}\t{query}\n")
