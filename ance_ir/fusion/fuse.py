"""Fusing two rankings: score interpolation with minimum-score fill, and reciprocal rank fusion.

Interpolation follows Pyserini's ``HybridSearcher``: a document missing from one list takes that list's
lowest score for the query. RRF is Pyserini's own ``pyserini.fusion.reciprocal_rank_fusion``.
"""

from __future__ import annotations

from ance_ir.data import Run

# ``--alpha`` means this in every CLI (``ance_ir.search``, ``ance_ir.fusion``): like Pyserini's hybrid alpha
# it weights the sparse side, which goes first.
ALPHA_MEANING = "fused score = alpha * first (sparse) run + (1 - alpha) * second (dense) run"


def interpolate(first: Run, second: Run, weight_first: float, weight_second: float,
                depth: int | None = 1000, k: int | None = 1000) -> Run:
    """``weight_first * s1 + weight_second * s2`` over the union of each query's top-``depth`` documents.

    A document absent from one list gets that list's minimum score for the query (0 if the list is
    empty). Output is sorted by fused score, ties by docid, and cut to ``k``.
    """
    fused: Run = {}
    for qid in dict.fromkeys([*first, *second]):
        a = dict(first.get(qid, [])[:depth])
        b = dict(second.get(qid, [])[:depth])
        fill_a, fill_b = min(a.values(), default=0.0), min(b.values(), default=0.0)
        scores = {d: weight_first * a.get(d, fill_a) + weight_second * b.get(d, fill_b) for d in {*a, *b}}
        fused[qid] = sorted(scores.items(), key=lambda hit: (-hit[1], hit[0]))[:k]
    return fused


def reciprocal_rank_fusion(runs: list[Run], rrf_k: int = 60, depth: int | None = 1000,
                           k: int | None = 1000) -> Run:
    """Pyserini's RRF: each document scores ``sum 1 / (rrf_k + rank)`` over the runs."""
    from pyserini.fusion import reciprocal_rank_fusion as pyserini_rrf
    from pyserini.trectools import TrecRun

    trec_runs = [
        TrecRun.from_list([(qid, "Q0", d, rank, score, "run") for qid, ranking in run.items()
                           for rank, (d, score) in enumerate(ranking, start=1)])
        for run in runs
    ]
    fused = pyserini_rrf(trec_runs, rrf_k=rrf_k, depth=depth, k=k).run_data
    out: Run = {}
    for qid, docid, score in zip(fused["topic"], fused["docid"], fused["score"], strict=True):
        out.setdefault(str(qid), []).append((str(docid), float(score)))
    return out
