"""The query generator task (``task: generator``): a :class:`~ance_ir.modeling.generator.QueryGenerator` learns to
write a passage's query, teacher-forced token cross-entropy on the (passage -> query) pairs of the training data
(with ``data.source: qrels``, every passage judged >= ``data.min_positive_grade`` for a training topic, with that
topic's text as the target). Batches of ``task.batch_size`` pairs are drawn epoch by epoch in a seeded order
(checkpointed); the loss is the mean over the target tokens of the batch (each process's own, under torchrun). No
negatives, no refresh: a generator indexes nothing (``python -m ance_ir.expand`` uses it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch

from ance_ir.modeling.generator import IGNORE, QueryGenerator
from ance_ir.train.dataset import PairStream
from ance_ir.train.settings import ConfigError
from ance_ir.train.task import StepLoss, TaskContext, TrainingTask, register_task

#: model settings that belong to dual encoders
_DENSE_SETTINGS = ("pooling", "normalize", "head")


@register_task
class GeneratorTask(TrainingTask):
    """Teacher-forced cross-entropy of each training query given its positive passage."""

    name = "generator"
    model_kind = "generator"
    own_loss = "the query tokens' cross-entropy"
    reads = frozenset()
    why_unread = {"negatives": "a generator is trained on (passage, query) pairs alone, without negatives",
                  "refresh": "a generator retrieves nothing to evaluate; measure its perplexity (QueryGenerator."
                             "perplexity) or expand a corpus with it (python -m ance_ir.expand) and search that"}

    def __init__(self, ctx: TaskContext, model: QueryGenerator):
        super().__init__(ctx, model)
        data = ctx.data
        self.pairs = [(data.texts[docid], data.queries[qid]) for qid, docid in data.pairs]
        self.stream = PairStream(len(self.pairs), ctx.config.seed)

    @classmethod
    def check_config(cls, config: Any) -> None:
        for name in _DENSE_SETTINGS:
            if getattr(config.model, name) is not None:
                raise ConfigError(f"model.{name}", "is a dual-encoder setting; a generator takes "
                                                   "model.query_max_length and model.passage_max_length")

    @property
    def module(self) -> torch.nn.Module:
        return self.model

    @property
    def examples(self) -> int:
        return len(self.pairs)

    @property
    def epochs_done(self) -> float:
        return self.stream.epochs_done

    def next_batch(self) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        chosen = self.ctx.dist.local_share([self.pairs[i] for i in self.stream.take(self.ctx.config.task.batch_size)])
        return (self.model.tokenize_passages([p for p, _ in chosen]),
                self.model.tokenize_queries([q for _, q in chosen]))

    def loss(self, module: torch.nn.Module, batch: tuple[dict[str, torch.Tensor], torch.Tensor],
             autocast: Callable[[], contextlib.AbstractContextManager]) -> StepLoss:
        inputs, labels = batch
        with autocast():
            logits = module(inputs, labels)
        losses = QueryGenerator.token_losses(logits, labels)
        return StepLoss(self.ctx.dist.global_mean(losses.sum(), int((labels != IGNORE).sum())))

    def state_dict(self) -> dict[str, Any]:
        return {"data": self.stream.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.stream.load_state_dict(state["data"])
