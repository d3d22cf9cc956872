"""Components that run at the training loop's step boundaries (the ANCE refresh is one).

The trainer calls them in this order: ``initial_checkpoint`` (before the first step of a new run),
``propose`` (rank 0, at every boundary) then ``apply`` (every rank, with rank 0's proposal), ``begin`` (once,
after the first boundary), ``after_step``, ``checkpoint_due``, ``log_fields`` (when a log record is written),
``busy`` (when a Ctrl-C arrives),
and at the end ``finish`` (normal end) or ``stop`` (pause, interruption, error). ``state_dict`` is merged
into each checkpoint's trainer state and handed back to ``load_state_dict`` on resume.
"""

from __future__ import annotations

from typing import Any


class TrainingHook:
    """Does nothing at every boundary; subclasses override what they need."""

    def initial_checkpoint(self) -> bool:
        """Whether a new run must save a checkpoint at step 0 (e.g. for an initial refresh)."""
        return False

    def propose(self, step: int) -> Any:
        """Rank 0, between steps: a value every rank then gets in :meth:`apply` (None: nothing to do)."""
        return None

    def apply(self, step: int, proposal: Any) -> None:
        """Every rank, between steps: act on rank 0's proposal."""

    def begin(self, step: int) -> None:
        """Once, after the first boundary of this process's training (start or resume)."""

    def after_step(self, step: int) -> None:
        """After each optimizer step."""

    def checkpoint_due(self, step: int) -> bool:
        """Whether a checkpoint must be saved after ``step``."""
        return False

    def busy(self) -> str | None:
        """What the step boundary is waiting for now (e.g. ``"the refresh of step 20's checkpoint"``), said when a
        Ctrl-C arrives; None when nothing."""
        return None

    def log_fields(self, steps: int) -> dict[str, Any]:
        """Fields for the log record of the last ``steps`` steps; ``pause_s`` adds to the trainer's pauses."""
        return {}

    def finish(self, step: int) -> None:
        """The run reached its last step."""

    def stop(self) -> None:
        """The run pauses, is interrupted or failed: release processes."""

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore from a checkpoint's trainer state."""
