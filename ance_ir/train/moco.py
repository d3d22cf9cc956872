"""MoCo (He et al., 2020) as Contriever trains it (Izacard et al., 2022): ``task: moco``.

The model being trained is the *query encoder*. A *key encoder*, a copy of it at step 0, follows it as an
exponential moving average after every optimizer step,

    key <- momentum * key + (1 - momentum) * query          (every parameter; ``task.momentum``, e.g. 0.999)

and encodes the positives (and any sampled negatives) without gradients, in eval mode (no dropout), on the
passage side. A FIFO *queue* of the last ``task.queue_size`` positive keys of past batches (under torchrun: of
every process's positives, the same queue everywhere) supplies the negatives: each query's loss is InfoNCE
(``loss: nll``, scores over ``loss.temperature``) of its own key against its sampled negatives' keys (if any), the
queue and, with ``task.in_batch``, the keys of the batch's other pairs (SimCLR-style). A queued key of a passage
the pair's ``exclude`` names (its own positive from an earlier epoch, another crop of the same passage) is masked
out, as in-batch negatives are. The batch's keys are enqueued after its loss is computed, so a query never meets
its own key as a negative.

The queue starts empty (MoCo fills it with random vectors; here the first steps have fewer negatives). The key
encoder and the queue (vectors and passage ids) are part of every checkpoint's trainer state, so a resumed run
continues exactly. Any pair source trains with it (``data.source: contriever`` is Contriever's independent
cropping); the query encoder is what ``final/`` holds. The towers must be shared: the key encoder is the moving
average of the one tower the queries train.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from ance_ir.train.collator import Batch, in_batch_mask
from ance_ir.train.contrastive import ContrastiveTask, GroupBatch
from ance_ir.train.hooks import TrainingHook
from ance_ir.train.negatives import NEGATIVE_STRATEGIES
from ance_ir.train.settings import ConfigError
from ance_ir.train.task import StepLoss, TaskContext, register_task


class QueryModule(torch.nn.Module):
    """``forward(queries)`` -> query vectors ``[B, D]`` of the query encoder (the only trained forward)."""

    def __init__(self, encoder: torch.nn.Module):
        super().__init__()
        self.encoder = encoder

    def forward(self, queries: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return self.encoder.embed_queries(queries)


@torch.no_grad()
def momentum_update(key: torch.nn.Module, query: torch.nn.Module, momentum: float) -> None:
    """``key <- momentum * key + (1 - momentum) * query``, parameter by parameter (same structure)."""
    for k, q in zip(key.parameters(), query.parameters(), strict=True):
        k.copy_(k * momentum + q * (1 - momentum))


def queue_mask(qids: Sequence[str], queue_ids: Sequence[str], exclude: Mapping[str, frozenset[str]]) -> torch.Tensor:
    """``[B, Q]`` True where queued key ``j`` is of a passage query ``i`` must not have as a negative."""
    where: dict[str, list[int]] = {}
    for j, docid in enumerate(queue_ids):
        where.setdefault(docid, []).append(j)
    mask = torch.zeros(len(qids), len(queue_ids), dtype=torch.bool)
    for i, qid in enumerate(qids):
        for docid in exclude.get(qid, ()):
            for j in where.get(docid, ()):
                mask[i, j] = True
    return mask


def info_nce(batch_scores: torch.Tensor, targets: torch.Tensor, queue_scores: torch.Tensor,
             temperature: float) -> torch.Tensor:
    """Mean over queries of ``-log softmax`` of the target column among the batch's key scores ``[B, P]`` and the
    queue's ``[B, Q]`` (``-inf``: left out), scores over ``temperature``."""
    return F.cross_entropy(torch.cat([batch_scores, queue_scores], dim=1) / temperature, targets)


class MomentumUpdate(TrainingHook):
    """Moves the key encoder after each optimizer step."""

    def __init__(self, task: MoCoTask):
        self.task = task

    def after_step(self, step: int) -> None:
        momentum_update(self.task.key, self.task.model, self.task.momentum)


@register_task
class MoCoTask(ContrastiveTask):
    """Each query against its momentum-encoded key, a queue of past keys and optionally in-batch keys."""

    name = "moco"
    grad_cache = False
    options = {"momentum": 0.999, "queue_size": 65536}

    def __init__(self, ctx: TaskContext, model: torch.nn.Module):
        super().__init__(ctx, model)
        if not getattr(getattr(model, "config", None), "shared", False):
            raise ValueError("task moco: the key encoder is a moving average of the query encoder, so the model's "
                             "towers must be shared (model.shared: true)")
        self.momentum = float(ctx.config.task.options["momentum"])
        self.queue_size = int(ctx.config.task.options["queue_size"])
        self.key = copy.deepcopy(model).eval()
        self.key.requires_grad_(False)
        self.queue = torch.empty(0, device=ctx.device)
        self.queue_ids: list[str] = []
        self._module = QueryModule(model)

    @classmethod
    def check_config(cls, config: Any) -> None:
        o = config.task.options
        if not 0 <= o["momentum"] < 1:
            raise ConfigError("task.momentum", f"must be in [0, 1), got {o['momentum']}")
        if o["queue_size"] < 1:
            raise ConfigError("task.queue_size", f"must be at least 1, got {o['queue_size']}")
        if config.loss.name != "nll":
            raise ConfigError("loss.name", f"MoCo's loss is InfoNCE of each query's key against the queue: nll, got "
                                           f"{config.loss.name!r}")
        if config.model.kind not in (None, "dense"):
            raise ConfigError("model.kind", f"MoCo trains a dense dual encoder, got {config.model.kind!r}")
        if config.model.options.get("shared") is False:
            raise ConfigError("model.shared", "MoCo's key encoder is a moving average of the query encoder: the "
                                              "towers must be shared")
        sampler = NEGATIVE_STRATEGIES.lookup(config.negatives.name, "negatives.name")
        if sampler.refreshed:
            raise ConfigError("negatives.name", f"{config.negatives.name} mines from an ANN index of the model; "
                                                "MoCo's negatives are its queue (use inbatch, random, bm25, static, "
                                                "groups or candidates)")
        in_batch = config.task.in_batch
        config.task.in_batch = True  # the queue gives every query negatives: neither sampled nor in-batch ones needed
        try:
            sampler.check_config(config)
        finally:
            if not sampler.forces_in_batch:
                config.task.in_batch = in_batch

    @property
    def module(self) -> torch.nn.Module:
        return self._module

    def hooks(self) -> list[TrainingHook]:
        return [self.refresher, MomentumUpdate(self)]

    @torch.no_grad()
    def encode_keys(self, inputs: Batch, autocast: Callable[[], contextlib.AbstractContextManager]) -> torch.Tensor:
        """Key vectors ``[B*G, D]`` (float32) of the batch's passages, by the key encoder."""
        with autocast():
            keys = torch.cat([self.key.embed_passages(dict(p)) for p in inputs.passages])
        if inputs.restore is not None:
            keys = keys[inputs.restore.to(keys.device)]
        if keys.ndim != 2:
            raise ValueError(f"task moco: the model gives passage vectors of shape {tuple(keys.shape[1:])}; MoCo "
                             "queues one vector per passage (a dense model)")
        return keys.float()

    def loss(self, module: torch.nn.Module, batch: GroupBatch,
             autocast: Callable[[], contextlib.AbstractContextManager]) -> StepLoss:
        config, dist, exclude = self.ctx.config, self.ctx.dist, self.ctx.data.exclude
        with autocast():
            queries = module(dict(batch.inputs.queries)).float()
        keys = self.encode_keys(batch.inputs, autocast)
        b, size = len(batch.mine), batch.inputs.group_size
        everyone = dist.gather_with_grad(keys) if dist.enabled else keys  # [global B*G, D], no graph
        if config.task.in_batch:
            across = dist.enabled and config.task.cross_batch
            scored, groups = (everyone, batch.groups) if across else (keys, batch.mine)
            offset = dist.rank * b if across else 0
            mask = in_batch_mask(groups, exclude)[offset:offset + b].to(queries.device)
            batch_scores = (queries @ scored.T).masked_fill(mask, float("-inf"))
            targets = (torch.arange(b, device=queries.device) + offset) * size
        else:
            batch_scores = torch.einsum("bd,bgd->bg", queries, keys.view(b, size, -1))
            targets = torch.zeros(b, dtype=torch.long, device=queries.device)
        if len(self.queue):
            hidden = queue_mask([g.qid for g in batch.mine], self.queue_ids, exclude).to(queries.device)
            queue_scores = (queries @ self.queue.T).masked_fill(hidden, float("-inf"))
        else:
            queue_scores = queries.new_zeros(b, 0)
        loss = info_nce(batch_scores, targets, queue_scores, config.loss.temperature)
        positives = everyone.view(len(batch.groups), size, -1)[:, 0]
        self.enqueue(positives, [g.positive for g in batch.groups])
        return StepLoss(loss)

    def enqueue(self, keys: torch.Tensor, docids: Sequence[str]) -> None:
        """Append ``keys`` (of ``docids``) and keep the newest ``queue_size``."""
        queue = torch.cat([self.queue.view(-1, keys.shape[1]), keys.detach()]) if len(self.queue) else keys.detach()
        self.queue = queue[-self.queue_size:].clone()
        self.queue_ids = (self.queue_ids + list(docids))[-self.queue_size:]

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "moco_key": {k: v.detach().cpu() for k, v in self.key.state_dict().items()},
                "moco_queue": self.queue.detach().cpu(), "moco_queue_ids": list(self.queue_ids)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.key.load_state_dict(state["moco_key"])
        self.queue = state["moco_queue"].to(self.ctx.device)
        self.queue_ids = list(state["moco_queue_ids"])
