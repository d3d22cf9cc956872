"""The cross-encoder task (``task: cross-encoder``): a BERT_CAT model (:class:`~ance_ir.modeling.cross_encoder.
CrossEncoder`) trained on (query, positive, sampled negatives) groups drawn exactly as the contrastive task draws
them (same samplers, data sources, draw order and checkpointed state).

Each (query, passage) pair of a group is scored by the model; the ``[B, G]`` scores (positive in column 0) go to
the configured loss: ``nll`` is listwise (softmax cross-entropy over the group), ``bce`` pointwise (positive 1,
negatives 0). A cross-encoder scores pairs, so there are no in-batch negatives and no ANN refresh.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ance_ir.modeling.cross_encoder import CrossEncoder
from ance_ir.train.collator import Group
from ance_ir.train.contrastive import GroupBatch, GroupTask
from ance_ir.train.loss import GroupScores
from ance_ir.train.negatives import NEGATIVE_STRATEGIES
from ance_ir.train.settings import ConfigError
from ance_ir.train.task import StepLoss, TaskContext, register_task

#: model settings that belong to dual encoders
_DENSE_SETTINGS = ("pooling", "normalize", "head", "query_max_length", "passage_max_length")


@dataclass
class PairBatch:
    """The ``B*G`` pairs of a slice (each group contiguous, positive first), tokenized in length-sorted
    sub-batches; score ``restore[i]`` of their concatenation is pair ``i`` (None: one batch in group order)."""

    batches: tuple[dict[str, torch.Tensor], ...]
    restore: torch.Tensor | None
    group_size: int


class PairCollator:
    """Tokenize groups as (query, passage) pairs; ``buckets > 1`` splits them by length into that many sub-batches,
    each padded to its own longest."""

    def __init__(self, model: CrossEncoder, queries: Mapping[str, str], texts: Mapping[str, str], buckets: int = 1):
        if buckets < 1:
            raise ValueError(f"buckets must be at least 1, got {buckets}")
        self.model, self.queries, self.texts, self.buckets = model, queries, texts, buckets

    def __call__(self, groups: Sequence[Group]) -> PairBatch:
        sizes = {len(g.docids) for g in groups}
        if len(sizes) != 1:
            raise ValueError(f"groups of a batch must have one size, got {sorted(sizes)}")
        queries = [self.queries[g.qid] for g in groups for _ in g.docids]
        encoded = self.model.tokenize_pairs(queries, [self.texts[d] for g in groups for d in g.docids])
        count = len(queries)
        if self.buckets == 1:
            return PairBatch((self.model.collate(encoded, range(count)),), None, sizes.pop())
        order = sorted(range(count), key=lambda i: len(encoded["input_ids"][i]))
        buckets = [b.tolist() for b in np.array_split(order, min(self.buckets, count))]
        restore = torch.empty(count, dtype=torch.long)
        restore[order] = torch.arange(count)
        return PairBatch(tuple(self.model.collate(encoded, b) for b in buckets), restore, sizes.pop())


class PairScorer(torch.nn.Module):
    """``forward(batches, restore)`` -> the scores ``[P]`` of every pair, in group order (one ``forward`` per
    step, as DistributedDataParallel needs)."""

    def __init__(self, model: CrossEncoder):
        super().__init__()
        self.model = model

    def forward(self, batches: Sequence[Mapping[str, torch.Tensor]],
                restore: torch.Tensor | None = None) -> torch.Tensor:
        scores = torch.cat([self.model(batch) for batch in batches])
        return scores[restore.to(scores.device)] if restore is not None else scores


@register_task
class CrossEncoderTask(GroupTask):
    """Each query's positive against its sampled negatives, every pair scored by the cross-encoder."""

    name = "cross-encoder"
    model_kind = "cross-encoder"
    no_refresh = "a cross-encoder has none (use bm25, groups, candidates, static or random)"
    evaluate_with = "python -m ance_ir.rerank"

    def __init__(self, ctx: TaskContext, model: torch.nn.Module):
        super().__init__(ctx, model)
        self.collator = PairCollator(model, ctx.data.queries, ctx.data.texts, ctx.config.task.passage_buckets)
        self._module = PairScorer(model)

    @classmethod
    def check_config(cls, config: Any) -> None:
        for name in _DENSE_SETTINGS:
            if getattr(config.model, name) is not None:
                raise ConfigError(f"model.{name}", "is a dual-encoder setting; a cross-encoder takes "
                                                   "model.max_length (query and passage tokens together)")
        sampler = NEGATIVE_STRATEGIES.lookup(config.negatives.name, "negatives.name")
        if sampler.forces_in_batch:
            raise ConfigError("negatives.name", f"{config.negatives.name} adds in-batch negatives; a cross-encoder "
                                                "scores (query, passage) pairs and has none")
        super().check_config(config)
        if config.task.in_batch:
            raise ConfigError("task.in_batch", "a cross-encoder scores (query, passage) pairs: it has no in-batch "
                                               "negatives")

    @property
    def module(self) -> torch.nn.Module:
        return self._module

    def collate(self, groups: list[Group]) -> PairBatch:
        return self.collator(groups)

    def loss(self, module: torch.nn.Module, batch: GroupBatch,
             autocast: Callable[[], contextlib.AbstractContextManager]) -> StepLoss:
        inputs: PairBatch = batch.inputs
        with autocast():
            scores = module(inputs.batches, inputs.restore)
        return StepLoss(self.loss_fn(self.group_scores(scores.float(), batch)))

    def group_scores(self, scores: torch.Tensor, batch: GroupBatch) -> GroupScores:
        """The pair scores ``[B*G]`` as each query's group ``[B, G]``, positive first, with teacher scores."""
        size = batch.inputs.group_size
        own = scores.view(-1, size)
        targets = torch.zeros(own.shape[0], dtype=torch.long, device=own.device)
        return GroupScores(own, targets, size, False, self._teacher(batch.mine))
