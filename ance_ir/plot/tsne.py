"""``python -m ance_ir.plot.tsne``: the ANCE paper's Figure 1, a t-SNE map of what a dense retriever sees for a query.

    python -m ance_ir.plot.tsne --index INDEX --topics rag24-mini-test --qrels rag24-mini-test \\
        --bm25-run runs/rag24/bm25.test.trec.gz --queries Q1 Q2 Q3 Q4 --output docs/figure1.png

For each query (one panel), the index's vectors of its judged-relevant passages, of ``--n`` BM25 negatives (its
BM25 top ones, judged passages removed: the training negatives of BM25 Neg), ``--n`` random passages (Rand Neg) and
the ``--n`` unjudged passages the dense model itself ranks highest (the negatives it meets at test time, DR Neg;
ANCE's training negatives are these, from a recent checkpoint), with the query's vector, projected to two
dimensions by scikit-learn's t-SNE (seeded). The legend gives each negative set's overlap with DR Neg.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import numpy as np

from ance_ir.cli import ArgumentParser, check_output, positive_int, run_cli

GROUPS = {"relevant": ("tab:green", "o"), "BM25 Neg": ("tab:orange", "s"), "Rand Neg": ("tab:gray", "x"),
          "DR Neg": ("tab:red", "^")}


def passage_groups(docids: Sequence[str], dense_ranking: Sequence[str], bm25_ranking: Sequence[str],
                   judged: Mapping[str, int], n: int, rng: random.Random, min_grade: int = 1) -> dict[str, list[str]]:
    """A query's passages by group: relevant (judged >= ``min_grade``), and ``n`` each of BM25 Neg, Rand Neg and
    DR Neg (the rankings' top unjudged passages; random unjudged passages)."""
    present = set(docids)
    unjudged = [d for d in docids if d not in judged]
    return {"relevant": [d for d, grade in judged.items() if grade >= min_grade and d in present],
            "BM25 Neg": [d for d in bm25_ranking if d not in judged and d in present][:n],
            "Rand Neg": rng.sample(unjudged, min(n, len(unjudged))),
            "DR Neg": [d for d in dense_ranking if d not in judged][:n]}


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m ance_ir.plot.tsne", description=__doc__)
    parser.add_argument("--index", required=True, help="dense index folder (python -m ance_ir.encode)")
    parser.add_argument("--encoder", help="query encoder (default: the one in the index's meta.json)")
    parser.add_argument("--topics", required=True, help="topics TSV file or name")
    parser.add_argument("--qrels", required=True, help="qrels file or name")
    parser.add_argument("--bm25-run", required=True, help="BM25 TREC run of the topics")
    parser.add_argument("--queries", nargs="+", required=True, help="query ids, one panel each")
    parser.add_argument("--n", type=positive_int, default=50, help="passages in each negative set (default 50)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random negatives and of t-SNE (default 0)")
    parser.add_argument("--output", required=True, help="PNG file to write")
    args = parser.parse_args(argv)
    check_output(args.output)

    import matplotlib

    matplotlib.use("Agg")
    from sklearn.manifold import TSNE

    from ance_ir.data import read_run
    from ance_ir.datasets import resolve_qrels, resolve_topics
    from ance_ir.index import load_dense_index, stored_vectors
    from ance_ir.plot.figures import panel_grid, save_png
    from ance_ir.search import encoder_for_index

    index = load_dense_index(args.index)
    topics, qrels, bm25 = resolve_topics(args.topics), resolve_qrels(args.qrels), read_run(args.bm25_run)
    for qid in args.queries:
        for name, known in (("--topics", topics), ("--qrels", qrels), ("--bm25-run", bm25)):
            if qid not in known:
                raise ValueError(f"{name}: has no query {qid!r}")
    model = encoder_for_index(index, args.encoder)
    vectors, row = stored_vectors(index), {d: i for i, d in enumerate(index.docids)}
    queries = model.encode_queries([topics[q] for q in args.queries])
    _, dense = index.search(queries, args.n + max(len(qrels[q]) for q in args.queries))
    fig, axes = panel_grid(len(args.queries), 5)
    for i, qid in enumerate(args.queries):
        groups = passage_groups(index.docids, dense[i], [d for d, _ in bm25[qid]], qrels[qid], args.n,
                                random.Random(args.seed))
        points = np.vstack([queries[i], *(vectors[row[d]] for docs in groups.values() for d in docs)])
        xy = TSNE(perplexity=min(30.0, (len(points) - 1) / 3), init="pca", random_state=args.seed) \
            .fit_transform(points.astype(np.float32))
        ax = axes[i]
        start = 1
        dr = set(groups["DR Neg"])
        for name, docs in groups.items():
            color, marker = GROUPS[name]
            overlap = "" if name in ("relevant", "DR Neg") else f" ({len(dr & set(docs)) / max(len(docs), 1):.0%} " \
                                                               "in DR Neg)"
            ax.scatter(xy[start:start + len(docs), 0], xy[start:start + len(docs), 1], c=color, marker=marker, s=18,
                       label=f"{name}{overlap}")
            start += len(docs)
        ax.scatter(xy[0, 0], xy[0, 1], c="black", marker="*", s=220, label="query")
        ax.set_title(f"{qid}: {topics[qid][:60]}", fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.legend(fontsize=7, loc="best")
    print(save_png(fig, args.output))
    return 0


if __name__ == "__main__":
    run_cli(main)
