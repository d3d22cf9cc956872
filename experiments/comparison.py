"""A results table of test runs against a baseline's: the measures of each row (mean ± std over seeds) and its
per-topic nDCG@10 against the baseline's (difference, topics better / worse, paired two-sided t-test)."""

from __future__ import annotations

import statistics
from pathlib import Path

from ance_ir.eval.significance import paired_t_test
from experiments.rag24_interaction_report import MEASURES, cell, per_query_of

HEADER = "| row | nDCG@10 | R@100 | MRR@10 | nDCG@10 vs {baseline} | queries better / worse | paired t-test p |"


def comparison_table(rows: list[tuple[str, list[Path]]], baseline: str, baseline_runs: list[Path]) -> list[str]:
    """Markdown lines: the header, then a line per row (one run file per seed; rows with a missing file are left
    out); the row whose runs are ``baseline_runs`` gets no comparison."""
    reference = per_query_of(baseline_runs)
    header = HEADER.format(baseline=baseline)
    lines = [header, "|" + " --- |" * (header.count("|") - 1)]
    for label, paths in rows:
        values = per_query_of(paths)
        if values is None:
            continue
        seeds = len(paths)
        cells = [cell([statistics.fmean(v[i] for v in values[m].values()) for i in range(seeds)]) for m in MEASURES]
        versus = ["", "", ""]
        if paths != baseline_runs and reference is not None:
            a = [statistics.fmean(v) for v in values["ndcg_cut_10"].values()]
            b = [statistics.fmean(v) for v in reference["ndcg_cut_10"].values()]
            better = sum(x > y for x, y in zip(a, b, strict=True))
            worse = sum(x < y for x, y in zip(a, b, strict=True))
            versus = [f"{statistics.fmean(a) - statistics.fmean(b):+.4f}", f"{better} / {worse}",
                      f"{paired_t_test(a, b):.2g}"]
        lines.append(f"| {label} | {' | '.join(cells)} | {' | '.join(versus)} |")
    return lines


def left_out(rows: list[tuple[str, list[Path]]]) -> str:
    """A sentence naming the rows ``comparison_table`` leaves out (a seed's run missing), or "" when none is."""
    missing = [label for label, paths in rows if not all(path.is_file() for path in paths)]
    return f"\n\nNot run for every seed yet, so not in the table: {'; '.join(missing)}." if missing else ""
