"""Several cross-encoders' scores averaged, then fused with the first stage they reranked (issue 13).

    python -m experiments.rag24_rerank_ensemble --first runs/rag24/hybrid.test.trec.gz \\
        --reranked g42=runs/rag24/rerank/gpu/hybrid.minilm-ce-ict3.s42.graded.test.trec.gz \\
        g43=runs/rag24/rerank/gpu/hybrid.minilm-ce-ict3.s43.graded.test.trec.gz \\
        g44=runs/rag24/rerank/gpu/hybrid.minilm-ce-ict3.s44.graded.test.trec.gz \\
        c500=runs/rag24/rerank/hybrid.minilm-ce-ict-500-graded.test.trec.gz \\
        c450=runs/rag24/rerank/hybrid.minilm-ce-ict-graded-450.test.trec.gz

For every subset of the reranked runs (each a reranking of the same first-stage top 100), the subset's scores are
averaged, each run min-max normalised per query first (``ance_ir.fusion --method average --normalization --hits
100``), and the average is fused with the first stage, the first stage's weight chosen by 5-fold cross-validation
over the judged topics (``ance_ir.fusion --method interpolation --normalization --tune QRELS --folds 5 --hits 100``:
the same runs). Prints one row a subset (nDCG@10 alone and fused, the difference from the first stage, topics
better and worse, the paired t-test's p, uncorrected), the mean difference of the subsets of each size, and the
subset and weight chosen together by 5-fold cross-validation (each fifth of the topics scored with the (subset,
weight) best on the other four fifths: ``ance_ir.fusion.tune.fold_choices``), which says what choosing the subset,
not only the weight, on other topics gives.
"""

from __future__ import annotations

import argparse
import itertools
import statistics

from ance_ir.data import Run, read_run
from ance_ir.datasets import resolve_qrels
from ance_ir.eval import evaluate_per_query
from ance_ir.eval.significance import PairedDifference
from ance_ir.fusion import average, interpolate
from ance_ir.fusion.tune import fold_choices

FOLDS = 5
HITS = 100
WEIGHTS = tuple(i / 10 for i in range(11))  # the first stage's weight: 0, 0.1, ..., 1


def ndcg10(qrels: dict, run: Run) -> dict[str, float]:
    """Per judged query, nDCG@10 of ``run``."""
    return {q: v["ndcg_cut_10"] for q, v in evaluate_per_query(qrels, run, ["ndcg@10"]).items()}


def compared(scored: dict[str, float], base: dict[str, float], qids: list[str]) -> tuple[str, str, str, str]:
    """``scored`` against ``base`` over ``qids``, formatted: mean, difference, topics better/worse, t-test p."""
    c = PairedDifference.of([scored[q] for q in qids], [base[q] for q in qids])
    return f"{statistics.fmean(scored[q] for q in qids):.4f}", f"{c.difference:+.4f}", f"{c.better}/{c.worse}", \
        f"{c.t_p:.3g}"


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m experiments.rag24_rerank_ensemble", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--first", required=True, help="the first stage's run (its top 100 were reranked)")
    parser.add_argument("--reranked", nargs="+", required=True, metavar="NAME=RUN",
                        help="cross-encoder runs of that top 100, each with a short name for the table")
    parser.add_argument("--qrels", default="rag24-mini-test")
    args = parser.parse_args()
    qrels = resolve_qrels(args.qrels)
    first = read_run(args.first)
    reranked = {name: read_run(path) for name, path in (item.split("=", 1) for item in args.reranked)}
    base = ndcg10(qrels, first)
    qids = sorted(base)
    print(f"{args.first}: nDCG@10 {statistics.fmean(base.values()):.4f} over {len(qids)} judged topics\n")
    print("| cross-encoders averaged | alone | diff | folds' first-stage weights | fused | diff | better/worse | "
          "t-test p |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    cells = {}  # (subset, weight) -> per-query nDCG@10 of the fused run
    gains: dict[int, list[float]] = {}
    for size in range(1, len(reranked) + 1):
        for subset in itertools.combinations(reranked, size):
            averaged = average([reranked[name] for name in subset], depth=1000, k=HITS, normalize=True)
            for a in WEIGHTS:
                fused = interpolate(first, averaged, a, 1 - a, depth=1000, k=HITS, normalize=True)
                cells[subset, a] = ndcg10(qrels, fused)
            choices = fold_choices({a: cells[subset, a] for a in WEIGHTS}, qids, FOLDS)
            scored = {q: cells[subset, a][q] for fold, a in choices for q in fold}
            alone = ndcg10(qrels, averaged)
            gains.setdefault(size, []).append(statistics.fmean(scored[q] - base[q] for q in qids))
            weights = " ".join(f"{a:g}" for _, a in choices)
            print(f"| {' + '.join(subset)} | {statistics.fmean(alone[q] for q in qids):.4f} | "
                  f"{statistics.fmean(alone[q] - base[q] for q in qids):+.4f} | {weights} | "
                  f"{' | '.join(compared(scored, base, qids))} |")
    print("\nmean difference of the fused runs from the first stage, by the number of cross-encoders averaged: "
          + ", ".join(f"{size}: {statistics.fmean(g):+.4f} ({len(g)} subset{'s' * (len(g) > 1)})"
                     for size, g in gains.items()))
    choices = fold_choices(cells, qids, FOLDS)
    scored = {q: cells[cell][q] for fold, cell in choices for q in fold}
    chosen = "; ".join(f"{' + '.join(subset)} at {a:g}" for _, (subset, a) in choices)
    mean, diff, better_worse, p = compared(scored, base, qids)
    print(f"subset and weight by {FOLDS}-fold cross-validation ({chosen}): nDCG@10 {mean}, {diff} over the first "
          f"stage ({better_worse} topics better/worse, t-test p {p})")


if __name__ == "__main__":
    main()
