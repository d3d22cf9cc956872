"""``python -m ance_ir.fusion --runs A B --method interpolation|rrf --output R``.

interpolation: ``alpha * A + (1 - alpha) * B`` (Pyserini's fusion convention), where a document missing
from one run takes that run's lowest score for the query (Pyserini's hybrid convention).
With ``--tune QRELS`` alpha is chosen by nDCG@10 on those qrels (use training topics) from ``--alphas``.
rrf: reciprocal rank fusion, ``sum 1 / (k + rank)``, through ``pyserini.fusion``.

    python -m ance_ir.fusion --runs runs/bm25.train.trec runs/dense.train.trec --method interpolation \
        --tune rag24-mini-train --output runs/hybrid.train.trec
"""

from __future__ import annotations

import argparse
import sys

from ance_ir.cli import run_cli
from ance_ir.data import read_run, write_run
from ance_ir.datasets import resolve_qrels
from ance_ir.fusion import interpolate, reciprocal_rank_fusion
from ance_ir.fusion.tune import DEFAULT_ALPHAS, best_alpha, sweep_alpha


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ance_ir.fusion", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", nargs="+", required=True, help="TREC run files (exactly two for interpolation)")
    parser.add_argument("--method", choices=["interpolation", "rrf"], default="rrf")
    parser.add_argument("--alpha", type=float, default=0.5, help="weight of the first run (interpolation)")
    parser.add_argument("--tune", metavar="QRELS", help="choose alpha by nDCG@10 on these qrels (training topics)")
    parser.add_argument("--alphas", type=float, nargs="+", default=list(DEFAULT_ALPHAS), help="alphas to try")
    parser.add_argument("--rrf-k", "--k-rrf", dest="rrf_k", type=int, default=60, help="RRF constant")
    parser.add_argument("--depth", type=int, default=1000, help="hits taken from each run per query")
    parser.add_argument("--k", type=int, default=1000, help="hits written per query")
    parser.add_argument("--output", required=True)
    parser.add_argument("--run-tag", default="ance-ir-fusion")
    args = parser.parse_args(argv)

    runs = [read_run(path) for path in args.runs]
    if args.method == "interpolation":
        if len(runs) != 2:
            raise ValueError(f"interpolation needs exactly two runs, got {len(runs)}")
        alpha = args.alpha
        if args.tune:
            sweep = sweep_alpha(runs[0], runs[1], resolve_qrels(args.tune), tuple(args.alphas), depth=args.depth)
            for a, value in sweep:
                print(f"alpha {a:<6g} ndcg@10 {value:.4f}")
            alpha = best_alpha(sweep)
            print(f"best alpha {alpha:g}")
        fused = interpolate(runs[0], runs[1], alpha, 1 - alpha, depth=args.depth, k=args.k)
    else:
        if len(runs) < 2:
            raise ValueError("rrf needs at least two runs")
        fused = reciprocal_rank_fusion(runs, rrf_k=args.rrf_k, depth=args.depth, k=args.k)
    write_run(fused, args.output, tag=args.run_tag)
    print(f"wrote {args.output}: {len(fused)} queries", file=sys.stderr)
    return 0


if __name__ == "__main__":
    run_cli(main)
