"""A results table of test runs against baselines' runs: the measures of each row (mean ± std over seeds) and, for
each baseline, its per-topic nDCG@10 against the baseline's (difference, topics better / worse, paired two-sided
t-test)."""

from __future__ import annotations

import statistics
from pathlib import Path

from ance_ir.eval.significance import PairedDifference
from experiments.rag24_interaction_report import MEASURES, cell, per_query_of

VERSUS = " nDCG@10 vs {baseline} | queries better / worse | paired t-test p |"


def comparison_table(rows: list[tuple[str, list[Path]]], baselines: dict[str, list[Path]]) -> list[str]:
    """Markdown lines: the header, then a line per row (one run file per seed; rows with a missing file are left
    out); each row is compared with each baseline (name -> its runs) but its own."""
    evaluated = {tuple(runs): per_query_of(runs) for runs in baselines.values()}  # a baseline row is not redone
    references = {name: evaluated[tuple(runs)] for name, runs in baselines.items()}
    header = "| row | nDCG@10 | R@100 | MRR@10 |" + "".join(VERSUS.format(baseline=name) for name in baselines)
    lines = [header, "|" + " --- |" * (header.count("|") - 1)]
    for label, paths in rows:
        values = evaluated[tuple(paths)] if tuple(paths) in evaluated else per_query_of(paths)
        if values is None:
            continue
        seeds = len(paths)
        cells = [cell([statistics.fmean(v[i] for v in values[m].values()) for i in range(seeds)]) for m in MEASURES]
        for name, runs in baselines.items():
            cells += versus(values, references[name]) if paths != runs else ["", "", ""]
        lines.append(f"| {label} | {' | '.join(cells)} |")
    return lines


def versus(values: dict[str, dict[str, list[float]]], reference: dict[str, dict[str, list[float]]] | None) -> list[str]:
    """Three cells: the seed-mean per-topic nDCG@10 of ``values`` against ``reference``'s (empty when the
    reference's runs are missing)."""
    if reference is None:
        return ["", "", ""]
    a = [statistics.fmean(v) for v in values["ndcg_cut_10"].values()]
    b = [statistics.fmean(v) for v in reference["ndcg_cut_10"].values()]
    c = PairedDifference.of(a, b)
    return [f"{c.difference:+.4f}", f"{c.better} / {c.worse}", f"{c.t_p:.2g}"]


def which_seeds(seeds: list[int]) -> str:
    """A table heading's seed part: ``seeds 1, 2, 3 (mean ± std over seeds)`` or ``seed 1``."""
    return f"seeds {', '.join(map(str, seeds))} (mean ± std over seeds)" if len(seeds) > 1 else f"seed {seeds[0]}"


def left_out(rows: list[tuple[str, list[Path]]]) -> str:
    """A sentence naming the rows ``comparison_table`` leaves out (a seed's run missing), or "" when none is."""
    missing = [label for label, paths in rows if not all(path.is_file() for path in paths)]
    return f"\n\nNot run for every seed yet, so not in the table: {'; '.join(missing)}." if missing else ""
