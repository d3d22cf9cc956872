"""Training: a generic loop (:mod:`~ance_ir.train.trainer`) around registered training tasks, losses, negative
samplers and data sources; the ANCE refresh as a hook (:mod:`~ance_ir.train.refresher`).

``python -m ance_ir.train --config FILE.yaml [--flag value ...]`` trains; ``python -m ance_ir.train.inferencer
OUTPUT`` is the asynchronous refresher (started by the trainer in async mode); ``python -m ance_ir.plot
OUTPUT`` draws the curves.

Names are imported on first use, so that ``python -m ance_ir.train --help`` does not load torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "ContrastiveLoss": "ance_ir.train.loss",
    "ContrastiveTask": "ance_ir.train.contrastive",
    "DATA_SOURCES": "ance_ir.train.dataset",
    "DataSource": "ance_ir.train.dataset",
    "GroupScores": "ance_ir.train.loss",
    "LOSSES": "ance_ir.train.loss",
    "NEGATIVE_STRATEGIES": "ance_ir.train.negatives",
    "NegativeSampler": "ance_ir.train.negatives",
    "NegativesStore": "ance_ir.train.store",
    "RefreshJob": "ance_ir.train.refresh",
    "RefreshRecords": "ance_ir.train.store",
    "RunDir": "ance_ir.train.layout",
    "StepLoss": "ance_ir.train.task",
    "TASKS": "ance_ir.train.task",
    "TaskContext": "ance_ir.train.task",
    "TrainConfig": "ance_ir.train.arguments",
    "TrainData": "ance_ir.train.dataset",
    "Trainer": "ance_ir.train.trainer",
    "TrainingHook": "ance_ir.train.hooks",
    "TrainingTask": "ance_ir.train.task",
    "build_config": "ance_ir.train.arguments",
    "build_loss": "ance_ir.train.loss",
    "latest_checkpoint": "ance_ir.train.checkpoint",
    "list_checkpoints": "ance_ir.train.checkpoint",
    "parse_args": "ance_ir.train.arguments",
    "read_log": "ance_ir.train.runlog",
    "read_negatives_file": "ance_ir.train.negatives",
    "refresh_checkpoint": "ance_ir.train.refresh",
    "register_data_source": "ance_ir.train.dataset",
    "register_loss": "ance_ir.train.loss",
    "register_negatives": "ance_ir.train.negatives",
    "register_task": "ance_ir.train.task",
    "train": "ance_ir.train.trainer",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'ance_ir.train' has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
