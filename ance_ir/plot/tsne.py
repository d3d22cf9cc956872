"""``python -m ance_ir.plot.tsne``: the ANCE paper's Figure 1, a t-SNE map of what a dense retriever sees for a query.

    python -m ance_ir.plot.tsne --index INDEX --topics rag24-mini-test --qrels rag24-mini-test \\
        --bm25-run runs/rag24/bm25.test.trec.gz --queries Q1 Q2 Q3 Q4 --output docs/figure1.png

For each query (one panel), the index's vectors of its judged-relevant passages, of ``--n`` BM25 negatives (its
BM25 top ones, judged passages removed: the training negatives of BM25 Neg), ``--n`` random passages (Rand Neg) and
the ``--n`` unjudged passages the dense model itself ranks highest (the negatives it meets at test time, DR Neg;
ANCE's training negatives are these, from a recent checkpoint), with the query's vector, projected to two
dimensions by scikit-learn's t-SNE (seeded). The legend gives each negative set's overlap with DR Neg.

``--save-vectors FILE.npz`` also writes what the figure is drawn from (each panel's query, passage ids and
vectors), a few hundred KB that can be committed; ``--vectors FILE.npz`` draws the same figure from that file alone:

    python -m ance_ir.plot.tsne --vectors runs/rag24/figure1/warm.seed1.vectors.npz --output docs/figure1.png
"""

from __future__ import annotations

import argparse
import random
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ance_ir.cli import ArgumentParser, check_output, fill_defaults, positive_int, run_cli
from ance_ir.data import InputError, atomic_write

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


@dataclass
class Panel:
    """One query's panel: its id and text, its vector, and each group's passage ids and vectors."""

    qid: str
    text: str
    query: np.ndarray
    docids: dict[str, list[str]]
    vectors: dict[str, np.ndarray]


def collect(args: argparse.Namespace) -> list[Panel]:
    """The panels of ``args.queries`` from a dense index, its query encoder, the qrels and the BM25 run."""
    from ance_ir.data import read_run
    from ance_ir.datasets import resolve_qrels, resolve_topics
    from ance_ir.index import single_vector_index, stored_vectors
    from ance_ir.search import encoder_for_index

    index = single_vector_index(args.index)
    topics, qrels, bm25 = resolve_topics(args.topics), resolve_qrels(args.qrels), read_run(args.bm25_run)
    for qid in args.queries:
        for name, known in (("--topics", topics), ("--qrels", qrels), ("--bm25-run", bm25)):
            if qid not in known:
                raise ValueError(f"{name}: has no query {qid!r}")
    model = encoder_for_index(index, args.encoder)
    vectors, row = stored_vectors(index), {d: i for i, d in enumerate(index.docids)}
    queries = model.encode_queries([topics[q] for q in args.queries])
    _, dense = index.search(queries, args.n + max(len(qrels[q]) for q in args.queries))
    panels = []
    for i, qid in enumerate(args.queries):
        groups = passage_groups(index.docids, dense[i], [d for d, _ in bm25[qid]], qrels[qid], args.n,
                                random.Random(args.seed))
        panels.append(Panel(qid, topics[qid], queries[i], groups,
                            {name: vectors[np.asarray([row[d] for d in docs], dtype=np.int64)]
                             for name, docs in groups.items()}))
    return panels


def save_panels(panels: list[Panel], path: str | Path) -> None:
    """``panels`` as one NPZ file (written atomically), what ``--vectors`` reads."""
    arrays: dict[str, np.ndarray] = {"qids": np.array([p.qid for p in panels]),
                                     "texts": np.array([p.text for p in panels])}
    for i, panel in enumerate(panels):
        arrays[f"{i}/query"] = panel.query
        for name in GROUPS:
            arrays[f"{i}/{name}/docids"] = np.array(panel.docids[name], dtype=str)
            arrays[f"{i}/{name}/vectors"] = panel.vectors[name]
    with atomic_write(path, "wb") as f:
        np.savez_compressed(f, **arrays)


def load_panels(path: str | Path) -> list[Panel]:
    """The panels :func:`save_panels` wrote."""
    try:
        data = np.load(path, allow_pickle=False)
        panels = [Panel(str(qid), str(text), data[f"{i}/query"],
                        {name: [str(d) for d in data[f"{i}/{name}/docids"]] for name in GROUPS},
                        {name: data[f"{i}/{name}/vectors"] for name in GROUPS})
                  for i, (qid, text) in enumerate(zip(data["qids"], data["texts"], strict=True))]
        if not panels:
            raise ValueError("no panel")
        dims = {v.shape[-1] for p in panels for v in (p.query, *p.vectors.values())}
        if len(dims) != 1:
            raise ValueError(f"vectors of several dimensions {sorted(dims)}")
        return panels
    except FileNotFoundError:
        raise InputError(path, "no such file") from None
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as e:
        raise InputError(path, f"not a vectors file of python -m ance_ir.plot.tsne --save-vectors ({e})") from None


def draw(panels: list[Panel], seed: int, output: str | Path) -> Path:
    """One t-SNE panel per query, written to ``output`` as a PNG."""
    from sklearn.manifold import TSNE

    from ance_ir.plot.figures import panel_grid, save_png

    fig, axes = panel_grid(len(panels), 5)
    for ax, panel in zip(axes, panels, strict=True):
        points = np.vstack([panel.query, *(panel.vectors[name] for name in GROUPS)])
        xy = TSNE(perplexity=min(30.0, (len(points) - 1) / 3), init="pca", random_state=seed) \
            .fit_transform(points.astype(np.float32))
        start = 1
        dr = set(panel.docids["DR Neg"])
        for name, (color, marker) in GROUPS.items():
            docs = panel.docids[name]
            overlap = "" if name in ("relevant", "DR Neg") else f" ({len(dr & set(docs)) / max(len(docs), 1):.0%} " \
                                                               "in DR Neg)"
            ax.scatter(xy[start:start + len(docs), 0], xy[start:start + len(docs), 1], c=color, marker=marker, s=18,
                       label=f"{name}{overlap}")
            start += len(docs)
        ax.scatter(xy[0, 0], xy[0, 1], c="black", marker="*", s=220, label="query")
        ax.set_title(f"{panel.qid}: {panel.text[:60]}", fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.legend(fontsize=7, loc="best")
    return save_png(fig, output)


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m ance_ir.plot.tsne", description=__doc__)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--index", help="dense index folder (python -m ance_ir.encode)")
    source.add_argument("--vectors", help="draw from this file of --save-vectors instead")
    parser.add_argument("--encoder", help="query encoder (default: the one in the index's meta.json)")
    parser.add_argument("--topics", help="topics TSV file or name (with --index)")
    parser.add_argument("--qrels", help="qrels file or name (with --index)")
    parser.add_argument("--bm25-run", help="BM25 TREC run of the topics (with --index)")
    parser.add_argument("--queries", nargs="+", help="query ids, one panel each (with --index)")
    parser.add_argument("--n", type=positive_int, help="passages in each negative set (default 50)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random negatives and of t-SNE (default 0)")
    parser.add_argument("--save-vectors", help="also write the panels' vectors to this NPZ file")
    parser.add_argument("--output", required=True, help="PNG file to write")
    args = parser.parse_args(argv)
    parser.require(args, "index", "topics", "qrels", "bm25_run", "queries")
    parser.refuse(args, "vectors", "encoder", "topics", "qrels", "bm25_run", "queries", "n")
    fill_defaults(args, {"n": 50})
    check_output(args.output)
    if args.save_vectors:
        check_output(args.save_vectors)

    import matplotlib

    matplotlib.use("Agg")
    panels = load_panels(args.vectors) if args.vectors else collect(args)
    if args.save_vectors:
        save_panels(panels, args.save_vectors)
    print(draw(panels, args.seed, args.output))
    return 0


if __name__ == "__main__":
    run_cli(main)
