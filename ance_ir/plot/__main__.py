"""``python -m ance_ir.plot RUN_DIR [RUN_DIR ...] [--output DIR]``: training curves to PNG.

    python -m ance_ir.plot train-runs/rag24-mini/ance                  # -> train-runs/rag24-mini/ance/plots/
    python -m ance_ir.plot train-runs/rag24-mini/{ance,dpr,bm25} --output plots/rag24-mini

Draws loss and learning rate, gradient norms of the bottom/middle/top layers, eval metrics per refresh,
and negatives staleness with training speed. Works on a run that is still training.
"""

from __future__ import annotations

from pathlib import Path

from ance_ir.cli import ArgumentParser, check_output, run_cli


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m ance_ir.plot", description=__doc__)
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR", help="training output folder(s)")
    parser.add_argument("--output", help="folder for the PNGs (default: RUN_DIR/plots for a single run)")
    args = parser.parse_args(argv)
    if args.output is None and len(args.runs) > 1:
        parser.error("--output is needed when plotting several runs")

    output = check_output(args.output or Path(args.runs[0]) / "plots", folder=True)

    from ance_ir.plot.curves import plot_runs

    for path in plot_runs(args.runs, output):
        print(path)
    return 0


if __name__ == "__main__":
    run_cli(main)
