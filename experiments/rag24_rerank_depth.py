"""Reranking only a first stage's top K, read off a depth-100 cross-encoder run, and fused back (issue 13).

    python -m experiments.rag24_rerank_depth --first runs/rag24/hybrid.test.trec.gz \\
        --reranked runs/rag24/rerank/hybrid.minilm-ce-ict-500-graded.test.trec.gz \\
        runs/rag24/rerank/hybrid.minilm-ce-ict-graded-450.test.trec.gz

A cross-encoder scores each (query, passage) pair on its own, so a run of it reranking the first stage's top 100
holds its scores of every top-K passage: no model is needed to try smaller K. For each K and each weight ``a`` of
the first stage, the first stage's hits are fused with the cross-encoder's scores of its top K (``a * first + (1 -
a) * reranker``, both min-max normalised per query as ``ance_ir.fusion --normalization``; a passage below K takes the
reranker's lowest score, the fusion's min-score fill; 100 hits written), as ``ance_ir.fusion --method interpolation
--normalization --hits 100`` fuses the two runs (at K = 100 the same run). Prints, per reranked run, the nDCG@10 of
every cell (each chosen on the test topics themselves: an upper bound), then the cells chosen by 5-fold
cross-validation over the judged topics (each fifth scored with the (K, a) best on the other four fifths:
``ance_ir.fusion.tune.fold_choices``, as ``ance_ir.fusion --folds`` chooses its weight) and the paired t-test of
that run against the first stage.
"""

from __future__ import annotations

import argparse
import statistics

from ance_ir.data import Run, read_run
from ance_ir.datasets import resolve_qrels
from ance_ir.eval import evaluate_per_query
from ance_ir.eval.significance import PairedDifference
from ance_ir.fusion.fuse import interpolate
from ance_ir.fusion.tune import fold_choices

DEPTHS = (10, 15, 20, 30, 50, 100)
WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
FOLDS = 5


def top_k_scores(first: Run, reranked: Run, k: int) -> Run:
    """The reranker's scores of each query's top ``k`` of ``first`` (first-stage order)."""
    out = {}
    for qid, hits in first.items():
        scores = dict(reranked.get(qid, []))
        top = [docid for docid, _ in sorted(hits, key=lambda hit: -hit[1])[:k]]
        missing = [d for d in top if d not in scores]
        if missing:
            raise ValueError(f"query {qid}: the reranked run has no score for {missing[0]} (rank <= {k} here)")
        out[qid] = [(d, scores[d]) for d in top]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--first", required=True, help="the first stage's run (its top 100 were reranked)")
    parser.add_argument("--reranked", nargs="+", required=True, help="cross-encoder runs of that top 100")
    parser.add_argument("--qrels", default="rag24-mini-test")
    args = parser.parse_args()
    qrels = resolve_qrels(args.qrels)
    first = read_run(args.first)
    base = {q: v["ndcg_cut_10"] for q, v in evaluate_per_query(qrels, first, ["ndcg@10"]).items()}
    qids = sorted(base)
    print(f"{args.first}: nDCG@10 {statistics.fmean(base.values()):.4f} over {len(qids)} judged topics")
    for path in args.reranked:
        reranked = read_run(path)
        cells = {}  # (K, a) -> per-query nDCG@10
        for k in DEPTHS:
            cut = top_k_scores(first, reranked, k)
            for a in WEIGHTS:
                fused = interpolate(first, cut, a, 1 - a, depth=1000, k=100, normalize=True)
                cells[k, a] = {q: v["ndcg_cut_10"] for q, v in evaluate_per_query(qrels, fused, ["ndcg@10"]).items()}
        print(f"\n{path}\n\n| K | " + " | ".join(f"a={a:g}" for a in WEIGHTS) + " |")
        print("| --- |" + " --- |" * len(WEIGHTS))
        for k in DEPTHS:
            print(f"| {k} | " + " | ".join(f"{statistics.fmean(cells[k, a].values()):.4f}" for a in WEIGHTS) + " |")
        choices = fold_choices(cells, qids, FOLDS)
        scored = {q: cells[cell][q] for fold, cell in choices for q in fold}
        c = PairedDifference.of([scored[q] for q in qids], [base[q] for q in qids])
        folds = " ".join(f"({k}, {a:g})" for _, (k, a) in choices)
        print(f"\n5-fold CV: cells {folds}: nDCG@10 {statistics.fmean(scored.values()):.4f}, {c.difference:+.4f} over "
              f"the first stage ({c.better} topics better, {c.worse} worse, t-test p {c.t_p:.3g})")


if __name__ == "__main__":
    main()
