"""Training curves as PNG files (``python -m ance_ir.plot RUN_DIR``)."""

from ance_ir.plot.curves import RunCurves, plot_runs

__all__ = ["RunCurves", "plot_runs"]
