"""Figure helpers shared by the plots: a grid of panels, and writing a PNG atomically."""

from __future__ import annotations

from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ance_ir.data import atomic_write


def panel_grid(count: int, height: float) -> tuple[Figure, list[Axes]]:
    """A figure of ``count`` panels, two to a row, each 6 wide and ``height`` high."""
    columns = min(2, count)
    rows = -(-count // columns)
    fig = Figure(figsize=(6 * columns, height * rows))
    return fig, [fig.add_subplot(rows, columns, i + 1) for i in range(count)]


def save_png(fig: Figure, path: str | Path, dpi: int = 110) -> Path:
    """Lay ``fig`` out and write it to ``path`` as a PNG, atomically."""
    fig.tight_layout()
    with atomic_write(path, "wb") as f:
        fig.savefig(f, format="png", dpi=dpi)
    return Path(path)
