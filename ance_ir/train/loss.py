"""Losses over scored query groups, chosen by name from :data:`LOSSES`.

A task scores its batch with the model (any kind: dot products, MaxSim, a cross-encoder) and hands the
loss a :class:`GroupScores`: ``B`` queries, each with a group of ``G`` passages (its positive first, then
its negatives), scored against its own group only (``[B, G]``) or against every passage of the batch
(``[B, B*G]``, in-batch negatives, positive of query ``i`` in column ``i*G``; ``-inf`` where a passage must
not count). Teacher scores come along for distillation losses: of each query's own group (``[B, G]``, NaN where
unknown), or, from a dense teacher (:mod:`ance_ir.train.teacher`), of every passage the student scores (the
shape of ``scores``). A new loss is one subclass with a ``name`` (and the ``options`` it takes, name ->
default), decorated with :func:`register_loss`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F

from ance_ir.train.registry import Registry


@dataclass
class GroupScores:
    """The student's scores of a batch, where each query's positive is, and the teacher's scores if any."""

    scores: torch.Tensor
    targets: torch.Tensor
    group_size: int
    in_batch: bool
    teacher: torch.Tensor | None = None

    @property
    def own(self) -> torch.Tensor:
        """``[B, G]``: each query's scores of its own group (positive first)."""
        if not self.in_batch:
            return self.scores
        b, g = self.scores.shape[0], self.group_size
        columns = self.targets.unsqueeze(1) + torch.arange(g, device=self.scores.device)
        return self.scores.gather(1, columns.view(b, g))


LOSSES = Registry("loss")
register_loss = LOSSES.register


class ContrastiveLoss(ABC):
    """A loss of a batch's scores (mean over queries)."""

    name: ClassVar[str]
    options: ClassVar[dict[str, Any]] = {}
    needs_teacher: ClassVar[bool] = False

    def __init__(self, temperature: float = 1.0, **options: Any):
        self.temperature = temperature
        self.settings = {**self.options, **options}

    @abstractmethod
    def __call__(self, batch: GroupScores) -> torch.Tensor:
        """The loss of ``batch``."""


def dense_group_scores(queries: torch.Tensor, passages: torch.Tensor, group_size: int, in_batch: bool,
                       mask: torch.Tensor | None = None, teacher: torch.Tensor | None = None) -> GroupScores:
    """Dot-product scores of ``queries`` ``[B, D]`` against ``passages`` ``[B*G, D]``.

    Without in-batch: ``[B, G]`` (own group only). With it: ``[B, B*G]``, ``mask`` (True = ignore) entries
    set to ``-inf``.
    """
    b, dim = queries.shape
    if passages.shape != (b * group_size, dim):
        raise ValueError(f"expected {b * group_size} passage vectors of dimension {dim} for {b} queries in "
                         f"groups of {group_size}, got shape {tuple(passages.shape)}")
    if in_batch:
        scores = queries @ passages.T
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        return GroupScores(scores, torch.arange(b, device=queries.device) * group_size, group_size, True, teacher)
    scores = torch.einsum("bd,bgd->bg", queries, passages.view(b, group_size, dim))
    return GroupScores(scores, torch.zeros(b, dtype=torch.long, device=queries.device), group_size, False, teacher)


def scored_groups(score: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], queries: torch.Tensor,
                  passages: torch.Tensor, group_size: int, in_batch: bool, mask: torch.Tensor | None = None,
                  teacher: torch.Tensor | None = None) -> GroupScores:
    """:func:`dense_group_scores` for any model's representations: ``B`` queries' (``[B, ...]``) against ``B*G``
    passages' (``[B*G, ...]``), scored by ``score(queries [..., *q], passages [..., P, *p]) -> [..., P]`` (leading
    dimensions broadcast): the whole batch ``[B, B*G]`` with in-batch negatives, else each query's own group."""
    b = len(queries)
    if len(passages) != b * group_size:
        raise ValueError(f"expected {b * group_size} passages for {b} queries in groups of {group_size}, got "
                         f"{len(passages)}")
    if in_batch:
        scores = score(queries, passages)
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        return GroupScores(scores, torch.arange(b, device=queries.device) * group_size, group_size, True, teacher)
    scores = score(queries, passages.view(b, group_size, *passages.shape[1:]))
    return GroupScores(scores, torch.zeros(b, dtype=torch.long, device=queries.device), group_size, False, teacher)


@register_loss
class NLLLoss(ContrastiveLoss):
    """Negative log-likelihood of the positive under a softmax over ``score / temperature``.

    One negative and no in-batch passages is ANCE's pairwise loss, ``-log sigmoid(s+ - s-)``; BM25 or
    ANCE negatives plus in-batch passages is DPR's.
    """

    name = "nll"

    def __call__(self, batch: GroupScores) -> torch.Tensor:
        return F.cross_entropy(batch.scores / self.temperature, batch.targets)


@register_loss
class HardestNegativeLoss(ContrastiveLoss):
    """The pairwise loss ``-log sigmoid(s+ - s-)`` against each query's highest-scored negative only, over every
    passage it is scored against (the batch's other passages with in-batch negatives): the ANCE paper's NCE Neg row,
    the hardest in-batch negative."""

    name = "hardest"

    def __call__(self, batch: GroupScores) -> torch.Tensor:
        scores = batch.scores / self.temperature
        positive = scores.gather(1, batch.targets[:, None])[:, 0]
        hardest = scores.scatter(1, batch.targets[:, None], float("-inf")).max(1).values
        return F.softplus(hardest - positive).mean()


@register_loss
class BCELoss(ContrastiveLoss):
    """Pointwise binary cross-entropy on the logits ``score / temperature`` of each query's own group: the
    positive labelled 1, its negatives 0, averaged over every (query, passage) pair (in-batch passages unused).

    How a cross-encoder is trained pointwise (monoBERT); ``nll`` is the listwise alternative.
    """

    name = "bce"

    def __call__(self, batch: GroupScores) -> torch.Tensor:
        logits = batch.own / self.temperature
        labels = torch.zeros_like(logits)
        labels[:, 0] = 1.0
        return F.binary_cross_entropy_with_logits(logits, labels)


@register_loss
class RankNetLoss(ContrastiveLoss):
    """RankNet's pairwise loss ``log(1 + exp(s- - s+))`` (on ``score / temperature``), as STAR (Zhan et al., 2021)
    trains: the mean over each query's (positive, own sampled negative) pairs, the static hard negatives, plus
    ``random_weight`` times the mean over its (positive, other queries' passage) pairs, the in-batch random negatives
    (the survey's ``alpha * L_random + L_static``, ``0 < alpha << 1``)."""

    name = "ranknet"
    options = {"random_weight": 0.1}

    def __call__(self, batch: GroupScores) -> torch.Tensor:
        scores = batch.scores / self.temperature
        b, g = scores.shape[0], batch.group_size
        valid = torch.isfinite(scores)
        pairs = F.softplus((scores - scores.gather(1, batch.targets[:, None])).masked_fill(~valid, 0.0))
        own = torch.zeros_like(valid)
        own.scatter_(1, batch.targets[:, None] + torch.arange(g, device=scores.device).expand(b, g), True)
        hard = own & valid
        hard.scatter_(1, batch.targets[:, None], False)
        loss = _masked_mean(pairs, hard)
        if batch.in_batch and self.settings["random_weight"]:
            loss = loss + self.settings["random_weight"] * _masked_mean(pairs, ~own & valid)
        return loss


def _masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The mean of ``values`` where ``mask`` holds (0, with a graph, where it holds nowhere)."""
    return (values * mask).sum() / mask.sum().clamp(min=1)


class DistillationLoss(ContrastiveLoss):
    """A loss matching the teacher's scores: of each query's own group (``[B, G]``, positive first), or of every
    passage the student scores when the teacher's scores have the student's shape (a dense teacher with in-batch
    negatives). Entries the teacher did not score (NaN) or the student may not count (``-inf``) are left out (a
    margin needs its positive and negative scored, a distribution two passages).

    ``label_weight`` > 0 adds that times ``nll`` on the labels (the positive against every scored passage, the
    batch's other passages too when the task scores them): TAS-B's dual supervision, teacher margins and in-batch
    negatives together.
    """

    needs_teacher = True
    options = {"label_weight": 0.0}

    def __call__(self, batch: GroupScores) -> torch.Tensor:
        loss = self.distil(batch)
        if self.settings["label_weight"]:
            loss = loss + self.settings["label_weight"] * F.cross_entropy(batch.scores / self.temperature,
                                                                         batch.targets)
        return loss

    @abstractmethod
    def distil(self, batch: GroupScores) -> torch.Tensor:
        """The distillation term of ``batch``."""

    def aligned(self, batch: GroupScores) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The student's scores the teacher's columns match (each group's, or all of them), the teacher's (unknown
        ones 0), where both are known (the student's unknown ones are 0 too), and each row's positive column."""
        if batch.teacher is None:
            raise ValueError(f"loss {self.name!r} needs teacher scores: train on groups scored by a teacher "
                             "(data.source: groups, written by python -m ance_ir.rerank --groups) or set "
                             "loss.teacher_index")
        if batch.teacher.shape == batch.scores.shape:
            student, positive = batch.scores, batch.targets
        else:
            student, positive = batch.own, torch.zeros_like(batch.targets)
        known = ~torch.isnan(batch.teacher) & torch.isfinite(student)
        return student.masked_fill(~known, 0.0), torch.nan_to_num(batch.teacher), known, positive[:, None]


@register_loss
class MSELoss(DistillationLoss):
    """Mean squared error between the student's scores (over ``temperature``) and the teacher's scores."""

    name = "mse"

    def distil(self, batch: GroupScores) -> torch.Tensor:
        student, teacher, known, _ = self.aligned(batch)
        errors = (student / self.temperature - teacher) ** 2
        return (errors * known).sum() / known.sum().clamp(min=1)


@register_loss
class MarginMSELoss(DistillationLoss):
    """Margin-MSE (Hofstätter et al.): the squared difference between the student's margin ``s+ - s-`` (over
    ``temperature``) and the teacher's ``t+ - t-``, over every (positive, negative) pair the teacher scored."""

    name = "margin-mse"

    def distil(self, batch: GroupScores) -> torch.Tensor:
        student, teacher, known, positive = self.aligned(batch)
        student_margins = (student.gather(1, positive) - student) / self.temperature
        teacher_margins = teacher.gather(1, positive) - teacher
        pairs = (known & known.gather(1, positive)).scatter(1, positive, False)
        return (((student_margins - teacher_margins) ** 2) * pairs).sum() / pairs.sum().clamp(min=1)


@register_loss
class KLLoss(DistillationLoss):
    """KL(teacher || student) between each row's softmax of the teacher's scores over ``teacher_temperature``
    and of the student's over ``temperature`` (listwise distillation), over the passages both score."""

    name = "kl"
    options = {**DistillationLoss.options, "teacher_temperature": 1.0}

    def distil(self, batch: GroupScores) -> torch.Tensor:
        student, teacher, known, _ = self.aligned(batch)
        rows = known.sum(1) >= 2
        if not rows.any():
            return student.sum() * 0.0
        student, teacher, known = student[rows], teacher[rows], known[rows]
        hidden = float("-inf")
        log_student = F.log_softmax((student / self.temperature).masked_fill(~known, hidden), dim=1)
        log_teacher = F.log_softmax((teacher / self.settings["teacher_temperature"]).masked_fill(~known, hidden),
                                    dim=1)
        terms = torch.where(known, log_teacher.exp() * (log_teacher - log_student), torch.zeros_like(student))
        return terms.sum(1).mean()


def build_loss(name: str, temperature: float = 1.0, **options: Any) -> ContrastiveLoss:
    """The loss registered as ``name``."""
    return LOSSES.require(name)(temperature, **options)
