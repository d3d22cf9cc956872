"""``python -m ance_ir.plot.scores``: the ANCE paper's Figure 3, each model's top dense scores on test queries and
how far its training negatives are from the negatives it meets at test time.

    python -m ance_ir.plot.scores --topics rag24-mini-test --qrels rag24-mini-test --queries 10 \\
        --model "BM25 → Rand Neg" INDEX NEGATIVES_RUN --model ANCE INDEX NEGATIVES_RUN --output docs/figure3.png

Each ``--model``: a label, the model's dense index (``python -m ance_ir.encode``; its queries are encoded by the
encoder in its ``meta.json``) and a run of the negatives its training method gives the same topics (the top
passages of BM25 for BM25 Neg, random passages for Rand Neg, the run of the checkpoint whose negatives ANCE trained
on last). One panel per model, one line per query for ``--queries`` topics drawn with ``--seed``: the model's top
``--top`` scores by rank minus the query's mean score over the whole corpus (the paper's y axis; with inner-product
scores the mean is the query vector times the mean passage vector). The panel's title gives the overlap: the share
of the model's top ``--top`` unjudged passages (its negatives at test time) found among the top ``--top`` unjudged
passages of the negatives run, averaged over all the topics; one line per model is printed with the overlap and
the drawn queries' mean centred score at the first and the last rank.

``--save-lines FILE.json`` also writes what the figure is drawn from (each panel's overlap and drawn lines, about
100 KB, that can be committed); ``--lines FILE.json`` draws the same figure from that file alone:

    python -m ance_ir.plot.scores --lines runs/rag24/figure3/scores.seed2.json --output docs/figure3-scores.png
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ance_ir.cli import ArgumentParser, check_output, fill_defaults, positive_int, run_cli
from ance_ir.data import InputError, atomic_write


def unjudged(ranking: Sequence[str], judged: Mapping[str, int], n: int) -> list[str]:
    """The first ``n`` passages of ``ranking`` without a judgment (any grade): the negatives it holds."""
    return [d for d in ranking if d not in judged][:n]


def overlap(test: Sequence[str], train: Sequence[str], judged: Mapping[str, int], n: int) -> float:
    """The share of the top ``n`` unjudged passages of ``test`` that are among the top ``n`` unjudged of ``train``."""
    met = unjudged(test, judged, n)
    return len(set(met) & set(unjudged(train, judged, n))) / max(len(met), 1)


def centred_scores(scores: np.ndarray, query: np.ndarray, mean_passage: np.ndarray) -> np.ndarray:
    """``scores`` minus the query's mean inner product with the corpus (``query`` times the mean passage vector)."""
    return scores - float(query @ mean_passage)


@dataclass
class Panel:
    """One model's panel: its label, its mean overlap over ``queries`` topics, and the drawn topics' centred
    scores by rank."""

    label: str
    overlap: float
    queries: int
    lines: dict[str, np.ndarray]


def collect(args: argparse.Namespace) -> list[Panel]:
    """Each ``--model``'s panel, from its index and negatives run."""
    from ance_ir.data import read_run
    from ance_ir.datasets import resolve_qrels, resolve_topics
    from ance_ir.index import single_vector_index, stored_vectors
    from ance_ir.search import encoder_for_index

    topics, qrels = resolve_topics(args.topics), resolve_qrels(args.qrels)
    qids = [q for q in topics if q in qrels]
    if not qids:
        raise InputError(args.qrels, f"judges no topic of --topics {args.topics}")
    drawn = sorted(random.Random(args.seed).sample(qids, min(args.queries, len(qids))), key=qids.index)
    panels = []
    for label, index_path, negatives_path in args.model:
        negatives = read_run(negatives_path)
        missing = [q for q in qids if q not in negatives]
        if missing:
            raise ValueError(f"{negatives_path}: has no query {missing[0]!r} of --topics")
        index = single_vector_index(index_path)
        queries = encoder_for_index(index, None).encode_queries([topics[q] for q in qids])
        scores, ranked = index.search(queries, args.top + max(len(qrels[q]) for q in qids))
        mean_passage = stored_vectors(index).mean(axis=0)
        shares = [overlap(ranked[i], [d for d, _ in negatives[q]], qrels[q], args.top) for i, q in enumerate(qids)]
        lines = {q: centred_scores(scores[i][:args.top], queries[i], mean_passage) for i, q in enumerate(qids)
                 if q in drawn}
        panels.append(Panel(label, float(np.mean(shares)), len(qids), lines))
    return panels


def save_panels(panels: list[Panel], path: str | Path) -> None:
    """``panels`` as one JSON file (written atomically), what ``--lines`` reads."""
    data = [{"label": p.label, "overlap": p.overlap, "queries": p.queries,
             "lines": {q: line.tolist() for q, line in p.lines.items()}} for p in panels]
    with atomic_write(path) as f:
        json.dump(data, f, indent=1, ensure_ascii=False)
        f.write("\n")


def load_panels(path: str | Path) -> list[Panel]:
    """The panels :func:`save_panels` wrote."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        panels = [Panel(str(p["label"]), float(p["overlap"]), int(p["queries"]),
                        {str(q): np.asarray(line, dtype=np.float32) for q, line in p["lines"].items()})
                  for p in data]
        if not panels or not all(panel.lines and all(len(line) for line in panel.lines.values())
                                 for panel in panels):
            raise ValueError("a panel without lines, or an empty line")
        return panels
    except FileNotFoundError:
        raise InputError(path, "no such file") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise InputError(path, f"not a lines file of python -m ance_ir.plot.scores --save-lines ({e})") from None


def draw(panels: list[Panel], output: str | Path) -> Path:
    """One panel per model, one line per drawn topic, written to ``output`` as a PNG."""
    from ance_ir.plot.figures import panel_grid, save_png

    fig, axes = panel_grid(len(panels), 4)
    for ax, panel in zip(axes, panels, strict=True):
        for qid, line in panel.lines.items():
            ax.plot(np.arange(1, len(line) + 1), line, linewidth=1, label=qid)
        ax.set_title(f"{panel.label} ({panel.overlap:.0%} overlap)", fontsize=10)
        ax.set_xlabel("rank")
        ax.set_ylabel("score minus the corpus mean")
    axes[0].legend(fontsize=6, loc="upper right", ncol=2)
    return save_png(fig, output)


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m ance_ir.plot.scores", description=__doc__)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", nargs=3, action="append", metavar=("LABEL", "INDEX", "NEGATIVES"),
                        help="a panel: its label, the model's dense index and the run of its training negatives")
    source.add_argument("--lines", help="draw from this file of --save-lines instead")
    parser.add_argument("--topics", help="topics TSV file or name (with --model)")
    parser.add_argument("--qrels", help="qrels file or name, judged passages are not negatives (with --model)")
    parser.add_argument("--queries", type=positive_int, help="queries drawn per panel (default 10)")
    parser.add_argument("--top", type=positive_int, help="ranks drawn and compared (default 100)")
    parser.add_argument("--seed", type=int, help="seed of the drawn queries (default 0)")
    parser.add_argument("--save-lines", help="also write the panels' overlaps and lines to this JSON file")
    parser.add_argument("--output", required=True, help="PNG file to write")
    args = parser.parse_args(argv)
    parser.require(args, "model", "topics", "qrels")
    parser.refuse(args, "lines", "topics", "qrels", "queries", "top", "seed")
    fill_defaults(args, {"queries": 10, "top": 100, "seed": 0})
    check_output(args.output)
    if args.save_lines:
        check_output(args.save_lines)

    import matplotlib

    matplotlib.use("Agg")
    panels = load_panels(args.lines) if args.lines else collect(args)
    if args.save_lines:
        save_panels(panels, args.save_lines)
    for panel in panels:
        first, last = (float(np.mean([line[r] for line in panel.lines.values()])) for r in (0, -1))
        print(f"{panel.label}: overlap {panel.overlap:.1%} over {panel.queries} queries; drawn queries' centred "
              f"score at rank 1 {first:.3f}, at rank {len(next(iter(panel.lines.values())))} {last:.3f}")
    print(draw(panels, args.output))
    return 0


if __name__ == "__main__":
    run_cli(main)
