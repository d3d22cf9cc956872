"""Choose the interpolation weight by nDCG@10: on training topics, or by cross-validation over the judged topics."""

from __future__ import annotations

from typing import NamedTuple

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


class CrossValidated(NamedTuple):
    """A run fused by :func:`cross_validated_interpolation` and the weights it was fused with."""

    run: Run
    fold_alphas: list[float]  # each fold's alpha, chosen on the other folds
    unjudged_alpha: float | None  # the alpha of the queries without judgments (best on all judged); None if none


def cross_validated_interpolation(first: Run, second: Run, qrels: Qrels, folds: int,
                                  alphas: tuple[float, ...] = DEFAULT_ALPHAS, depth: int = 1000, k: int = 1000,
                                  normalize: bool = False, metric: str = "ndcg@10") -> CrossValidated:
    """Interpolate with alpha chosen by ``folds``-fold cross-validation: the judged queries of either run, sorted,
    are dealt into folds (query i to fold i mod ``folds``); each fold is fused with the alpha best on the others'
    qrels, and every query without judgments with the alpha best on all judged queries. The fused run has every
    query of either run, in their order (as :func:`interpolate`)."""
    if folds < 2:
        raise ValueError(f"cross-validation needs at least 2 folds, got {folds}")
    queries = list(dict.fromkeys([*first, *second]))
    qids = sorted(q for q in queries if qrels.get(q))
    if len(qids) < folds:
        raise ValueError(f"{folds}-fold cross-validation needs at least {folds} judged queries, got {len(qids)}")
    judged = {q: qrels[q] for q in qids}
    # a query's value does not depend on the others': each alpha is fused and measured once, not once per fold
    per_query = {a: evaluate_per_query(judged, interpolate(first, second, a, 1 - a, depth, depth, normalize),
                                       [metric]) for a in alphas}

    def best_without(held_out: set[str]) -> float:
        return best_alpha([(a, next(iter(mean_over_queries({q: v for q, v in values.items()
                                                            if q not in held_out}).values())))
                           for a, values in per_query.items()])

    alpha_of = {}
    fold_alphas = []
    for fold in (qids[i::folds] for i in range(folds)):
        fold_alphas.append(best_without(set(fold)))
        alpha_of |= dict.fromkeys(fold, fold_alphas[-1])
    unjudged = [q for q in queries if q not in alpha_of]
    unjudged_alpha = best_without(set()) if unjudged else None
    alpha_of |= dict.fromkeys(unjudged, unjudged_alpha)
    fused: Run = {}
    for alpha in dict.fromkeys(alpha_of.values()):
        share = [q for q in queries if alpha_of[q] == alpha]
        fused |= interpolate({q: first[q] for q in share if q in first}, {q: second[q] for q in share if q in second},
                             alpha, 1 - alpha, depth=depth, k=k, normalize=normalize)
    return CrossValidated({q: fused[q] for q in queries}, fold_alphas, unjudged_alpha)
