"""Where everything of a training run lives inside its output folder."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RunDir:
    """The files and folders of one run (``OUTPUT``)."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    @property
    def config(self) -> Path:
        """The resolved settings (``config.json``)."""
        return self.root / "config.json"

    @property
    def inputs(self) -> Path:
        """The sha256 of each input file the settings name (``inputs.json``, :mod:`ance_ir.train.inputs`)."""
        return self.root / "inputs.json"

    @property
    def log(self) -> Path:
        """Training records and events, one JSON object a line."""
        return self.root / "log.jsonl"

    @property
    def checkpoints(self) -> Path:
        """``step-NNNNNNNN/`` folders: encoder (Hugging Face layout) and ``trainer_state.pt``."""
        return self.root / "checkpoints"

    @property
    def final(self) -> Path:
        """The trained model (no trainer state), written when the run ends: what encode/search take."""
        return self.root / "final"

    @property
    def negatives(self) -> Path:
        """Published ANN negatives, ``v-NNNNNNNN.jsonl.gz`` training groups (version = checkpoint step)."""
        return self.root / "negatives"

    @property
    def refresh(self) -> Path:
        """One ``step-NNNNNNNN.json`` record per refreshed checkpoint: metrics and timings."""
        return self.root / "refresh"

    @property
    def inferencer_status(self) -> Path:
        """What the inferencer is doing now (``{"state", "step", "pid", "since"}``)."""
        return self.root / "inferencer.json"

    @property
    def inferencer_stop(self) -> Path:
        """Written by the trainer to stop the inferencer (``drain`` or ``now``)."""
        return self.root / "inferencer.stop"

    @property
    def inferencer_log(self) -> Path:
        return self.root / "inferencer.log"

    @property
    def bm25_index(self) -> Path:
        """The Lucene index built for the bm25/dpr strategies when none is given."""
        return self.root / "bm25-index"

    @property
    def candidates(self) -> Path:
        """The negative sampler's candidate rankings, ``ranking-NNNNN.jsonl`` chunks and ``job.json``
        (:class:`~ance_ir.negatives.resume.ChunkedRetrieval`): retrieved once, read again by a resumed run."""
        return self.root / "candidates"
