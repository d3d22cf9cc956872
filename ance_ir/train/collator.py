"""Turn training groups (query, positive, negatives) into tokenized model inputs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
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
    """Tokenized queries ``[B, ...]`` and the ``B*G`` passages (each query's group contiguous).

    The passages are tokenized in one or more length-sorted sub-batches, each padded to its own longest;
    row ``restore[i]`` of their concatenated vectors is passage ``i`` (``restore`` is None for one batch in
    group order).
    """

    queries: BatchEncoding
    passages: tuple[BatchEncoding, ...]
    restore: torch.Tensor | None
    group_size: int


class Collator:
    """Tokenize groups with the encoder's query and passage settings.

    ``passage_buckets > 1`` sorts a batch's passages by token length and splits them into that many
    sub-batches, so that short passages are not padded to the longest one of the whole batch.
    """

    def __init__(self, encoder: DenseEncoder, queries: Mapping[str, str], texts: Mapping[str, str],
                 passage_buckets: int = 1):
        if not isinstance(passage_buckets, int) or passage_buckets < 1:
            raise ValueError(f"passage_buckets must be at least 1, got {passage_buckets}")
        self.encoder, self.queries, self.texts = encoder, queries, texts
        self.passage_buckets = passage_buckets

    def __call__(self, groups: Sequence[Group]) -> Batch:
        sizes = {len(g.docids) for g in groups}
        if len(sizes) != 1:
            raise ValueError(f"groups of a batch must have one size, got {sorted(sizes)}")
        queries = self.encoder.tokenize_queries([self.queries[g.qid] for g in groups])
        texts = [self.texts[d] for g in groups for d in g.docids]
        if self.passage_buckets == 1:
            return Batch(queries, (self.encoder.tokenize_passages(texts),), None, sizes.pop())
        encoded = self.encoder.token_ids(texts, "passage")  # tokenized once, padded per sub-batch
        ids = encoded["input_ids"]
        order = sorted(range(len(texts)), key=lambda i: len(ids[i]))
        buckets = [b.tolist() for b in np.array_split(order, min(self.passage_buckets, len(order)))]
        passages = tuple(self.encoder.pad(encoded, b) for b in buckets)
        restore = torch.empty(len(order), dtype=torch.long)
        restore[order] = torch.arange(len(order))
        return Batch(queries, passages, restore, sizes.pop())


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
