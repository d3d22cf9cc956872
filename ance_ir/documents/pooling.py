"""Passage runs pooled into document runs (the ANCE paper's MaxP and FirstP; Pyserini's ``--max-passage``).

A passage id is ``DOC<delimiter>REST``. ``max``: a document scores its best passage's score (MaxP). ``first``:
only each document's first passage counts, i.e. the passage whose ``REST`` is ``0`` (FirstP searched over a
passage index that holds every window).
"""

from __future__ import annotations

from ance_ir.data.runs import Run
from ance_ir.documents.segments import DEFAULT_DELIMITER

POOLINGS = ("max", "first")


def pool_run(run: Run, pooling: str = "max", hits: int = 100, delimiter: str = DEFAULT_DELIMITER) -> Run:
    """Each query's documents ranked by their pooled passage score, ``hits`` of them (ties: first met first)."""
    if pooling not in POOLINGS:
        raise ValueError(f"unknown pooling {pooling!r}; known: {', '.join(POOLINGS)}")
    pooled: Run = {}
    for qid, ranking in run.items():
        best: dict[str, float] = {}
        for passage_id, score in ranking:  # best first: a document's first hit is its best
            docid, _, rest = passage_id.partition(delimiter)
            if pooling == "first" and rest.split("_", 1)[0] != "0":
                continue
            best.setdefault(docid, score)
        pooled[qid] = sorted(best.items(), key=lambda hit: -hit[1])[:hits]
    return pooled
