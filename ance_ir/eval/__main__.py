"""``python -m ance_ir.eval --qrels Q --run R``: nDCG@10, MRR@10, R@100, R@1000 and MAP with pytrec_eval.

    python -m ance_ir.eval --qrels rag24-mini-test --run runs/bm25.trec
    python -m ance_ir.eval --qrels qrels.txt --run run.trec --metrics ndcg@10 r@100 --json
"""

from __future__ import annotations

import argparse
import json

from ance_ir.cli import run_cli
from ance_ir.data import read_run
from ance_ir.datasets import resolve_qrels
from ance_ir.eval import (
    DEFAULT_METRICS,
    METRICS,
    evaluate_per_query,
    format_table,
    mean_over_queries,
    measure_name,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ance_ir.eval", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--qrels", required=True, help="TREC qrels file or name (e.g. rag24-mini-test, dl19)")
    parser.add_argument("--run", required=True, help="TREC run file")
    parser.add_argument("--metrics", nargs="+", default=DEFAULT_METRICS,
                        help=f"metrics (default: all of {', '.join(METRICS)})")
    parser.add_argument("--relevance-level", type=int, default=1,
                        help="lowest grade counted relevant by recall/MAP/MRR (trec_eval -l), default 1")
    parser.add_argument("--per-query", action="store_true", help="also print each query's values")
    parser.add_argument("--json", action="store_true", help="print one JSON object of means instead of a table")
    args = parser.parse_args(argv)

    for m in args.metrics:
        measure_name(m)
    qrels = resolve_qrels(args.qrels)
    run = read_run(args.run)
    per_query = evaluate_per_query(qrels, run, args.metrics, args.relevance_level)
    if not per_query:
        raise ValueError(f"{args.run}: no query of the run has judgments in {args.qrels}")
    means = mean_over_queries(per_query)
    if args.json:
        print(json.dumps(means))
        return 0
    if args.per_query:
        for qid, values in per_query.items():
            print(qid + "\t" + "\t".join(f"{n}={v:.4f}" for n, v in values.items()))
    print(format_table(means, label=f"{len(per_query)} queries"))
    return 0


if __name__ == "__main__":
    run_cli(main)
