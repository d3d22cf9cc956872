"""The ColBERT task (``task: colbert``): a late-interaction model (:class:`~ance_ir.modeling.colbert.ColBERT`) trained
on (query, positive, sampled negatives) groups drawn exactly as the contrastive task draws them (same samplers,
data sources, draw order and checkpointed state).

Each query is scored by MaxSim against its own group (``[B, G]``) or, with ``task.in_batch``, against every
passage of the batch (``[B, B*G]``, judged-relevant passages of other queries masked as in the contrastive task);
the scores go to the configured loss (``nll``, ``bce``, or a distillation loss with the groups' teacher scores).
There is no ANN refresh (a token index is not rebuilt during training), and in-batch negatives are not gathered
across processes under torchrun.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from transformers import BatchEncoding

from ance_ir.modeling.colbert import ColBERT, maxsim
from ance_ir.train.collator import Group
from ance_ir.train.contrastive import GroupBatch, GroupTask
from ance_ir.train.settings import ConfigError
from ance_ir.train.task import StepLoss, TaskContext, register_task

#: model settings that belong to dense dual encoders or cross-encoders
_OTHER_SETTINGS = ("pooling", "normalize", "head")


@dataclass
class TokenBatch:
    """Tokenized queries and the ``B*G`` passages (each group contiguous) in length-sorted sub-batches; row
    ``restore[i]`` of their concatenation is passage ``i`` (None: one batch in group order)."""

    queries: BatchEncoding
    passages: tuple[BatchEncoding, ...]
    restore: torch.Tensor | None
    group_size: int


class TokenCollator:
    """Tokenize groups with the model's query augmentation and passage settings; ``buckets > 1`` splits the
    passages by length into that many sub-batches, each padded to its own longest."""

    def __init__(self, model: ColBERT, queries: Mapping[str, str], texts: Mapping[str, str], buckets: int = 1):
        if buckets < 1:
            raise ValueError(f"buckets must be at least 1, got {buckets}")
        self.model, self.queries, self.texts, self.buckets = model, queries, texts, buckets

    def __call__(self, groups: Sequence[Group]) -> TokenBatch:
        sizes = {len(g.docids) for g in groups}
        if len(sizes) != 1:
            raise ValueError(f"groups of a batch must have one size, got {sorted(sizes)}")
        queries = self.model.tokenize_queries([self.queries[g.qid] for g in groups])
        texts = [self.texts[d] for g in groups for d in g.docids]
        if self.buckets == 1:
            return TokenBatch(queries, (self.model.tokenize_passages(texts),), None, sizes.pop())
        lengths = [len(ids) for ids in self.model.tokenizer(texts, truncation=True,
                                                            max_length=self.model.passage_max_length)["input_ids"]]
        order = sorted(range(len(texts)), key=lengths.__getitem__)
        buckets = [b.tolist() for b in np.array_split(order, min(self.buckets, len(order)))]
        restore = torch.empty(len(order), dtype=torch.long)
        restore[order] = torch.arange(len(order))
        return TokenBatch(queries, tuple(self.model.tokenize_passages([texts[i] for i in b]) for b in buckets),
                          restore, sizes.pop())


class MaxSimScorer(torch.nn.Module):
    """``forward(queries, passage_batches, restore)`` -> MaxSim scores ``[B, P]`` of every query against every
    passage of the batch, in group order (one ``forward`` per step, as DistributedDataParallel needs)."""

    def __init__(self, model: ColBERT):
        super().__init__()
        self.model = model

    def forward(self, queries: Mapping[str, torch.Tensor], passage_batches: Sequence[Mapping[str, torch.Tensor]],
                restore: torch.Tensor | None = None) -> torch.Tensor:
        query_vectors = self.model.embed_queries(queries).float()
        embedded = [self.model.embed_passages(batch) for batch in passage_batches]
        width = max(v.shape[1] for v, _ in embedded)
        vectors = torch.cat([torch.nn.functional.pad(v.float(), (0, 0, 0, width - v.shape[1])) for v, _ in embedded])
        mask = torch.cat([torch.nn.functional.pad(m, (0, width - m.shape[1])) for _, m in embedded])
        if restore is not None:
            restore = restore.to(vectors.device)
            vectors, mask = vectors[restore], mask[restore]
        return maxsim(query_vectors, vectors, mask)


@register_task
class ColBERTTask(GroupTask):
    """Each query's positive against its sampled (and optionally in-batch) negatives, by MaxSim."""

    name = "colbert"
    model_kind = "colbert"
    not_gathered = "token vectors"
    no_refresh = "the colbert task builds no index during training"
    evaluate_with = "encode and search"

    def __init__(self, ctx: TaskContext, model: torch.nn.Module):
        super().__init__(ctx, model)
        self.collator = TokenCollator(model, ctx.data.queries, ctx.data.texts, ctx.config.task.passage_buckets)
        self._module = MaxSimScorer(model)

    @classmethod
    def check_config(cls, config: Any) -> None:
        for name in _OTHER_SETTINGS:
            if getattr(config.model, name) is not None:
                raise ConfigError(f"model.{name}", "is a dense dual-encoder setting; a colbert model takes "
                                                   "model.query_max_length, model.passage_max_length and model.dim")
        super().check_config(config)

    @property
    def module(self) -> torch.nn.Module:
        return self._module

    def collate(self, groups: list[Group]) -> TokenBatch:
        return self.collator(groups)

    def loss(self, module: torch.nn.Module, batch: GroupBatch,
             autocast: Callable[[], contextlib.AbstractContextManager]) -> StepLoss:
        inputs: TokenBatch = batch.inputs
        with autocast():
            scores = module(dict(inputs.queries), [dict(p) for p in inputs.passages], inputs.restore)
        return StepLoss(self.loss_fn(self.scores_against_batch(scores.float(), batch)))
