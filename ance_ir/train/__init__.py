"""ANCE training: BM25 warm-up, asynchronously refreshed ANN negatives, and the paper's baselines.

``python -m ance_ir.train --config FILE.yaml [--flag value ...]`` trains; ``python -m ance_ir.train.inferencer
OUTPUT`` is the asynchronous refresher (started by the trainer in async mode); ``python -m ance_ir.plot
OUTPUT`` draws the curves.
"""

from ance_ir.train.arguments import TrainConfig, build_config, parse_args
from ance_ir.train.checkpoint import latest_checkpoint, list_checkpoints
from ance_ir.train.layout import RunDir
from ance_ir.train.loss import LOSSES, ContrastiveLoss, build_loss, register_loss
from ance_ir.train.negatives import NEGATIVE_STRATEGIES, NegativeSampler, read_negatives_file, register_negatives
from ance_ir.train.refresh import RefreshJob, refresh_checkpoint
from ance_ir.train.runlog import read_log
from ance_ir.train.store import NegativesStore, RefreshRecords
from ance_ir.train.trainer import Trainer, train

__all__ = [
    "LOSSES", "NEGATIVE_STRATEGIES", "ContrastiveLoss", "NegativeSampler", "NegativesStore", "RefreshJob",
    "RefreshRecords", "RunDir", "TrainConfig", "Trainer", "build_config", "build_loss", "latest_checkpoint",
    "list_checkpoints", "parse_args", "read_log", "read_negatives_file", "refresh_checkpoint", "register_loss",
    "register_negatives", "train",
]
