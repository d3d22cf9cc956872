"""Retrieval metrics with pytrec_eval: nDCG@10, MRR@10, R@100, R@1000 and MAP."""

from __future__ import annotations

import statistics

import pytrec_eval

from ance_ir.data import Qrels, Run, truncate

# Friendly name -> pytrec_eval measure name. MRR@10 is ``recip_rank`` over the top 10 of each query.
METRICS = {
    "ndcg@10": "ndcg_cut_10",
    "mrr@10": "recip_rank",
    "r@100": "recall_100",
    "r@1000": "recall_1000",
    "map": "map",
}
DEFAULT_METRICS = list(METRICS)
_PYTREC_FAMILY = {"ndcg_cut_10": "ndcg_cut.10", "recall_100": "recall.100", "recall_1000": "recall.1000",
                  "recip_rank": "recip_rank", "map": "map"}


def measure_name(metric: str) -> str:
    """Map a friendly name (``ndcg@10``) or a pytrec_eval name (``ndcg_cut_10``) to the pytrec_eval name."""
    key = metric.lower()
    if key in METRICS:
        return METRICS[key]
    if key in _PYTREC_FAMILY:
        return key
    raise ValueError(f"unknown metric {metric!r}; known: {', '.join([*METRICS, *_PYTREC_FAMILY])}")


def evaluate_per_query(qrels: Qrels, run: Run, metrics: list[str] | None = None,
                       relevance_level: int = 1) -> dict[str, dict[str, float]]:
    """Per-query values ``{qid: {measure: value}}`` for the queries present in both qrels and run.

    ``relevance_level`` is the lowest grade counted as relevant by the binary measures (recall, MAP, MRR),
    as trec_eval's ``-l``. ``recip_rank`` is computed on each query's top 10 (MRR@10).
    """
    names = [measure_name(m) for m in (metrics or DEFAULT_METRICS)]
    qrels = {q: judged for q, judged in qrels.items() if q in run}
    results: dict[str, dict[str, float]] = {q: {} for q in qrels}
    for depth, wanted in ((10, [n for n in names if n == "recip_rank"]),
                          (None, [n for n in names if n != "recip_rank"])):
        if not wanted:
            continue
        scored = truncate(run, depth) if depth else run
        evaluator = pytrec_eval.RelevanceEvaluator(qrels, {_PYTREC_FAMILY[n] for n in wanted},
                                                   relevance_level=relevance_level)
        as_dict = {q: {d: s for d, s in ranking} for q, ranking in scored.items() if q in qrels}
        for qid, values in evaluator.evaluate(as_dict).items():
            results[qid].update({n: values[n] for n in wanted})
    return {q: {n: v.get(n, 0.0) for n in names} for q, v in results.items()}


def evaluate(qrels: Qrels, run: Run, metrics: list[str] | None = None, relevance_level: int = 1) -> dict[str, float]:
    """Mean of each measure over the judged queries of ``run`` (pytrec_eval names as keys)."""
    return mean_over_queries(evaluate_per_query(qrels, run, metrics, relevance_level))


def mean_over_queries(per_query: dict[str, dict[str, float]]) -> dict[str, float]:
    """Average per-query values, measure by measure."""
    if not per_query:
        raise ValueError("no query of the run has judgments in the qrels")
    names = next(iter(per_query.values()))
    return {n: statistics.fmean(v[n] for v in per_query.values()) for n in names}
