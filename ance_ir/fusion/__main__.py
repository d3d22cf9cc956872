"""``python -m ance_ir.fusion --runs A B ... --method interpolation|average|rrf --output R``.

interpolation: ``alpha * A + (1 - alpha) * B``, the meaning ``--alpha`` has in every ance-ir CLI: like
Pyserini's hybrid alpha it weights the sparse run, so give the sparse (BM25) run first (Pyserini scores
``alpha * sparse + dense``: its alpha a ranks as a / (1 + a) here). A document missing from one run takes that
run's lowest score for the query (Pyserini's hybrid convention; ``pyserini.fusion --method interpolation`` gives it
0, so the two rank differently unless both runs hold the same documents). With ``--tune QRELS`` alpha is chosen by
nDCG@10 on those qrels (use training topics) from ``--alphas``; with ``--folds K`` too, by K-fold cross-validation
over the judged queries (each fold fused with the alpha best on the others; a query without judgments with the
alpha best on all of them), the way to tune on test topics without reporting a tuned-on-test number.
``--normalization`` maps each run's scores to [0, 1] per query first (min-max), as Pyserini's hybrid
``--normalization``.
average: the mean of each document's scores over two or more runs (CombSUM over the number of runs; a run missing
the document gives its lowest score for the query), e.g. several rerankers' scores of the same candidates. With
``--normalization`` it ranks as ``pyserini.fusion --method normalize``.
rrf: reciprocal rank fusion, ``sum 1 / (k + rank)``, scored as ``pyserini.fusion`` scores it.
``--hits N`` hits are written per query, fused from each run's top max(N, 1000).

    python -m ance_ir.fusion --runs runs/bm25.train.trec runs/dense.train.trec --method interpolation \\
        --tune rag24-mini-train --output runs/hybrid.train.trec
"""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import pyarrow.compute as pc

from ance_ir.cli import (
    ArgumentParser,
    check_apart,
    check_output,
    fill_defaults,
    given_flags,
    hidden_alias,
    non_negative_int,
    positive_int,
    run_cli,
    unit_float,
)
from ance_ir.data import InputError, RunTable, check_run_tag, read_run_table, write_run_table
from ance_ir.datasets import resolve_qrels
from ance_ir.fusion import average_tables, interpolate_tables, reciprocal_rank_fusion_tables
from ance_ir.fusion.fuse import ALPHA_MEANING
from ance_ir.fusion.tune import DEFAULT_ALPHAS, best_alpha, cross_validated_interpolation, sweep_alpha

DEFAULT_METHOD = "rrf"


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m ance_ir.fusion", description=__doc__)
    parser.add_argument("--runs", action="extend", nargs="+", required=True, metavar="RUN",
                        help="TREC run files (--runs A B, or --runs A --runs B; exactly two for interpolation, two "
                             "or more for average and rrf)")
    parser.add_argument("--method", choices=["interpolation", "average", "rrf"],
                        help=f"how runs are fused (default {DEFAULT_METHOD})")
    parser.add_argument("--alpha", type=unit_float,
                        help=f"interpolation: {ALPHA_MEANING}; the first run is the first of --runs (default 0.5)")
    parser.add_argument("--tune", metavar="QRELS", help="choose alpha by nDCG@10 on these qrels (training topics)")
    parser.add_argument("--alphas", type=unit_float, nargs="+",
                        help=f"with --tune: alphas to try (default {' '.join(f'{a:g}' for a in DEFAULT_ALPHAS)})")
    parser.add_argument("--folds", type=positive_int,
                        help="with --tune: choose alpha by this many folds of cross-validation over the judged queries")
    parser.add_argument("--normalization", action="store_true",
                        help="interpolation, average: min-max normalise each run's scores per query before "
                             "weighting them")
    parser.add_argument("--rrf-k", "--k-rrf", dest="rrf_k", type=non_negative_int,
                        help="rrf: the constant k in 1 / (k + rank) (default 60)")
    parser.add_argument("--hits", type=positive_int, default=1000, help="hits written per query (default 1000)")
    hidden_alias(parser, "--k", dest="hits", type=positive_int)  # the old spelling (Pyserini's fusion CLI's)
    parser.add_argument("--depth", type=positive_int,
                        help="hits read from each run per query, as Pyserini's fusion --depth (default: the larger "
                             "of --hits and 1000)")
    parser.add_argument("--output", required=True, help="TREC run file to write")
    parser.add_argument("--run-tag", default="ance-ir-fusion", help="the run file's last column")
    args = parser.parse_args(argv)
    depth = args.depth or max(args.hits, 1000)
    check_output(args.output)
    check_apart(args.output, args.runs)
    check_run_tag(args.run_tag)
    _check_method_settings(args)
    fill_defaults(args, {"method": DEFAULT_METHOD, "alpha": 0.5, "alphas": list(DEFAULT_ALPHAS), "rrf_k": 60})

    with ThreadPoolExecutor(min(len(args.runs), os.cpu_count() or 1)) as pool:  # pyarrow and numpy release the GIL
        runs = list(pool.map(read_run_table, args.runs))
    if args.method == "interpolation":
        first, second, alpha, alphas = runs[0], runs[1], args.alpha, tuple(args.alphas)
        qrels = resolve_qrels(args.tune) if args.tune else {}
        if args.tune and not any(qrels.get(q) for run in (first, second) for q in pc.unique(run.qids).to_pylist()):
            raise InputError(args.tune, f"judges no query of {args.runs[0]} or {args.runs[1]}: nothing to tune on")
        if args.folds:
            tuned = cross_validated_interpolation(first.to_run(), second.to_run(), qrels,
                                                  args.folds, alphas, depth, args.hits, args.normalization)
            print(f"alpha of each of the {args.folds} folds: {' '.join(f'{a:g}' for a in tuned.fold_alphas)}")
            if tuned.unjudged_alpha is not None:
                print(f"alpha of the queries without judgments: {tuned.unjudged_alpha:g} (best on all judged)")
            fused = RunTable.from_run(tuned.run)
        else:
            if args.tune:
                sweep = sweep_alpha(first.to_run(), second.to_run(), qrels, alphas,
                                    depth=depth, normalize=args.normalization)
                for a, value in sweep:
                    print(f"alpha {a:<6g} ndcg@10 {value:.4f}")
                alpha = best_alpha(sweep)
                print(f"best alpha {alpha:g}")
            fused = interpolate_tables(first, second, alpha, 1 - alpha, depth=depth, k=args.hits,
                                       normalize=args.normalization)
    elif args.method == "average":
        fused = average_tables(runs, depth=depth, k=args.hits, normalize=args.normalization)
    else:
        fused = reciprocal_rank_fusion_tables(runs, rrf_k=args.rrf_k, depth=depth, k=args.hits)
    write_run_table(fused, args.output, tag=args.run_tag)
    print(f"wrote {args.output}: {fused.queries()} queries", file=sys.stderr)
    return 0


def _check_method_settings(args: argparse.Namespace) -> None:
    """Refuse, before any run is read, a number of runs the method cannot fuse, a flag it would ignore (``--alpha``
    with the default ``rrf``, say), and ``--alpha``, ``--alphas`` or ``--folds`` that do not fit with ``--tune``."""
    if args.method == "interpolation" and len(args.runs) != 2:
        raise ValueError(f"interpolation needs exactly two runs, got {len(args.runs)}")
    method = args.method or DEFAULT_METHOD
    if method in ("rrf", "average") and len(args.runs) < 2:
        raise ValueError(f"{method} needs at least two runs")
    weights = given_flags(args, {"--alpha": "alpha", "--tune": "tune", "--alphas": "alphas", "--folds": "folds"})
    normalization = given_flags(args, {"--normalization": "normalization"})
    default = "" if args.method else " (the default method)"
    if method == "rrf" and weights + normalization:
        flag = (weights + normalization)[0]
        owner = "interpolation or average" if flag == "--normalization" else "interpolation"
        raise ValueError(f"{flag} is a setting of --method {owner}, not of rrf{default}")
    if method == "average" and weights:
        raise ValueError(f"{weights[0]} is a setting of --method interpolation, not of average (every run weighs "
                         "the same)")
    if method != "rrf" and args.rrf_k is not None:
        raise ValueError(f"--rrf-k is a setting of --method rrf, not of {method}")
    if args.alpha is not None and args.tune:
        raise ValueError("--alpha and --tune both set the weight: give one")
    if (args.folds is not None or args.alphas is not None) and not args.tune:
        raise ValueError(f"{'--folds' if args.folds is not None else '--alphas'} needs --tune QRELS")


if __name__ == "__main__":
    run_cli(main)
