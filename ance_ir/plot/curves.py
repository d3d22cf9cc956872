"""Draw a training run's curves from ``log.jsonl`` and ``refresh/*.json`` with matplotlib (no display needed).

Figures: ``loss.png`` (loss and learning rate), ``grad_norms.png`` (total and bottom/middle/top thirds of the
transformer layers, as in the ANCE paper's Fig. 4), ``dev_metrics.png`` (eval metrics of each refreshed
checkpoint), ``negatives.png`` (staleness of the negatives in use, and training speed with the steps taken
while the inferencer was refreshing marked). A figure with nothing to show is not written. Several runs
are drawn into the same figures, labelled by folder name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ance_ir.eval.measures import label
from ance_ir.plot.figures import save_png
from ance_ir.train.layout import RunDir
from ance_ir.train.modeling import GROUPS
from ance_ir.train.runlog import read_log
from ance_ir.train.store import RefreshRecords


@dataclass
class RunCurves:
    """The training records and refresh records of one run."""

    name: str
    training: list[dict[str, Any]]
    refreshes: list[dict[str, Any]]

    @classmethod
    def load(cls, folder: str | Path) -> RunCurves:
        run = RunDir(Path(folder))
        records = read_log(run.log)
        return cls(run.root.resolve().name, [r for r in records if "loss" in r],
                   RefreshRecords(run.refresh).read_all())

    def series(self, key: str) -> tuple[list[int], list[float]]:
        """Steps and values of a training-record field, where it has a value."""
        points = [(r["step"], r[key]) for r in self.training if r.get(key) is not None]
        return [s for s, _ in points], [v for _, v in points]


def _label(run: RunCurves, what: str, several: bool) -> str:
    return f"{run.name}: {what}" if several else what


def _finish(ax: Axes, ylabel: str, log: bool = False) -> None:
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small")


def plot_loss(runs: Sequence[RunCurves], path: Path) -> Path | None:
    if not any(r.training for r in runs):
        return None
    fig = Figure(figsize=(8, 6))
    loss_ax, lr_ax = fig.subplots(2, 1, sharex=True)
    for run in runs:
        loss_ax.plot(*run.series("loss"), label=run.name if len(runs) > 1 else None)
        lr_ax.plot(*run.series("lr"), label=run.name if len(runs) > 1 else None)
    loss_ax.set_title("training loss")
    _finish(loss_ax, "loss")
    _finish(lr_ax, "learning rate")
    return save_png(fig, path, dpi=120)


def plot_grad_norms(runs: Sequence[RunCurves], path: Path) -> Path | None:
    if not any(r.series("grad_norm")[0] for r in runs):
        return None
    fig = Figure(figsize=(8, 4.5))
    ax = fig.subplots()
    for run in runs:
        for key, what in (("grad_norm", "total"), *((f"grad_norm_{g}", f"{g} layers") for g in GROUPS)):
            steps, values = run.series(key)
            if steps:
                ax.plot(steps, values, label=_label(run, what, len(runs) > 1),
                        linestyle="--" if key == "grad_norm" else "-")
    ax.set_title("gradient norm (before clipping)")
    _finish(ax, "L2 norm", log=True)
    return save_png(fig, path, dpi=120)


def plot_dev_metrics(runs: Sequence[RunCurves], path: Path) -> Path | None:
    names = list(dict.fromkeys(m for run in runs for r in run.refreshes for m in r.get("metrics", {})))
    if not names:
        return None
    fig = Figure(figsize=(8, 4.5))
    ax = fig.subplots()
    for run in runs:
        for name in names:
            points = [(r["step"], r["metrics"][name]) for r in run.refreshes if name in r.get("metrics", {})]
            if points:
                ax.plot(*zip(*points, strict=True), marker="o", markersize=3,
                        label=_label(run, label(name), len(runs) > 1))
    ax.set_title("eval metrics of each refreshed checkpoint")
    _finish(ax, "value")
    return save_png(fig, path, dpi=120)


def plot_negatives(runs: Sequence[RunCurves], path: Path) -> Path | None:
    if not any(r.series("staleness")[0] for r in runs):
        return None
    fig = Figure(figsize=(8, 6))
    stale_ax, speed_ax = fig.subplots(2, 1, sharex=True)
    for run in runs:
        several = len(runs) > 1
        stale_ax.plot(*run.series("staleness"), drawstyle="steps-post", label=run.name if several else None)
        busy = [r for r in run.training if r.get("inferencer_busy")]
        idle = [r for r in run.training if not r.get("inferencer_busy")]
        for records, what, marker in ((idle, "no refresh running", "o"), (busy, "refresh running", "x")):
            if records:
                speed_ax.scatter([r["step"] for r in records], [r["steps_per_s"] for r in records], marker=marker,
                                 s=12, label=_label(run, what, several))
    stale_ax.set_title("negatives staleness (steps since their checkpoint) and training speed")
    _finish(stale_ax, "staleness (steps)")
    _finish(speed_ax, "steps/s")
    return save_png(fig, path, dpi=120)


def plot_runs(folders: Sequence[str | Path], output: str | Path) -> list[Path]:
    """Draw every figure with something to show for the runs in ``folders`` into ``output``."""
    runs = [RunCurves.load(f) for f in folders]
    if not any(r.training for r in runs):
        raise ValueError(f"{', '.join(map(str, folders))}: no training records in log.jsonl yet")
    output = Path(output)
    figures = [plot_loss(runs, output / "loss.png"), plot_grad_norms(runs, output / "grad_norms.png"),
               plot_dev_metrics(runs, output / "dev_metrics.png"), plot_negatives(runs, output / "negatives.png")]
    return [f for f in figures if f is not None]
