"""TREC run files: ``qid Q0 docid rank score tag``, written exactly as Pyserini writes them."""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

from ance_ir.data.atomic import atomic_write
from ance_ir.data.errors import InputError
from ance_ir.data.lines import iter_lines, split_columns

Ranking = list[tuple[str, float]]
Run = dict[str, Ranking]


def read_run(path: str | Path) -> Run:
    """Read a TREC run; each query's list is sorted by descending score (file order breaks ties)."""
    run: Run = {}
    seen: set[tuple[str, str]] = set()
    for lineno, line in iter_lines(path):
        qid, _, docid, rank, score, _tag = split_columns(path, lineno, line, None, (6,))
        try:
            int(rank)
            value = float(score)
        except ValueError:
            raise InputError(path, f"rank {rank!r} or score {score!r} is not a number", lineno) from None
        if not math.isfinite(value):
            raise InputError(path, f"score {score!r} is not a finite number", lineno)
        if (qid, docid) in seen:
            raise InputError(path, f"document {docid!r} appears twice for query {qid!r}", lineno)
        seen.add((qid, docid))
        run.setdefault(qid, []).append((docid, value))
    for ranking in run.values():
        ranking.sort(key=lambda hit: -hit[1])
    return run


def format_run_lines(qid: str, ranking: Iterable[tuple[str, float]], tag: str) -> Iterable[str]:
    """Lines for one query, ranks from 1, score with six decimals (Pyserini's ``TrecWriter`` format)."""
    for rank, (docid, score) in enumerate(ranking, start=1):
        yield f"{qid} Q0 {docid} {rank} {score:.6f} {tag}\n"


def write_run(run: Run, path: str | Path, tag: str = "ance-ir") -> None:
    """Write ``run`` atomically; each ranking is written in the order given (best first)."""
    if not tag or any(c.isspace() for c in tag):
        raise ValueError(f"run tag {tag!r} must be non-empty and contain no whitespace")
    with atomic_write(path) as f:
        for qid, ranking in run.items():
            f.writelines(format_run_lines(qid, ranking, tag))


def truncate(run: Run, depth: int) -> Run:
    """The top ``depth`` hits of every query."""
    return {qid: ranking[:depth] for qid, ranking in run.items()}
