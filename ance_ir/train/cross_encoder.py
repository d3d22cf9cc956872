"""The cross-encoder task (``task: cross-encoder``): a BERT_CAT model (:class:`~ance_ir.modeling.cross_encoder.
CrossEncoder`) trained on (query, positive, sampled negatives) groups drawn exactly as the contrastive task draws
them (same samplers, data sources, draw order and checkpointed state).

Each (query, passage) pair of a group is scored by the model; the ``[B, G]`` scores (positive in column 0) go to
the configured loss: ``nll`` is listwise (softmax cross-entropy over the group), ``bce`` pointwise (positive 1,
negatives 0). A cross-encoder scores pairs, so there are no in-batch negatives and no ANN refresh.

With ``task.first_stage`` (a TREC run of the training queries) and ``model.first_stage_weight`` w > 0 the model
learns a residual over that first stage (as CLEAR, Gao et al. 2021, learns a dense residual over BM25): each pair's
score in the loss is the model's plus w times the run's score of the passage, min-max normalised over the query's
top ``model.first_stage_depth`` hits (100; 0 for a passage not among them), and ``python -m ance_ir.rerank`` adds
the same term for the run it reranks, with the weight and depth the model saves.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ance_ir.data import InputError, min_max_scores, read_run
from ance_ir.modeling.cross_encoder import CrossEncoder, first_stage_problem
from ance_ir.train.collator import Group
from ance_ir.train.contrastive import GroupBatch, GroupTask
from ance_ir.train.loss import GroupScores
from ance_ir.train.negatives import NEGATIVE_STRATEGIES
from ance_ir.train.settings import ConfigError
from ance_ir.train.task import StepLoss, TaskContext, register_task

#: why a first stage with weight 0 is refused (the config's, or a saved model's)
_NOTHING_TO_ADD = "is 0, so task.first_stage would add nothing; give the weight of its normalised scores (> 0)"
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
    no_refresh = "a cross-encoder builds no index during training"
    static_negatives = "bm25, groups, candidates, static or random"
    evaluate_with = "python -m ance_ir.rerank"
    options = {"first_stage": None}

    def __init__(self, ctx: TaskContext, model: torch.nn.Module):
        super().__init__(ctx, model)
        self.collator = PairCollator(model, ctx.data.queries, ctx.data.texts, ctx.config.task.passage_buckets)
        self._module = PairScorer(model)
        self.first_stage = self._read_first_stage(ctx.config.task.options["first_stage"], model)

    def _read_first_stage(self, path: str | None, model: CrossEncoder) -> dict[str, dict[str, float]] | None:
        """Each training query's min-max normalised first-stage scores, or None without a first stage."""
        weight = model.first_stage_weight
        if not path and not weight:
            return None
        if not path:
            raise ConfigError("task.first_stage", f"is needed: the model's first_stage_weight is {weight}, so it "
                                                  "learns a residual over a first stage's scores (a TREC run)")
        if not weight:
            raise ConfigError("model.first_stage_weight", _NOTHING_TO_ADD)
        scores = min_max_scores(read_run(path), model.first_stage_depth)
        missing = sorted({qid for qid, _ in self.ctx.data.pairs} - scores.keys())
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise InputError(path, f"has no hits for the training query {missing[0]!r}{more}")
        return scores

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
        cls._check_first_stage(config)

    @staticmethod
    def _check_first_stage(config: Any) -> None:
        """The residual's settings as far as the config holds them (a saved model's weight is checked on loading)."""
        path, weight = config.task.options.get("first_stage"), config.model.options.get("first_stage_weight")
        if path is not None and not isinstance(path, str):
            raise ConfigError("task.first_stage", f"must be a TREC run file, got {path!r}")
        if problem := first_stage_problem(weight, config.model.options.get("first_stage_depth")):
            raise ConfigError(f"model.{problem[0]}", problem[1])
        if path and weight == 0:
            raise ConfigError("model.first_stage_weight", _NOTHING_TO_ADD)

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
        if self.first_stage is not None:
            prior = [[self.first_stage[g.qid].get(d, 0.0) for d in g.docids] for g in batch.mine]
            own = own + self._module.model.first_stage_weight * torch.tensor(prior, dtype=own.dtype,
                                                                             device=own.device)
        targets = torch.zeros(own.shape[0], dtype=torch.long, device=own.device)
        return GroupScores(own, targets, size, False, self._teacher(batch.mine))
