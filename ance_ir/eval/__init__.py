"""Evaluation: pytrec_eval measures, paired significance tests between runs, QA answer coverage."""

from ance_ir.eval.measures import Measure, parse_measure, parse_measures
from ance_ir.eval.metrics import (
    DEFAULT_METRICS,
    METRICS,
    aggregate,
    evaluate,
    evaluate_per_query,
    judged_overlap,
    mean_over_queries,
    measure_keys,
    measure_name,
)
from ance_ir.eval.report import format_table, print_run_metrics

__all__ = ["DEFAULT_METRICS", "METRICS", "Measure", "aggregate", "evaluate", "evaluate_per_query", "format_table",
           "judged_overlap", "mean_over_queries", "measure_keys", "measure_name", "parse_measure",
           "parse_measures", "print_run_metrics"]
