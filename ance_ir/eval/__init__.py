"""Evaluation with pytrec_eval."""

from ance_ir.eval.metrics import (
    DEFAULT_METRICS,
    METRICS,
    evaluate,
    evaluate_per_query,
    mean_over_queries,
    measure_name,
)

__all__ = ["DEFAULT_METRICS", "METRICS", "evaluate", "evaluate_per_query", "format_table", "mean_over_queries",
           "measure_name"]


def format_table(means: dict[str, float], label: str = "") -> str:
    """A two-column text table of measure means."""
    friendly = {v: k for k, v in METRICS.items()}
    lines = [f"{'metric':<10} {label or 'value':>10}"]
    lines += [f"{friendly.get(name, name):<10} {value:>10.4f}" for name, value in means.items()]
    return "\n".join(lines)
