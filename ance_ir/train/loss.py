"""Contrastive losses over a batch of query groups, chosen by name from :data:`LOSSES`.

A batch holds ``B`` query vectors and ``B * G`` passage vectors: for query ``i``, rows ``i*G`` (its
positive) to ``i*G + G - 1`` (its ``G - 1`` negatives). With ``in_batch`` each query is also scored against
every other query's passages; ``mask`` (``[B, B*G]``, True = ignore) drops passages that must not count as
negatives of a query (e.g. another copy of one of its positives).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import torch
import torch.nn.functional as F

LOSSES: dict[str, type[ContrastiveLoss]] = {}


def register_loss(cls: type[ContrastiveLoss]) -> type[ContrastiveLoss]:
    """Class decorator: make a loss selectable by its ``name``."""
    LOSSES[cls.name] = cls
    return cls


class ContrastiveLoss(ABC):
    """A loss of query vectors against grouped passage vectors (mean over queries)."""

    name: ClassVar[str]

    def __init__(self, temperature: float = 1.0):
        self.temperature = temperature

    @abstractmethod
    def __call__(self, queries: torch.Tensor, passages: torch.Tensor, group_size: int, in_batch: bool,
                 mask: torch.Tensor | None = None) -> torch.Tensor:
        """The loss for ``queries`` ``[B, D]`` and ``passages`` ``[B*group_size, D]``."""


def group_scores(queries: torch.Tensor, passages: torch.Tensor, group_size: int, in_batch: bool,
                 mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Dot-product scores and the column of each query's positive.

    Without in-batch: ``[B, G]`` (own group only, positive in column 0). With it: ``[B, B*G]``, masked
    entries set to ``-inf``, positive of query ``i`` in column ``i*G``.
    """
    b, dim = queries.shape
    if passages.shape != (b * group_size, dim):
        raise ValueError(f"expected {b * group_size} passage vectors of dimension {dim} for {b} queries in "
                         f"groups of {group_size}, got shape {tuple(passages.shape)}")
    if in_batch:
        scores = queries @ passages.T
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        return scores, torch.arange(b, device=queries.device) * group_size
    scores = torch.einsum("bd,bgd->bg", queries, passages.view(b, group_size, dim))
    return scores, torch.zeros(b, dtype=torch.long, device=queries.device)


@register_loss
class NLLLoss(ContrastiveLoss):
    """Negative log-likelihood of the positive under a softmax over ``score / temperature``.

    One negative and no in-batch passages is ANCE's pairwise loss, ``-log sigmoid(s+ - s-)``; BM25 or
    ANCE negatives plus in-batch passages is DPR's.
    """

    name = "nll"

    def __call__(self, queries: torch.Tensor, passages: torch.Tensor, group_size: int, in_batch: bool,
                 mask: torch.Tensor | None = None) -> torch.Tensor:
        scores, targets = group_scores(queries, passages, group_size, in_batch, mask)
        return F.cross_entropy(scores / self.temperature, targets)


def build_loss(name: str, temperature: float = 1.0) -> ContrastiveLoss:
    """The loss registered as ``name``."""
    if name not in LOSSES:
        raise ValueError(f"unknown loss {name!r}; known: {', '.join(LOSSES)}")
    return LOSSES[name](temperature)
