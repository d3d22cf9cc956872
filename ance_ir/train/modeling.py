"""The trainable module around a :class:`~ance_ir.modeling.DenseEncoder`, and gradient norms by layer depth.

DistributedDataParallel only synchronises gradients of computations that go through the wrapped
module's ``forward``, so training calls :class:`DualEncoderModule` rather than the encoder's methods.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence

import torch

from ance_ir.modeling import DenseEncoder

GROUPS = ("bottom", "middle", "top")
# transformer block index in parameter names: BERT/MiniLM "encoder.layer.3.", DistilBERT "transformer.layer.3."
_LAYER = re.compile(r"(?:^|\.)layers?\.(\d+)\.")


class DualEncoderModule(torch.nn.Module):
    """``forward(queries, passage_batches, restore)`` -> query vectors ``[B, D]`` and passage vectors ``[P, D]``.

    The passage batches' vectors are concatenated, then reordered by ``restore`` when given (see
    :class:`~ance_ir.train.collator.Batch`).
    """

    def __init__(self, encoder: DenseEncoder):
        super().__init__()
        self.encoder = encoder

    def forward(self, queries: Mapping[str, torch.Tensor], passage_batches: Sequence[Mapping[str, torch.Tensor]],
                restore: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        query_vectors = self.encoder.embed_queries(queries)
        passages = torch.cat([self.encoder.embed_passages(batch) for batch in passage_batches])
        if restore is not None:
            passages = passages[restore.to(passages.device)]
        return query_vectors, passages


def layer_groups(module: torch.nn.Module) -> dict[str, list[torch.nn.Parameter]]:
    """The transformer blocks' parameters split into bottom, middle and top thirds by block index.

    Block ``i`` of ``L`` goes to third ``floor(3i / L)``: for 6 blocks 1-2 / 3-4 / 5-6, for 12 blocks
    1-4 / 5-8 / 9-12. Separate query and passage towers contribute their blocks of the same depth to
    the same third. Embeddings and heads belong to no third.
    """
    by_block: dict[int, list[torch.nn.Parameter]] = {}
    for name, param in module.named_parameters():
        match = _LAYER.search(name)
        if match:
            by_block.setdefault(int(match.group(1)), []).append(param)
    groups: dict[str, list[torch.nn.Parameter]] = {g: [] for g in GROUPS}
    if by_block:
        count = max(by_block) + 1
        for block, params in by_block.items():
            groups[GROUPS[block * 3 // count]].extend(params)
    return groups


def grad_norm(params: Iterable[torch.nn.Parameter]) -> float | None:
    """L2 norm of the parameters' gradients taken together (None when none has a gradient)."""
    squares = [p.grad.detach().float().pow(2).sum() for p in params if p.grad is not None]
    return math.sqrt(float(torch.stack(squares).sum())) if squares else None
