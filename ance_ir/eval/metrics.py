"""Retrieval measures with pytrec_eval: every measure it knows, and judged@K (see :mod:`ance_ir.eval.measures`
for the names).

The defaults are nDCG@10, MRR@10, R@100, R@1000 and MAP, under pytrec_eval's keys.
"""

from __future__ import annotations

import math
import statistics

import pytrec_eval

from ance_ir.data import Qrels, Run
from ance_ir.eval.measures import JUDGED, Measure, parse_measure, parse_measures, trec_eval_spec

# Friendly name -> output key of the default measures. MRR@10 is ``recip_rank`` over the top 10 of each query.
METRICS = {
    "ndcg@10": "ndcg_cut_10",
    "mrr@10": "recip_rank",
    "r@100": "recall_100",
    "r@1000": "recall_1000",
    "map": "map",
}
DEFAULT_METRICS = list(METRICS)


def measure_name(metric: str) -> str:
    """The output key of a spelling that stands for one measure (``ndcg@10``, ``ndcg_cut.10`` -> ``ndcg_cut_10``).

    Raises ValueError for an unknown spelling and for one that stands for several (``P``: use
    :func:`measure_keys`).
    """
    keys = measure_keys(metric)
    if len(keys) != 1:
        raise ValueError(f"metric {metric!r} stands for {len(keys)} measures ({', '.join(keys)})")
    return keys[0]


def measure_keys(metric: str) -> list[str]:
    """The output keys a spelling stands for (``P`` -> ``P_5`` ... ``P_1000``)."""
    return [m.key for m in parse_measure(metric)]


def trec_eval_order(hits: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """``hits`` in the order trec_eval ranks them: score descending, a tie broken by docid descending."""
    return sorted(sorted(hits, key=lambda hit: hit[0], reverse=True), key=lambda hit: -hit[1])


def judged_share(ordered: list[tuple[str, float]], judged: dict[str, int], k: int) -> float:
    """judged@k: the share of the top ``k`` of hits already in trec_eval's order (:func:`trec_eval_order`) judged
    at any grade, out of ``k`` or the hits there are when fewer (as ir_measures' ``Judged@k``); 0 without hits."""
    top = ordered[:k]
    return sum(docid in judged for docid, _ in top) / len(top) if top else 0.0


# trec_eval's floor for the logarithms behind gm_map and gm_bpref
_GM_FLOOR = math.log(1e-5)


def empty_ranking_value(key: str, judged: dict[str, int], relevance_level: int = 1) -> float:
    """What trec_eval ``-c`` gives a query missing from the run: the values of an empty ranking.

    0 for every measure of effectiveness; ``num_q`` 1, ``num_rel`` the query's relevant documents and
    ``gm_*`` the logarithm of trec_eval's floor. (Computed here: pytrec_eval mis-scores and can crash on
    empty rankings.)
    """
    if key == "num_q":
        return 1.0
    if key == "num_rel":
        return float(sum(grade >= relevance_level for grade in judged.values()))
    if key.startswith("gm_"):
        return _GM_FLOOR
    return 0.0


def evaluate_per_query(qrels: Qrels, run: Run, metrics: list[str] | None = None, relevance_level: int = 1,
                       complete: bool = False) -> dict[str, dict[str, float]]:
    """Per-query values ``{qid: {key: value}}``.

    By default over the queries present in both qrels and run (trec_eval's default); with ``complete``
    over every query of the qrels, a query missing from the run scored as an empty ranking (0 for every
    measure of effectiveness, as trec_eval ``-c``; see :func:`empty_ranking_value`). ``relevance_level``
    is the lowest grade counted as relevant by the binary measures (P, recall, MAP, MRR, success, bpref,
    Rprec), as trec_eval's ``-l``. Reciprocal rank is computed on each query's top K (``recip_rank`` = MRR@10),
    cut after the hits are put in trec_eval's order (:func:`trec_eval_order`), as ``trec_eval -M K`` cuts.
    """
    measures = parse_measures(metrics or DEFAULT_METRICS)
    qids = [q for q in qrels if qrels[q] and (complete or run.get(q))]
    ranked = [q for q in qids if run.get(q)]
    judged = {q: qrels[q] for q in ranked}
    results: dict[str, dict[str, float]] = {q: {} for q in qids}
    ordered: dict[str, list[tuple[str, float]]] = {}  # a query's hits in trec_eval's order, sorted once if cut

    def top(qid: str, k: int) -> list[tuple[str, float]]:
        if qid not in ordered:
            ordered[qid] = trec_eval_order(run[qid])
        return ordered[qid][:k]

    by_depth: dict[int | None, list[Measure]] = {}
    for m in measures:
        if m.family == JUDGED:
            for qid in ranked:
                results[qid][m.key] = judged_share(top(qid, int(m.param)), qrels[qid], int(m.param))
        else:
            by_depth.setdefault(m.depth, []).append(m)
    for depth, wanted in by_depth.items():
        if not ranked:
            break
        evaluator = pytrec_eval.RelevanceEvaluator(judged, trec_eval_spec(wanted), relevance_level=relevance_level)
        values = evaluator.evaluate({q: dict(top(q, depth) if depth else run[q]) for q in ranked})
        for qid in ranked:
            got = values.get(qid, {})
            results[qid].update({m.key: got.get(m.pytrec_key, 0.0) for m in wanted})
    for qid in qids:
        if not run.get(qid):
            results[qid] = {m.key: empty_ranking_value(m.key, qrels[qid], relevance_level) for m in measures}
    return {q: {m.key: v[m.key] for m in measures} for q, v in results.items()}


def evaluate(qrels: Qrels, run: Run, metrics: list[str] | None = None, relevance_level: int = 1,
             complete: bool = False) -> dict[str, float]:
    """Each measure over the judged queries of ``run`` (pytrec_eval's keys), aggregated as trec_eval does."""
    return mean_over_queries(evaluate_per_query(qrels, run, metrics, relevance_level, complete))


def aggregate(key: str, values: list[float]) -> float:
    """trec_eval's summary of one measure: the sum for ``num_*``, the geometric mean for ``gm_*`` (pytrec_eval
    gives their per-query logarithms), the mean otherwise."""
    if key.startswith("num_"):
        return math.fsum(values)
    if key.startswith("gm_"):
        return math.exp(statistics.fmean(values))
    return statistics.fmean(values)


def mean_over_queries(per_query: dict[str, dict[str, float]]) -> dict[str, float]:
    """Summarise per-query values measure by measure (the mean, except for ``num_*`` and ``gm_*``)."""
    if not per_query:
        raise ValueError("no query of the run has judgments in the qrels")
    names = next(iter(per_query.values()))
    return {n: aggregate(n, [v[n] for v in per_query.values()]) for n in names}


def judged_overlap(qrels: Qrels, run: Run, qids: list[str] | None = None) -> int:
    """How many retrieved documents are judged (any grade) for their query, over ``qids`` (default: the run's)."""
    return sum(1 for q in (run if qids is None else qids) for d, _ in run.get(q, []) if d in qrels.get(q, {}))
