"""Choose the interpolation weight on training topics: sweep alpha, keep the best mean metric."""

from __future__ import annotations

from ance_ir.data import Qrels, Run
from ance_ir.eval import evaluate
from ance_ir.fusion.fuse import interpolate

DEFAULT_ALPHAS = (0.0, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.7, 1.0)


def sweep_alpha(first: Run, second: Run, qrels: Qrels, alphas: tuple[float, ...] = DEFAULT_ALPHAS,
                metric: str = "ndcg@10", depth: int = 1000) -> list[tuple[float, float]]:
    """``(alpha, mean metric)`` of ``alpha * first + (1 - alpha) * second`` for each alpha."""
    return [(a, next(iter(evaluate(qrels, interpolate(first, second, a, 1 - a, depth, depth), [metric]).values())))
            for a in alphas]


def best_alpha(sweep: list[tuple[float, float]]) -> float:
    """The alpha with the highest value (the smallest alpha among ties)."""
    return max(sweep, key=lambda point: (point[1], -point[0]))[0]
