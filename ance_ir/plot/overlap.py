"""``python -m ance_ir.plot.overlap``: the ANCE paper's Figure 3 over training, how much of what a model meets at
test time its training negatives cover, checkpoint by checkpoint.

    python -m ance_ir.plot.overlap --qrels rag24-mini-test --curves runs/rag24/figure3/curves.seed2.json \\
        --output docs/figure3-overlap.png

``--curves`` is a JSON file ``{"LABEL": [{"step": S, "test": RUN, "negatives": RUN}, ...], ...}`` (paths relative
to its folder): for each checkpoint of a model, its search of the test topics and the run of the negatives its
training method gave it at that step (BM25's top passages for BM25 Neg, random passages for Rand Neg; for ANCE the
search of the checkpoint whose negatives it was training on). The overlap at a step is the share of the model's top
``--top`` unjudged passages (its negatives at test time) found among the top ``--top`` unjudged passages of the
negatives run, averaged over the judged topics of the test run: one line per label, and a table on stdout.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ance_ir.cli import ArgumentParser, check_output, positive_int, run_cli
from ance_ir.data import InputError, Qrels, Run, read_run
from ance_ir.plot.scores import overlap


def read_curves(path: str | Path) -> dict[str, list[tuple[int, Path, Path]]]:
    """The ``--curves`` file: each label's (step, test run, negatives run), by step."""
    path = Path(path)
    def unique_labels(pairs: list[tuple[str, object]]) -> dict[str, object]:
        labels = [label for label, _ in pairs]
        twice = next((label for i, label in enumerate(labels) if label in labels[:i]), None)
        if twice is not None:
            raise ValueError(f"key {twice!r} is given twice (a label names one curve)")
        return dict(pairs)

    try:
        spec = json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=unique_labels)
    except FileNotFoundError:
        raise InputError(path, "no such file") from None
    except ValueError as e:
        raise InputError(path, f"malformed JSON ({e})") from None
    if not isinstance(spec, dict) or not spec:
        raise InputError(path, "expected an object of labels, each a list of {step, test, negatives}")
    curves = {}
    for label, points in spec.items():
        if not isinstance(points, list) or not points or not all(
                isinstance(p, dict) and type(p.get("step")) is int and isinstance(p.get("test"), str)
                and isinstance(p.get("negatives"), str) for p in points):
            raise InputError(path, f"{label!r}: expected a non-empty list of {{step: int, test: RUN, negatives: RUN}}")
        steps = [p["step"] for p in points]
        if len(set(steps)) != len(steps):
            raise InputError(path, f"{label!r}: a step is listed twice")
        curves[label] = sorted((p["step"], path.parent / p["test"], path.parent / p["negatives"]) for p in points)
    return curves


def mean_overlap(test: Run, negatives: Run, qrels: Qrels, top: int, source: Path) -> float:
    """The overlap of ``test``'s and ``negatives``' top ``top`` unjudged passages, averaged over the judged topics."""
    qids = [q for q in test if q in qrels]
    if not qids:
        raise InputError(source, "no query of this run is judged in --qrels")
    missing = [q for q in qids if q not in negatives]
    if missing:
        raise ValueError(f"the negatives run of {source} has no query {missing[0]!r}")
    return float(np.mean([overlap([d for d, _ in test[q]], [d for d, _ in negatives[q]], qrels[q], top)
                          for q in qids]))


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m ance_ir.plot.overlap", description=__doc__)
    parser.add_argument("--curves", required=True, help="JSON file of each model's checkpoints and runs")
    parser.add_argument("--qrels", required=True, help="qrels file or name (judged passages are not negatives)")
    parser.add_argument("--top", type=positive_int, default=100, help="negatives compared per query (default 100)")
    parser.add_argument("--output", required=True, help="PNG file to write")
    args = parser.parse_args(argv)
    check_output(args.output)
    curves = read_curves(args.curves)

    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from ance_ir.datasets import resolve_qrels
    from ance_ir.plot.figures import save_png

    qrels = resolve_qrels(args.qrels)
    fig = Figure(figsize=(7, 4.5))
    ax = fig.add_subplot()
    print("label\tstep\toverlap")
    for label, points in curves.items():
        curve: list[tuple[int, float]] = []
        for step, test, negatives in points:
            curve.append((step, mean_overlap(read_run(test), read_run(negatives), qrels, args.top, test)))
            print(f"{label}\t{step}\t{curve[-1][1]:.4f}")
        ax.plot([s for s, _ in curve], [100 * v for _, v in curve], marker="o", label=label)
    ax.set_xlabel("training step")
    ax.set_ylabel(f"overlap of training and testing negatives (%, top {args.top})")
    ax.set_ylim(0, 100)
    ax.legend()
    print(save_png(fig, args.output))
    return 0


if __name__ == "__main__":
    run_cli(main)
