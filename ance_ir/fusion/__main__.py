"""``python -m ance_ir.fusion --runs A B --method interpolation|rrf --output R``.

interpolation: ``alpha * A + (1 - alpha) * B`` (Pyserini's fusion convention), where a document missing
from one run takes that run's lowest score for the query (Pyserini's hybrid convention).
rrf: reciprocal rank fusion, ``sum 1 / (k + rank)``, through ``pyserini.fusion``.
"""

from __future__ import annotations

import argparse
import sys

from ance_ir.cli import run_cli
from ance_ir.data import read_run, write_run
from ance_ir.fusion import interpolate, reciprocal_rank_fusion


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ance_ir.fusion", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", nargs="+", required=True, help="TREC run files (exactly two for interpolation)")
    parser.add_argument("--method", choices=["interpolation", "rrf"], default="rrf")
    parser.add_argument("--alpha", type=float, default=0.5, help="weight of the first run (interpolation)")
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
        fused = interpolate(runs[0], runs[1], args.alpha, 1 - args.alpha, depth=args.depth, k=args.k)
    else:
        if len(runs) < 2:
            raise ValueError("rrf needs at least two runs")
        fused = reciprocal_rank_fusion(runs, rrf_k=args.rrf_k, depth=args.depth, k=args.k)
    write_run(fused, args.output, tag=args.run_tag)
    print(f"wrote {args.output}: {len(fused)} queries", file=sys.stderr)
    return 0


if __name__ == "__main__":
    run_cli(main)
