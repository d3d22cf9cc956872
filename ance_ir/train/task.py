"""Training tasks: what a step trains on and how its loss comes from the model, chosen by name from :data:`TASKS`.

The trainer (:mod:`ance_ir.train.trainer`) owns the loop: optimizer, schedule, precision, DDP, gradient
accumulation, checkpoints and exact resume, logging, signals. A task owns the rest: it draws batches from
the training data with its own sampling state (saved with every checkpoint), runs the model however it
needs and returns the loss, and may plug :class:`~ance_ir.train.hooks.TrainingHook` s into the loop's step
boundaries (the ANCE refresh is one). A new task is one subclass with a ``name`` (and ``options``, name ->
default), decorated with :func:`register_task`.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from ance_ir.train.registry import Registry

if TYPE_CHECKING:
    from ance_ir.train.arguments import TrainConfig
    from ance_ir.train.dataset import TrainData
    from ance_ir.train.distributed import Distributed
    from ance_ir.train.hooks import TrainingHook
    from ance_ir.train.layout import RunDir
    from ance_ir.train.runlog import RunLog

TASKS = Registry("training task")
register_task = TASKS.register


@dataclass
class TaskContext:
    """What a task is built from."""

    config: TrainConfig
    data: TrainData
    run: RunDir
    dist: Distributed
    device: torch.device
    log: RunLog
    interrupted: Callable[[], bool]


@dataclass
class StepLoss:
    """A micro-batch's loss, the factor its gradient needs under DDP (the number of processes when the loss
    covers the gathered global batch, else 1), and whether it covers the whole global batch."""

    loss: torch.Tensor
    factor: int = 1
    whole_batch: bool = False


class TrainingTask(ABC):
    """Batches and loss for one kind of training."""

    name: ClassVar[str]
    options: ClassVar[dict[str, Any]] = {}
    #: the model kind this task trains (the default of ``model.kind``; a kind of another class is refused);
    #: None: any kind
    model_kind: ClassVar[str | None] = None
    #: whether the task honours ``task.grad_cache_chunk`` (:mod:`ance_ir.train.grad_cache`)
    grad_cache: ClassVar[bool] = False
    #: whether the task trains on (query, positive) pairs; False: on the corpus passages alone (``data.source:
    #: corpus`` is then enough)
    needs_pairs: ClassVar[bool] = True
    #: the loss the task computes itself, for the message refusing a ``loss.name`` (or a loss's options) it would
    #: ignore; None: the task uses the configured loss
    own_loss: ClassVar[str | None] = None
    #: which of the ``negatives``, ``refresh`` and ``loss`` sections (and ``passage_buckets``: the task setting
    #: of its passage batches) the task reads; a setting of another is refused as unused (None: it reads them all)
    reads: ClassVar[frozenset[str] | None] = None
    #: why the task reads none of a section's settings (``negatives``, ``refresh`` or ``loss`` -> reason), for the
    #: message refusing one, where the generic reason says less
    why_unread: ClassVar[dict[str, str]] = {}
    #: how to evaluate the ``final/`` model of a task that evaluates nothing while it trains (ends the message
    #: refusing ``refresh.eval_topics``)
    evaluate_with: ClassVar[str | None] = None

    def __init__(self, ctx: TaskContext, model: torch.nn.Module):
        self.ctx, self.model = ctx, model

    @classmethod
    def reads_setting(cls, name: str) -> bool:
        """Whether the task reads ``name``: a section of :attr:`reads`, or ``passage_buckets``."""
        return cls.reads is None or name in cls.reads

    @classmethod
    def evaluate_hint(cls) -> str:
        """``"; evaluate its final/ model with ..."`` (:attr:`evaluate_with`) to end a refusal, or ``""``."""
        return f"; evaluate its final/ model with {cls.evaluate_with}" if cls.evaluate_with else ""

    @classmethod  # noqa: B027 - optional; most tasks need nothing
    def check_config(cls, config: TrainConfig) -> None:
        """Raise ConfigError for settings this task cannot train with."""

    @property
    @abstractmethod
    def module(self) -> torch.nn.Module:
        """The trainable module whose ``forward`` the task calls (wrapped in DDP by the trainer)."""

    def start_events(self) -> list[dict[str, Any]]:
        """Records (``{"step": 0, "event": ...}``) the trainer logs after a new run's ``start`` event, not again
        when the run resumes: what the task set up before the first step."""
        return []

    @property
    @abstractmethod
    def examples(self) -> int:
        """Training examples in one epoch (sets the number of steps of ``optim.epochs``)."""

    @property
    @abstractmethod
    def epochs_done(self) -> float:
        """Fractional number of epochs consumed."""

    @abstractmethod
    def next_batch(self) -> Any:
        """This process's part of the next micro-batch; every process draws the same global batch."""

    @abstractmethod
    def loss(self, module: torch.nn.Module, batch: Any,
             autocast: Callable[[], contextlib.AbstractContextManager]) -> StepLoss:
        """The loss of ``batch``, running ``module`` (under ``autocast()`` for the forward pass)."""

    def hooks(self) -> list[TrainingHook]:
        """Components to run at step boundaries."""
        return []

    def state_dict(self) -> dict[str, Any]:
        """The sampling state to checkpoint (plain values; merged into ``trainer_state.pt``)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:  # noqa: B027 - optional
        """Restore what :meth:`state_dict` saved."""


def build_task(ctx: TaskContext, model: torch.nn.Module) -> TrainingTask:
    """The task named by ``config.task.name``."""
    return TASKS.lookup(ctx.config.task.name, "task.name")(ctx, model)
