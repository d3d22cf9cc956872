"""Fusing two rankings: score interpolation with minimum-score fill, and reciprocal rank fusion.

Interpolation follows Pyserini's ``HybridSearcher``: a document missing from one list takes that list's
lowest score for the query. RRF scores as Pyserini's ``pyserini.fusion.reciprocal_rank_fusion`` does.
"""

from __future__ import annotations

from collections import defaultdict
from operator import itemgetter

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
        fused[qid] = _ranked({d: weight_first * a.get(d, fill_a) + weight_second * b.get(d, fill_b)
                              for d in a.keys() | b.keys()}, k)
    return fused


def reciprocal_rank_fusion(runs: list[Run], rrf_k: int = 60, depth: int | None = 1000,
                           k: int | None = 1000) -> Run:
    """Reciprocal rank fusion (Cormack et al., 2009) as Pyserini's ``pyserini.fusion.reciprocal_rank_fusion``
    computes it (``tests/test_fusion.py`` checks the two agree): each document scores ``sum 1 / (rrf_k + rank)``
    over the runs' top-``depth`` lists, ties ordered by docid. Plain dictionaries rather than Pyserini's pandas
    frames: several times faster on large runs (``docs/bench.md``)."""
    longest = max((len(ranking) for run in runs for ranking in run.values()), default=0)
    weights = [1.0 / (rrf_k + rank) for rank in range(1, min(depth or longest, longest) + 1)]
    fused: Run = {}
    for qid in dict.fromkeys(q for run in runs for q in run):
        scores: dict[str, float] = defaultdict(float)
        for run in runs:
            for (docid, _), weight in zip(run.get(qid, ()), weights, strict=False):
                scores[docid] += weight
        fused[qid] = _ranked(scores, k)
    return fused


def _ranked(scores: dict[str, float], k: int | None) -> list[tuple[str, float]]:
    """``scores`` best first, ties by docid, cut to ``k`` (two stable sorts on C-level keys)."""
    hits = sorted(scores.items(), key=itemgetter(0))
    hits.sort(key=itemgetter(1), reverse=True)
    return hits[:k]
