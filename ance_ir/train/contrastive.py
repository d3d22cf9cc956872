"""The contrastive task (``task: contrastive``): a dense dual encoder trained on (query, positive, sampled
negatives) groups, optionally with in-batch negatives. The ANCE paper's rows are configurations of it:
``negatives: random | inbatch | bm25 | dpr | ance`` (see :mod:`ance_ir.train.negatives`). :class:`GroupTask` is
what it shares with every task trained on such groups (the cross-encoder's, :mod:`ance_ir.train.cross_encoder`).

Under torchrun every process draws the same global batch (same pair order, same sampler RNG) and trains
on its own contiguous slice. With in-batch negatives the query and passage vectors of all processes are
gathered, so every query sees every passage of the global batch, exactly as in one process.
"""

from __future__ import annotations

import contextlib
import math
import random
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from ance_ir.train.collator import Batch, Collator, Group, in_batch_mask
from ance_ir.train.dataset import PairStream, TrainData
from ance_ir.train.grad_cache import grad_cache_loss
from ance_ir.train.hooks import TrainingHook
from ance_ir.train.loss import LOSSES, GroupScores, dense_group_scores
from ance_ir.train.modeling import DualEncoderModule
from ance_ir.train.negatives import NEGATIVE_STRATEGIES, NegativeSampler, build_sampler
from ance_ir.train.refresher import Refresher
from ance_ir.train.settings import ConfigError
from ance_ir.train.task import TASKS, StepLoss, TaskContext, TrainingTask, register_task


class GroupDraws:
    """Training groups drawn as the trainer draws them: (query, positive) pairs in the stream's order, each with
    ``n_negatives`` from ``sampler``, one RNG for all draws; the state is the stream's and the RNG's."""

    def __init__(self, data: TrainData, sampler: NegativeSampler, seed: int, n_negatives: int):
        self.data, self.sampler, self.n_negatives = data, sampler, n_negatives
        self.stream = PairStream(len(data.pairs), seed)
        self.rng = random.Random(seed)

    def draw(self, count: int) -> list[Group]:
        """The next ``count`` groups."""
        pairs = [self.data.pairs[i] for i in self.stream.take(count)]
        return [Group(qid, pos, tuple(self.sampler.sample(qid, self.data.exclude[qid], self.n_negatives, self.rng)))
                for qid, pos in pairs]

    def state_dict(self) -> dict[str, Any]:
        return {"data": self.stream.state_dict(), "sampler_rng": self.rng.getstate()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.stream.load_state_dict(state["data"])
        self.rng.setstate(state["sampler_rng"])


@dataclass
class GroupBatch:
    """One micro-batch: the global batch's groups, this process's slice, and the slice as model inputs."""

    groups: list[Group]
    mine: list[Group]
    inputs: Any
    #: the slice's passages masked for the joint MLM loss (``task.mlm_weight``): (inputs, labels), else None
    mlm: Any = None


class GroupTask(TrainingTask):
    """A task trained on groups (query, positive, sampled negatives): the sampler (``negatives``), the draws
    (:class:`GroupDraws`, checkpointed), the loss (``loss``) and the teacher scores of the training data.

    Every process draws the same global batch and keeps its contiguous slice; a subclass turns the slice into
    model inputs (:meth:`collate`) and scores it.
    """

    #: for a task whose model has no ANN index during training: why (ends a refused setting's message);
    #: refreshed negatives and ``refresh.eval_topics`` are then refused (see ``evaluate_with``)
    no_refresh: ClassVar[str | None] = None
    #: with ``no_refresh``: the negative samplers the task trains with, named where refreshed negatives are refused
    static_negatives: ClassVar[str] = "bm25, dpr, groups, candidates, static or random"
    #: for a task whose in-batch scoring stays within its process: what it does not gather ("token vectors");
    #: in_batch with cross_batch under torchrun is then refused
    not_gathered: ClassVar[str | None] = None
    reads = frozenset({"negatives", "loss", "passage_buckets"})

    def __init__(self, ctx: TaskContext, model: torch.nn.Module):
        super().__init__(ctx, model)
        config, data = ctx.config, ctx.data
        if self.not_gathered and config.task.in_batch and config.task.cross_batch and ctx.dist.enabled:
            raise ValueError(f"task.in_batch: a {self.name} task does not gather {self.not_gathered} across "
                             "processes; set task.cross_batch: false (each process's own passages) or train in one "
                             "process")
        self.sampler = build_sampler(config, data, ctx.run, ctx.dist)
        self.draws = GroupDraws(data, self.sampler, config.seed, config.task.n_negatives)
        loss = config.loss
        self.loss_fn = LOSSES[loss.name](loss.temperature, **loss.options)
        self.teacher = None
        if loss.teacher_index:
            from ance_ir.train.teacher import DenseTeacher

            self.teacher = DenseTeacher(loss.teacher_index, data.queries, data.texts, ctx.device)

    @classmethod
    def check_config(cls, config: Any) -> None:
        sampler = NEGATIVE_STRATEGIES.lookup(config.negatives.name, "negatives.name")
        if cls.no_refresh:
            if sampler.refreshed:
                raise ConfigError("negatives.name", f"{config.negatives.name} mines from an ANN index of the model "
                                                    f"being trained; {cls.no_refresh} (use {cls.static_negatives})")
            if config.refresh.eval_topics:
                raise ConfigError("refresh.eval_topics", f"{cls.no_refresh}{cls.evaluate_hint()}")
        sampler.check_config(config)

    def start_events(self) -> list[dict[str, Any]]:
        events = []
        if summary := self.sampler.summary():
            events.append({"step": 0, "event": "negatives", "name": self.ctx.config.negatives.name, **summary})
        if self.teacher is not None:
            events.append({"step": 0, "event": "teacher", "index": self.ctx.config.loss.teacher_index,
                           "encoder": self.teacher.encoder, "passages": len(self.teacher.row)})
        return events

    @property
    def examples(self) -> int:
        return len(self.ctx.data.pairs)

    @property
    def epochs_done(self) -> float:
        return self.draws.stream.epochs_done

    @abstractmethod
    def collate(self, groups: list[Group]) -> Any:
        """This process's groups as model inputs."""

    def next_batch(self) -> GroupBatch:
        groups = self.draws.draw(self.ctx.config.task.batch_size)
        mine = self.ctx.dist.local_share(groups)
        return GroupBatch(groups, mine, self.collate(mine))

    def _teacher(self, groups: list[Group], whole_batch: bool = False) -> torch.Tensor | None:
        """``[B, G]`` teacher scores of each group (NaN where unknown), or None when there is no teacher; with a
        dense teacher (``loss.teacher_index``) and ``whole_batch``, ``[B, B*G]``: every passage of the groups."""
        if self.teacher is not None:
            scores = self.teacher.scores([g.qid for g in groups], [d for g in groups for d in g.docids])
            if whole_batch:
                return scores
            rows = torch.arange(len(groups), device=scores.device)
            return scores.view(len(groups), len(groups), -1)[rows, rows]
        known = self.ctx.data.scores
        if not known:
            return None
        rows = [[known.get(g.qid, {}).get(d, math.nan) for d in g.docids] for g in groups]
        return torch.tensor(rows, dtype=torch.float32, device=self.ctx.device)

    def scores_against_batch(self, scores: torch.Tensor, batch: GroupBatch) -> GroupScores:
        """A model's ``[B, B*G]`` scores of every query against every passage of this process's batch, as the loss
        takes them: all of them (``task.in_batch``, judged-relevant passages of other queries masked), else each
        query's own group ``[B, G]``; with the teacher's scores (:meth:`_teacher`)."""
        size, device = batch.inputs.group_size, scores.device
        b, in_batch = scores.shape[0], self.ctx.config.task.in_batch
        teacher = self._teacher(batch.mine, in_batch)
        if in_batch:
            mask = in_batch_mask(batch.mine, self.ctx.data.exclude).to(device)
            return GroupScores(scores.masked_fill(mask, float("-inf")), torch.arange(b, device=device) * size, size,
                               True, teacher)
        own = scores.view(b, b, size)[torch.arange(b, device=device), torch.arange(b, device=device)]
        return GroupScores(own, torch.zeros(b, dtype=torch.long, device=device), size, False, teacher)

    def state_dict(self) -> dict[str, Any]:
        return self.draws.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.draws.load_state_dict(state)


@register_task
class ContrastiveTask(GroupTask):
    """Each query's positive against its sampled (and optionally in-batch) negatives, by dot product; with
    ``task.mlm_weight`` > 0 plus that times BERT's MLM loss on the batch's passages (:class:`~ance_ir.train.mlm.
    PassageMLM`, Chang et al.'s joint pretraining)."""

    name = "contrastive"
    grad_cache = True
    reads = frozenset({"negatives", "refresh", "loss", "passage_buckets"})
    options = {"mlm_weight": 0.0}
    #: ``(queries, passages, group_size, in_batch, mask, teacher) -> GroupScores`` (dot products; a task scoring
    #: another kind's representations replaces it)
    score_groups = staticmethod(dense_group_scores)

    def __init__(self, ctx: TaskContext, model: torch.nn.Module):
        super().__init__(ctx, model)
        self.collator = Collator(model, ctx.data.queries, ctx.data.texts, ctx.config.task.passage_buckets)
        self.mlm_weight = float(ctx.config.task.options.get("mlm_weight", 0.0))  # a subclass may not declare it
        self.mlm = None
        if self.mlm_weight:
            from ance_ir.train.mlm import DualEncoderMLMModule, PassageMLM

            self.mlm = PassageMLM(ctx, model)
            self._module = DualEncoderMLMModule(model, self.mlm.head)
        else:
            self._module = DualEncoderModule(model)
        self.refresher = Refresher(ctx, self.sampler)
        self.chunk = ctx.config.task.grad_cache_chunk
        if self.chunk and ctx.dist.enabled:
            raise ValueError("task.grad_cache_chunk: the gradient cache runs in one process (under torchrun each "
                             "chunk's forward would need its own DDP synchronisation)")

    @classmethod
    def check_config(cls, config: Any) -> None:
        from ance_ir.modeling.kinds import kind_class

        kind = config.model.kind
        if kind and cls.model_kind is None:
            index = kind_class(kind).index
            if index is None:
                raise ConfigError("model.kind", f"{kind!r} models score pairs and encode no index; the contrastive "
                                                "task trains dual encoders (a cross-encoder trains with "
                                                "task: cross-encoder)")
            own = [task.name for task in TASKS.values() if task.model_kind == kind]
            if own:
                raise ConfigError("model.kind", f"{kind!r} models train with task: {own[0]}")
            if index != "dense":
                raise ConfigError("model.kind", f"{kind!r} models encode a {index!r} index; the contrastive task "
                                                "trains dense dual encoders")
        cls.check_mlm_weight(config)
        super().check_config(config)

    @staticmethod
    def check_mlm_weight(config: Any) -> None:
        """ConfigError for a negative ``task.mlm_weight``, or one with the gradient cache (which skips it)."""
        weight = config.task.options.get("mlm_weight", 0.0)
        if weight < 0:
            raise ConfigError("task.mlm_weight", f"must not be negative, got {weight}")
        if weight and config.task.grad_cache_chunk:
            raise ConfigError("task.mlm_weight", "the joint MLM loss does not run under the gradient cache "
                                                 "(task.grad_cache_chunk)")

    @property
    def module(self) -> torch.nn.Module:
        return self._module

    def hooks(self) -> list[TrainingHook]:
        if self.mlm is not None:
            from ance_ir.train.mlm import MLMLossLog

            return [self.refresher, MLMLossLog(self.mlm)]
        return [self.refresher]

    def next_batch(self) -> GroupBatch:
        batch = super().next_batch()
        if self.mlm is not None:
            first = self.ctx.dist.rank * len(batch.mine) * batch.inputs.group_size
            batch.mlm = self.mlm.draw([self.ctx.data.texts[d] for g in batch.mine for d in g.docids], first)
        return batch

    def collate(self, groups: list[Group]) -> Batch | list[Batch]:
        """The groups as one batch, or in chunks of ``task.grad_cache_chunk`` groups under the gradient cache."""
        if self.chunk:
            return [self.collator(groups[i:i + self.chunk]) for i in range(0, len(groups), self.chunk)]
        return self.collator(groups)

    def loss(self, module: torch.nn.Module, batch: GroupBatch,
             autocast: Callable[[], contextlib.AbstractContextManager]) -> StepLoss:
        if self.chunk:
            return grad_cache_loss(lambda inputs: self.encode_inputs(module, inputs, autocast), batch.inputs,
                                   lambda queries, passages: self.group_loss(queries, passages, batch),
                                   self.ctx.device)
        if self.mlm is not None:
            return self.joint_loss(module, batch, autocast)
        queries, passages = self.encode(module, batch, autocast)
        return self.group_loss(queries, passages, batch)

    def joint_loss(self, module: torch.nn.Module, batch: GroupBatch,
                   autocast: Callable[[], contextlib.AbstractContextManager]) -> StepLoss:
        """The group loss plus ``mlm_weight`` times the MLM loss of the batch's masked passages (this process's
        tokens; not multiplied by the processes like a loss over the gathered batch)."""
        from ance_ir.train.mlm import IGNORE, mlm_loss

        inputs, (masked, labels) = batch.inputs, batch.mlm
        positions = labels != IGNORE
        with autocast():
            queries, passages, logits = module(dict(inputs.queries), [dict(p) for p in inputs.passages],
                                               inputs.restore, masked, positions)
        out = self.group_loss(queries.float(), passages.float(), batch)
        extra = mlm_loss(logits, labels[positions])
        self.mlm.losses.append(extra.item())
        return StepLoss(out.loss + self.mlm_weight * extra / out.factor, out.factor, out.whole_batch)

    def encode(self, module: torch.nn.Module, batch: GroupBatch,
               autocast: Callable[[], contextlib.AbstractContextManager]) -> tuple[torch.Tensor, torch.Tensor]:
        """Query vectors ``[B, D]`` and passage vectors ``[B*G, D]`` (float32) of this process's slice."""
        return self.encode_inputs(module, batch.inputs, autocast)

    @staticmethod
    def encode_inputs(module: torch.nn.Module, inputs: Batch,
                      autocast: Callable[[], contextlib.AbstractContextManager]) -> tuple[torch.Tensor, torch.Tensor]:
        """Query and passage vectors (float32) of one collated batch."""
        with autocast():
            queries, passages = module(dict(inputs.queries), [dict(p) for p in inputs.passages], inputs.restore)
        return queries.float(), passages.float()

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), **(self.mlm.state_dict() if self.mlm is not None else {})}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        if self.mlm is not None:
            self.mlm.load_state_dict(state)

    def group_loss(self, queries: torch.Tensor, passages: torch.Tensor, batch: GroupBatch) -> StepLoss:
        """The configured loss of the groups' scores (over the global batch with in-batch + DDP)."""
        dist, device, exclude = self.ctx.dist, self.ctx.device, self.ctx.data.exclude
        group_size = len(batch.mine[0].docids)
        if self.ctx.config.task.in_batch and self.ctx.config.task.cross_batch and dist.enabled:
            mask = in_batch_mask(batch.groups, exclude).to(device)
            scores = self.score_groups(dist.gather_with_grad(queries), dist.gather_with_grad(passages),
                                       group_size, True, mask, self._teacher(batch.groups, True))
            return StepLoss(self.loss_fn(scores), dist.world_size, True)
        in_batch = self.ctx.config.task.in_batch
        mask = in_batch_mask(batch.mine, exclude).to(device) if in_batch else None
        scores = self.score_groups(queries, passages, group_size, in_batch, mask,
                                   self._teacher(batch.mine, in_batch))
        return StepLoss(self.loss_fn(scores))
