"""The DeepCT task (``task: deepct``): a :class:`~ance_ir.modeling.deepct.DeepCT` model regressing each word of a
judged-relevant passage to its query term recall, ``QTR(t, d)`` over the training queries judged relevant to ``d``
(:func:`~ance_ir.modeling.deepct.term_recall`), by mean squared error over the words the model sees (the first
``max_length`` word pieces). Every passage with a relevant training query is one example; batches of
``task.batch_size`` passages are drawn epoch by epoch in a seeded order (checkpointed). No negatives, no refresh.

``task.target: query`` trains DeepCT-Query instead: each training query with a judged-relevant passage is one
example, each of its words regressed to its term recall ``TR(t, q)`` over the passages judged relevant to ``q``;
the saved model records the target, so that it weights queries.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

import torch

from ance_ir.modeling.deepct import TARGETS, DeepCT, term_recall, words
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
    """Term recall regression on the passages judged relevant to the training queries (DeepCT), or on those queries
    (``target: query``, DeepCT-Query)."""

    name = "deepct"
    model_kind = "deepct"
    own_loss = "term-recall regression"
    reads = frozenset()
    options = {"target": None}  # None: the model's own (a saved DeepCT-Query model continues as one)

    def __init__(self, ctx: TaskContext, model: torch.nn.Module):
        super().__init__(ctx, model)
        data = ctx.data
        model.target = ctx.config.task.options["target"] or model.target
        relevant: dict[str, list[str]] = {}  # an example's id -> the texts its words' term recall counts
        for qid, docid in data.pairs:
            if model.target == "passage":
                relevant.setdefault(docid, []).append(data.queries[qid])
            else:
                relevant.setdefault(qid, []).append(data.texts[docid])
        self.texts = data.texts if model.target == "passage" else data.queries
        self.keys = sorted(relevant)
        self.targets = {k: term_recall(self.texts[k], others) for k, others in relevant.items()}
        self.stream = PairStream(len(self.keys), ctx.config.seed)
        self._module = WordScorer(model)

    @classmethod
    def check_config(cls, config: Any) -> None:
        target, model_target = config.task.options["target"], config.model.options.get("target")
        if target is not None and target not in TARGETS:
            raise ConfigError("task.target", f"must be one of {', '.join(TARGETS)}, got {target!r}")
        if target is not None and model_target is not None and target != model_target:
            raise ConfigError("task.target", f"{target!r}, but model.target is {model_target!r}: give one of them")
        if config.data.source != "qrels":
            raise ConfigError("data.source", "DeepCT learns term recall from judged (query, passage) pairs: "
                                             "data.source: qrels")

    @property
    def module(self) -> torch.nn.Module:
        return self._module

    @property
    def examples(self) -> int:
        return len(self.keys)

    @property
    def epochs_done(self) -> float:
        return self.stream.epochs_done

    def next_batch(self) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
        drawn = self.stream.take(self.ctx.config.task.batch_size)
        keys = self.ctx.dist.local_share([self.keys[i] for i in drawn])
        split = [words(self.texts[k]) for k in keys]
        inputs, first = self.model.tokenize(split)
        targets = torch.zeros(first.shape)
        for row, (key, text_words) in enumerate(zip(keys, split, strict=True)):
            targets[row, :len(text_words)] = torch.tensor([self.targets[key][t] for t in text_words])
        return inputs, first, targets

    def loss(self, module: torch.nn.Module, batch: tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor],
             autocast: Callable[[], contextlib.AbstractContextManager]) -> StepLoss:
        inputs, first, targets = batch
        with autocast():
            scores = module(inputs, first).float()
        seen = (first >= 0).to(scores.device)
        errors = (scores - targets.to(scores.device)) ** 2
        return StepLoss(self.ctx.dist.global_mean((errors * seen).sum(), int(seen.sum())))

    def state_dict(self) -> dict[str, Any]:
        return {"data": self.stream.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.stream.load_state_dict(state["data"])
