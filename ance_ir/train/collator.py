"""Turn training groups (query, positive, negatives) into tokenized model inputs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from transformers import BatchEncoding

from ance_ir.modeling import DenseEncoder


@dataclass(frozen=True)
class Group:
    """One training example: a query, one positive and its sampled negatives."""

    qid: str
    positive: str
    negatives: tuple[str, ...]

    @property
    def docids(self) -> tuple[str, ...]:
        """Positive first, then the negatives."""
        return (self.positive, *self.negatives)


@dataclass
class Batch:
    """Tokenized queries ``[B, ...]`` and passages ``[B*G, ...]`` (each query's group contiguous)."""

    queries: BatchEncoding
    passages: BatchEncoding
    group_size: int


class Collator:
    """Tokenize groups with the encoder's query and passage settings."""

    def __init__(self, encoder: DenseEncoder, queries: Mapping[str, str], texts: Mapping[str, str]):
        self.encoder, self.queries, self.texts = encoder, queries, texts

    def __call__(self, groups: Sequence[Group]) -> Batch:
        sizes = {len(g.docids) for g in groups}
        if len(sizes) != 1:
            raise ValueError(f"groups of a batch must have one size, got {sorted(sizes)}")
        queries = self.encoder.tokenize_queries([self.queries[g.qid] for g in groups])
        passages = self.encoder.tokenize_passages([self.texts[d] for g in groups for d in g.docids])
        return Batch(queries, passages, sizes.pop())


def in_batch_mask(groups: Sequence[Group], exclude: Mapping[str, frozenset[str]]) -> torch.Tensor:
    """``[B, B*G]`` True where a batch passage is judged relevant to a query but is not its own positive.

    Such passages (another copy of one of its positives, or a relevant passage of another query) must not
    count as that query's in-batch negatives.
    """
    docids = [d for g in groups for d in g.docids]
    size = len(groups[0].docids)
    mask = torch.zeros(len(groups), len(docids), dtype=torch.bool)
    for i, group in enumerate(groups):
        judged = exclude.get(group.qid, frozenset())
        for j, docid in enumerate(docids):
            if j != i * size and docid in judged:
                mask[i, j] = True
    return mask
