"""Text and JSON renderings of evaluation results: one run's table, several runs' comparison."""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ance_ir.data import Qrels, Run
from ance_ir.eval.measures import label as short_name
from ance_ir.eval.metrics import evaluate, judged_overlap
from ance_ir.eval.significance import CORRECTION_NAMES, Comparison, exact_permutation

DAGGER = "†"


def format_table(means: dict[str, float], label: str = "") -> str:
    """A two-column text table of measure means (short names such as ``ndcg@10`` where there is one)."""
    width = max([10, *(len(short_name(k)) for k in means)])
    lines = [f"{'metric':<{width}} {label or 'value':>10}"]
    lines += [f"{short_name(name):<{width}} {value:>10.4f}" for name, value in means.items()]
    return "\n".join(lines)


def unjudged_warning(qrels: Qrels, run: Run, run_name: str | Path, qrels_name: str,
                     qids: list[str] | None = None) -> str | None:
    """What to warn about a run none of whose retrieved documents (over ``qids``, default: the run's queries) is
    judged in ``qrels``: a run and qrels of different corpora, most likely; None when some are judged."""
    if judged_overlap(qrels, run, qids):
        return None
    return f"{run_name}: none of the retrieved documents is judged in {qrels_name} (different corpora?)"


def print_run_metrics(qrels: Qrels, run: Run, output: str | Path, qrels_name: str) -> None:
    """The default measures of a run a CLI has just written (stdout), after :func:`unjudged_warning`'s line
    (stderr), as ``python -m ance_ir.eval`` warns."""
    if warning := unjudged_warning(qrels, run, output, qrels_name):
        print(f"warning: {warning}", file=sys.stderr)
    print(format_table(evaluate(qrels, run), label=Path(output).name))


def format_p(p: float) -> str:
    if math.isnan(p):
        return "n/a"
    return f"{p:.1e}" if 0 < p < 1e-4 else f"{p:.4f}"


def permutation_description(permutations: int, seed: int, queries: int) -> str:
    if exact_permutation(queries, permutations):
        return f"exact over all 2^{queries} sign patterns"
    return f"{permutations} random sign flips, seed {seed}"


def format_comparison(names: Sequence[str], means: Sequence[dict[str, float]], comparisons: list[Comparison], *,
                      queries: int, source: str, unit: str = "queries", correction: str, alpha: float,
                      permutations: int, seed: int, missing: str) -> str:
    """A table of each run's means, each measure's rows together, the p-values of each run against the first.

    ``missing`` says how a query missing from a run is scored.
    """
    family = len(names) - 1
    header = [
        f"{len(names)} runs on {queries} {unit} of {source} ({missing}); baseline: {names[0]}",
        f"tests: paired two-sided t-test, paired randomisation test "
        f"({permutation_description(permutations, seed, queries)})",
        f"p-values: {CORRECTION_NAMES[correction]} correction over the {family} comparison"
        f"{'s' if family != 1 else ''} of each measure; {DAGGER} p < {alpha:g}",
    ]
    by_key = {(c.run, c.measure): c for c in comparisons}
    rows = [["measure", "run", "mean", "diff", "better/worse", "t-test p", "rand. p"]]
    for key in means[0]:
        for r, name in enumerate(names):
            row = [short_name(key) if r == 0 else "", name, f"{means[r][key]:.4f}"]
            c = by_key.get((r, key))
            if c is not None:
                row += [f"{c.difference:+.4f}", f"{c.better}/{c.worse}",
                        *(format_p(p) + (DAGGER if p < alpha else "") for p in (c.t_p_corrected,
                                                                                c.permutation_p_corrected))]
            rows.append(row)
    widths = [max(len(row[i]) for row in rows if len(row) > i) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [cell.ljust(widths[i]) if i < 2 else cell.rjust(widths[i]) for i, cell in enumerate(row)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(header + lines)


def _number(x: float) -> float | None:
    return None if math.isnan(x) else x


def comparison_json(names: Sequence[str], means: Sequence[dict[str, float]], comparisons: list[Comparison], *,
                    queries: int, correction: str, alpha: float, permutations: int, seed: int,
                    missing_queries: Sequence[int], per_query: Sequence[dict[str, dict[str, float]]] | None = None,
                    ) -> dict[str, Any]:
    """The comparison as one JSON-ready object (NaN p-values as null)."""
    runs = []
    for r, name in enumerate(names):
        entry: dict[str, Any] = {"run": name, "missing_queries": missing_queries[r], "means": means[r]}
        if per_query is not None:
            entry["per_query"] = per_query[r]
        runs.append(entry)
    return {
        "queries": queries, "baseline": names[0], "correction": correction, "alpha": alpha,
        "permutations": permutations, "seed": seed,
        "permutation_exact": exact_permutation(queries, permutations),
        "runs": runs,
        "comparisons": [{
            "run": names[c.run], "measure": c.measure, "difference": _number(c.difference),
            "better": c.better, "worse": c.worse,
            "t_test_p": _number(c.t_p), "t_test_p_corrected": _number(c.t_p_corrected),
            "permutation_p": _number(c.permutation_p), "permutation_p_corrected": _number(c.permutation_p_corrected),
            "significant_t_test": c.t_p_corrected < alpha,
            "significant_permutation": c.permutation_p_corrected < alpha,
        } for c in comparisons],
    }
