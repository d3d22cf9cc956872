"""RocketQAv2's dynamic listwise distillation (Ren et al., 2021): ``task: rocketqa-v2``.

The retriever (the dense dual encoder being trained) and a ranker (a cross-encoder, ``task.ranker``, usually one
trained with ``task: cross-encoder``) are trained together on each query's candidate list (its positive and sampled
negatives, drawn as the contrastive task draws them: e.g. static hard negatives from ``candidates`` and denoised
ones from scored ``groups``). The loss is the survey's

    L = KL(s_de || s_ce) + L_sup,

the KL divergence between the retriever's softmax over the list (scores over ``loss.temperature``) and the
ranker's, plus the ranker's own softmax cross-entropy of the positive. Both models move: the ranker follows the
retriever's distribution as it distils into it. The ranker's weights are part of every checkpoint's trainer state
(exact resume) and are saved as a model folder ``ranker/`` in the run folder at the end (``python -m
ance_ir.rerank --model RUN/ranker``). No in-batch negatives (the lists are per query) and no ANN refresh.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from ance_ir.modeling.resolve import require_local_model
from ance_ir.train.collator import Batch, Collator, Group
from ance_ir.train.contrastive import GroupBatch, GroupTask
from ance_ir.train.cross_encoder import PairBatch, PairCollator, PairScorer
from ance_ir.train.hooks import TrainingHook
from ance_ir.train.modeling import DualEncoderModule
from ance_ir.train.settings import ConfigError
from ance_ir.train.task import StepLoss, TaskContext, register_task


@dataclass
class JointInputs:
    """A slice's groups for the retriever (query and passage tokens) and for the ranker (pair tokens)."""

    dense: Batch
    pairs: PairBatch


class JointModule(torch.nn.Module):
    """``forward(inputs)`` -> query vectors ``[B, D]``, passage vectors ``[B*G, D]`` and pair scores ``[B*G]``
    (one ``forward`` for both models, as DistributedDataParallel needs)."""

    def __init__(self, retriever: torch.nn.Module, ranker: torch.nn.Module):
        super().__init__()
        self.retriever, self.ranker = DualEncoderModule(retriever), PairScorer(ranker)

    def forward(self, inputs: JointInputs) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        dense = inputs.dense
        queries, passages = self.retriever(dict(dense.queries), [dict(p) for p in dense.passages], dense.restore)
        return queries, passages, self.ranker(inputs.pairs.batches, inputs.pairs.restore)


def listwise_distillation(retriever: torch.Tensor, ranker: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """RocketQAv2's loss of ``[B, G]`` scores (positive in column 0): KL(retriever || ranker) of the lists'
    softmax distributions, plus the ranker's cross-entropy of the positive (means over queries)."""
    log_de = F.log_softmax(retriever / temperature, dim=1)
    log_ce = F.log_softmax(ranker, dim=1)
    kl = (log_de.exp() * (log_de - log_ce)).sum(1).mean()
    return kl - log_ce[:, 0].mean()


class RankerSaver(TrainingHook):
    """Writes the trained ranker to ``ranker/`` in the run folder when the run ends (rank 0)."""

    def __init__(self, ctx: TaskContext, ranker: torch.nn.Module):
        self.ctx, self.ranker = ctx, ranker

    def finish(self, step: int) -> None:
        if self.ctx.dist.is_main:
            self.ranker.save_pretrained(self.ctx.run.root / "ranker")


@register_task
class RocketQAv2Task(GroupTask):
    """The retriever distilled from a cross-encoder trained along with it, over each query's candidate list."""

    name = "rocketqa-v2"
    own_loss = "listwise distillation between the retriever and the ranker; loss.temperature applies"
    options = {"ranker": None}
    no_refresh = "the ranker scores a static candidate list"
    static_negatives = "groups, candidates, bm25, static or random"
    evaluate_with = "encode and search"

    def __init__(self, ctx: TaskContext, model: torch.nn.Module):
        super().__init__(ctx, model)
        from ance_ir.modeling.kinds import load_model
        from ance_ir.rerank import check_standalone

        require_local_model(ctx.config.task.options["ranker"], "task.ranker")
        self.ranker = load_model(ctx.config.task.options["ranker"], "cross-encoder").to(ctx.device)
        check_standalone(self.ranker, ctx.config.task.options["ranker"])
        self.dense_collator = Collator(model, ctx.data.queries, ctx.data.texts, ctx.config.task.passage_buckets)
        self.pair_collator = PairCollator(self.ranker, ctx.data.queries, ctx.data.texts,
                                          ctx.config.task.passage_buckets)
        self._module = JointModule(model, self.ranker)

    @classmethod
    def check_config(cls, config: Any) -> None:
        if not config.task.options["ranker"]:
            raise ConfigError("task.ranker", "RocketQAv2 trains a cross-encoder along with the retriever: give its "
                                             "model folder (trained with task: cross-encoder)")
        if config.model.kind not in (None, "dense"):
            raise ConfigError("model.kind", f"the retriever is a dense dual encoder, got {config.model.kind!r}")
        if config.loss.teacher_index:
            raise ConfigError("loss.teacher_index", "RocketQAv2's teacher is the ranker it trains (task.ranker)")
        super().check_config(config)
        if config.task.in_batch:
            raise ConfigError("task.in_batch", "RocketQAv2 distils each query's own candidate list; the ranker "
                                               "scores no in-batch pairs")
        if config.task.n_negatives < 1:
            raise ConfigError("task.n_negatives", "a candidate list needs at least one negative")

    @property
    def module(self) -> torch.nn.Module:
        return self._module

    def hooks(self) -> list[TrainingHook]:
        return [RankerSaver(self.ctx, self.ranker)]

    def collate(self, groups: list[Group]) -> JointInputs:
        return JointInputs(self.dense_collator(groups), self.pair_collator(groups))

    def loss(self, module: torch.nn.Module, batch: GroupBatch,
             autocast: Callable[[], contextlib.AbstractContextManager]) -> StepLoss:
        with autocast():
            queries, passages, pairs = module(batch.inputs)
        b, size = len(batch.mine), batch.inputs.dense.group_size
        retriever = torch.einsum("bd,bgd->bg", queries.float(), passages.float().view(b, size, -1))
        return StepLoss(listwise_distillation(retriever, pairs.float().view(b, size),
                                              self.ctx.config.loss.temperature))

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "ranker": self.ranker.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.ranker.load_state_dict(state["ranker"])
