"""Choose the interpolation weight by nDCG@10: on training topics, or by cross-validation over the judged topics."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import NamedTuple, TypeVar

from ance_ir.data import Qrels, Run
from ance_ir.eval import evaluate, evaluate_per_query
from ance_ir.fusion.fuse import interpolate

C = TypeVar("C")  # a candidate of cross-validation: an alpha, a (depth, alpha) cell, ...
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


def best_on(per_query: Mapping[C, Mapping[str, float]], queries: Sequence[str]) -> C:
    """The candidate (an alpha, a (depth, alpha) cell, ...) whose per-query values have the highest mean over
    ``queries`` (those it has a value for: a judged query no run retrieved for has none); the smallest candidate
    among ties."""
    return max(sorted(per_query), key=lambda c: statistics.fmean(per_query[c][q] for q in queries
                                                                 if q in per_query[c]))


def fold_choices(per_query: Mapping[C, Mapping[str, float]], qids: Sequence[str],
                 folds: int) -> list[tuple[list[str], C]]:
    """K-fold cross-validation among candidates, given each one's value per query: ``qids``, sorted, are dealt
    into ``folds`` (query i to fold i mod ``folds``) and each fold is given the candidate best on the other folds'
    queries (:func:`best_on`). Returns each fold's queries with its candidate."""
    if folds < 2:
        raise ValueError(f"cross-validation needs at least 2 folds, got {folds}")
    ordered = sorted(qids)
    if len(ordered) < folds:
        raise ValueError(f"{folds}-fold cross-validation needs at least {folds} judged queries, got {len(ordered)}")
    choices = []
    for fold in (ordered[i::folds] for i in range(folds)):
        held_out = set(fold)
        choices.append((fold, best_on(per_query, [q for q in ordered if q not in held_out])))
    return choices


class CrossValidated(NamedTuple):
    """A run fused by :func:`cross_validated_interpolation` and the weights it was fused with."""

    run: Run
    fold_alphas: list[float]  # each fold's alpha, chosen on the other folds
    unjudged_alpha: float | None  # the alpha of the queries without judgments (best on all judged); None if none


def cross_validated_interpolation(first: Run, second: Run, qrels: Qrels, folds: int,
                                  alphas: tuple[float, ...] = DEFAULT_ALPHAS, depth: int = 1000, k: int = 1000,
                                  normalize: bool = False, metric: str = "ndcg@10") -> CrossValidated:
    """Interpolate with alpha chosen by ``folds``-fold cross-validation over the judged queries of either run
    (:func:`fold_choices`): each fold is fused with the alpha best on the others' qrels, and every query without
    judgments with the alpha best on all judged queries. The fused run has every query of either run, in their
    order (as :func:`interpolate`)."""
    queries = list(dict.fromkeys([*first, *second]))
    qids = [q for q in queries if qrels.get(q)]
    judged = {q: qrels[q] for q in qids}
    # a query's value does not depend on the others': each alpha is fused and measured once, not once per fold
    per_query = {a: {q: next(iter(v.values())) for q, v in evaluate_per_query(
        judged, interpolate(first, second, a, 1 - a, depth, depth, normalize), [metric]).items()} for a in alphas}
    choices = fold_choices(per_query, qids, folds)
    alpha_of = {q: alpha for fold, alpha in choices for q in fold}
    unjudged = [q for q in queries if q not in alpha_of]
    unjudged_alpha = best_on(per_query, qids) if unjudged else None
    alpha_of |= dict.fromkeys(unjudged, unjudged_alpha)
    fused: Run = {}
    for alpha in dict.fromkeys(alpha_of.values()):
        share = [q for q in queries if alpha_of[q] == alpha]
        fused |= interpolate({q: first[q] for q in share if q in first}, {q: second[q] for q in share if q in second},
                             alpha, 1 - alpha, depth=depth, k=k, normalize=normalize)
    return CrossValidated({q: fused[q] for q in queries}, [alpha for _, alpha in choices], unjudged_alpha)
