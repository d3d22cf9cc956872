"""Choose the interpolation weight by nDCG@10: on training topics, or by cross-validation over the judged topics."""

from __future__ import annotations

from ance_ir.data import Qrels, Run
from ance_ir.eval import evaluate, evaluate_per_query, mean_over_queries
from ance_ir.fusion.fuse import interpolate

DEFAULT_ALPHAS = (0.0, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.7, 1.0)


def sweep_alpha(first: Run, second: Run, qrels: Qrels, alphas: tuple[float, ...] = DEFAULT_ALPHAS,
                metric: str = "ndcg@10", depth: int = 1000, normalize: bool = False) -> list[tuple[float, float]]:
    """``(alpha, mean metric)`` of ``alpha * first + (1 - alpha) * second`` for each alpha."""
    return [(a, next(iter(evaluate(qrels, interpolate(first, second, a, 1 - a, depth, depth, normalize),
                                   [metric]).values())))
            for a in alphas]


def best_alpha(sweep: list[tuple[float, float]]) -> float:
    """The alpha with the highest value (the smallest alpha among ties)."""
    return max(sweep, key=lambda point: (point[1], -point[0]))[0]


def cross_validated_interpolation(first: Run, second: Run, qrels: Qrels, folds: int,
                                  alphas: tuple[float, ...] = DEFAULT_ALPHAS, depth: int = 1000, k: int = 1000,
                                  normalize: bool = False, metric: str = "ndcg@10") -> tuple[Run, list[float]]:
    """Interpolate with alpha chosen by ``folds``-fold cross-validation: the judged queries of ``second``, sorted,
    are dealt into folds (query i to fold i mod ``folds``); each fold is fused with the alpha best on the others'
    qrels. Returns the fused run of those queries and each fold's alpha."""
    if folds < 2:
        raise ValueError(f"cross-validation needs at least 2 folds, got {folds}")
    qids = sorted(qrels.keys() & second.keys())
    if len(qids) < folds:
        raise ValueError(f"{folds}-fold cross-validation needs at least {folds} judged queries, got {len(qids)}")
    judged = {q: grades for q, grades in qrels.items() if q in second}
    # a query's value does not depend on the others': each alpha is fused and measured once, not once per fold
    per_query = {a: evaluate_per_query(judged, interpolate(first, second, a, 1 - a, depth, depth, normalize),
                                       [metric]) for a in alphas}
    fused: Run = {}
    chosen = []
    for fold in (qids[i::folds] for i in range(folds)):
        held_out = set(fold)
        sweep = [(a, next(iter(mean_over_queries({q: v for q, v in values.items() if q not in held_out}).values())))
                 for a, values in per_query.items()]
        alpha = best_alpha(sweep)
        fused |= interpolate({q: first[q] for q in fold if q in first}, {q: second[q] for q in fold}, alpha,
                             1 - alpha, depth=depth, k=k, normalize=normalize)
        chosen.append(alpha)
    return fused, chosen
