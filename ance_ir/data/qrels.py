"""Relevance judgments in TREC format: ``qid iter docid relevance``."""

from __future__ import annotations

from pathlib import Path

from ance_ir.data.atomic import atomic_write
from ance_ir.data.errors import InputError
from ance_ir.data.lines import iter_lines, split_columns

Qrels = dict[str, dict[str, int]]


def read_qrels(path: str | Path) -> Qrels:
    """Read TREC qrels; a repeated (qid, docid) pair or a non-integer grade is an error."""
    qrels: Qrels = {}
    for lineno, line in iter_lines(path):
        qid, _, docid, rel = split_columns(path, lineno, line, None, (4,))
        try:
            grade = int(rel)
        except ValueError:
            raise InputError(path, f"relevance {rel!r} is not an integer", lineno) from None
        judged = qrels.setdefault(qid, {})
        if docid in judged:
            raise InputError(path, f"duplicate judgment for query {qid!r}, document {docid!r}", lineno)
        judged[docid] = grade
    return qrels


def write_qrels(qrels: Qrels, path: str | Path) -> None:
    with atomic_write(path) as f:
        for qid, judged in qrels.items():
            for docid, grade in judged.items():
                f.write(f"{qid} 0 {docid} {grade}\n")


def positives(qrels: Qrels, min_grade: int = 1) -> dict[str, list[str]]:
    """Documents judged at least ``min_grade`` for each query (queries with none are dropped)."""
    out = {qid: [d for d, g in judged.items() if g >= min_grade] for qid, judged in qrels.items()}
    return {qid: docs for qid, docs in out.items() if docs}
