"""The DeepCT task (``task: deepct``): a :class:`~ance_ir.modeling.deepct.DeepCT` model regressing each word of a
judged-relevant passage to its query term recall, ``QTR(t, d)`` over the training queries judged relevant to ``d``
(:func:`~ance_ir.modeling.deepct.term_recall`), by mean squared error over the words the model sees (the first
``max_length`` word pieces). Every passage with a relevant training query is one example; batches of
``task.batch_size`` passages are drawn epoch by epoch in a seeded order (checkpointed). No negatives, no refresh.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

import torch

from ance_ir.modeling.deepct import DeepCT, term_recall, words
from ance_ir.train.dataset import PairStream
from ance_ir.train.settings import ConfigError
from ance_ir.train.task import StepLoss, TaskContext, TrainingTask, register_task


class WordScorer(torch.nn.Module):
    """``forward(inputs, first)`` -> each word's score ``[B, W]`` (one ``forward`` per step, as DDP needs)."""

    def __init__(self, model: DeepCT):
        super().__init__()
        self.model = model

    def forward(self, inputs: Mapping[str, torch.Tensor], first: torch.Tensor) -> torch.Tensor:
        return self.model.word_scores(inputs, first)


@register_task
class DeepCTTask(TrainingTask):
    """Term recall regression on the passages judged relevant to the training queries."""

    name = "deepct"
    model_kind = "deepct"

    def __init__(self, ctx: TaskContext, model: torch.nn.Module):
        super().__init__(ctx, model)
        data = ctx.data
        relevant: dict[str, list[str]] = {}
        for qid, docid in data.pairs:
            relevant.setdefault(docid, []).append(data.queries[qid])
        self.passages = sorted(relevant)
        self.targets = {d: term_recall(data.texts[d], queries) for d, queries in relevant.items()}
        self.stream = PairStream(len(self.passages), ctx.config.seed)
        self._module = WordScorer(model)

    @classmethod
    def check_config(cls, config: Any) -> None:
        if config.data.source != "qrels":
            raise ConfigError("data.source", "DeepCT learns term recall from judged (query, passage) pairs: "
                                             "data.source: qrels")

    @property
    def module(self) -> torch.nn.Module:
        return self._module

    @property
    def examples(self) -> int:
        return len(self.passages)

    @property
    def epochs_done(self) -> float:
        return self.stream.epochs_done

    def next_batch(self) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
        drawn = self.stream.take(self.ctx.config.task.batch_size)
        docids = self.ctx.dist.local_share([self.passages[i] for i in drawn])
        split = [words(self.ctx.data.texts[d]) for d in docids]
        inputs, first = self.model.tokenize(split)
        targets = torch.zeros(first.shape)
        for row, (docid, passage_words) in enumerate(zip(docids, split, strict=True)):
            targets[row, :len(passage_words)] = torch.tensor([self.targets[docid][t] for t in passage_words])
        return inputs, first, targets

    def loss(self, module: torch.nn.Module, batch: tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor],
             autocast: Callable[[], contextlib.AbstractContextManager]) -> StepLoss:
        inputs, first, targets = batch
        with autocast():
            scores = module(inputs, first).float()
        seen = (first >= 0).to(scores.device)
        errors = (scores - targets.to(scores.device)) ** 2
        return StepLoss((errors * seen).sum() / seen.sum().clamp(min=1))

    def state_dict(self) -> dict[str, Any]:
        return {"data": self.stream.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.stream.load_state_dict(state["data"])
