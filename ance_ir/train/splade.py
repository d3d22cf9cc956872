"""The SPLADE task (``task: splade``): a learned-sparse model (:class:`~ance_ir.modeling.splade.Splade`) trained on
(query, positive, sampled negatives) groups drawn exactly as the contrastive task draws them (same samplers, data
sources, draw order and checkpointed state).

Each query's term weights are scored by dot product against its own group (``[B, G]``) or, with ``task.in_batch``,
every passage of the batch (``[B, B*G]``, judged-relevant passages of other queries masked); the scores go to the
configured loss, plus the FLOPS regulariser (Paria et al.) of the queries' and the passages' weights,
``lambda_q * flops(q) + lambda_d * flops(d)`` with ``flops(w) = sum_j (mean_i w_ij)^2``. As in SPLADE, both lambdas
grow quadratically from 0 to their value over the first ``flops_warmup_steps`` optimizer steps. No ANN refresh (an
impact index is not rebuilt during training); in-batch negatives are not gathered across processes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from ance_ir.modeling.splade import Splade, flops
from ance_ir.train.collator import Group
from ance_ir.train.contrastive import GroupBatch, GroupTask
from ance_ir.train.settings import ConfigError
from ance_ir.train.task import StepLoss, TaskContext, register_task

_OTHER_SETTINGS = ("pooling", "normalize", "head")


@dataclass
class SparseBatch:
    """Tokenized queries and the ``B*G`` passages (each group contiguous, positive first)."""

    queries: Mapping[str, torch.Tensor]
    passages: Mapping[str, torch.Tensor]
    group_size: int


class SparseEncoder(torch.nn.Module):
    """``forward(queries, passages)`` -> the term weights of both, ``[B, V]`` and ``[B*G, V]`` (one ``forward`` per
    step, as DistributedDataParallel needs)."""

    def __init__(self, model: Splade):
        super().__init__()
        self.model = model

    def forward(self, queries: Mapping[str, torch.Tensor],
                passages: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        return self.model.embed(queries), self.model.embed(passages)


def flops_weight(value: float, steps: float, warmup: int) -> float:
    """``value`` after ``steps`` steps of a quadratic warm-up over ``warmup`` steps (0: none)."""
    return value if warmup <= 0 else value * min(1.0, (steps / warmup) ** 2)


@register_task
class SpladeTask(GroupTask):
    """Each query's positive against its sampled (and optionally in-batch) negatives by sparse dot product, with
    the FLOPS regulariser."""

    name = "splade"
    model_kind = "splade"
    options = {"lambda_q": 3e-4, "lambda_d": 1e-4, "flops_warmup_steps": 0}
    not_gathered = "term weights"
    reads = frozenset({"negatives", "loss"})  # not passage_buckets: its batches are padded whole
    no_refresh = "the splade task builds no index during training"
    evaluate_with = "encode and search"

    def __init__(self, ctx: TaskContext, model: torch.nn.Module):
        super().__init__(ctx, model)
        self._module = SparseEncoder(model)

    @classmethod
    def check_config(cls, config: Any) -> None:
        for name in _OTHER_SETTINGS:
            if getattr(config.model, name) is not None:
                raise ConfigError(f"model.{name}", "is a dense dual-encoder setting; a splade model takes "
                                                   "model.query_max_length and model.passage_max_length")
        for name in ("lambda_q", "lambda_d", "flops_warmup_steps"):
            value = config.task.options.get(name, cls.options[name])
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ConfigError(f"task.{name}", f"must be a number of at least 0, got {value!r}")
        super().check_config(config)

    @property
    def module(self) -> torch.nn.Module:
        return self._module

    def collate(self, groups: list[Group]) -> SparseBatch:
        sizes = {len(g.docids) for g in groups}
        if len(sizes) != 1:
            raise ValueError(f"groups of a batch must have one size, got {sorted(sizes)}")
        data, model = self.ctx.data, self.model
        return SparseBatch(model.tokenize([data.queries[g.qid] for g in groups], model.query_max_length),
                           model.tokenize([data.texts[d] for g in groups for d in g.docids], model.passage_max_length),
                           sizes.pop())

    def lambdas(self) -> tuple[float, float]:
        """``(lambda_q, lambda_d)`` at the current batch, after the quadratic warm-up over ``flops_warmup_steps``
        optimizer steps (micro-batches drawn so far over ``optim.grad_accumulation``)."""
        config = self.ctx.config
        options = {**self.options, **config.task.options}
        steps = self.epochs_done * self.examples / config.task.batch_size / config.optim.grad_accumulation
        warmup = int(options["flops_warmup_steps"])
        return (flops_weight(options["lambda_q"], steps, warmup), flops_weight(options["lambda_d"], steps, warmup))

    def loss(self, module: torch.nn.Module, batch: GroupBatch,
             autocast: Callable[[], contextlib.AbstractContextManager]) -> StepLoss:
        inputs: SparseBatch = batch.inputs
        with autocast():
            queries, passages = module(dict(inputs.queries), dict(inputs.passages))
        queries, passages = queries.float(), passages.float()
        ranking = self.loss_fn(self.scores_against_batch(queries @ passages.T, batch))
        lambda_q, lambda_d = self.lambdas()
        return StepLoss(ranking + lambda_q * flops(queries) + lambda_d * flops(passages))
