"""Gradient cache (Gao et al., 2021; sentence-transformers' CachedMultipleNegativesRankingLoss): a contrastive loss
over a big batch with the activation memory of one chunk (``task.grad_cache_chunk``).

Forward: every chunk of queries and passages is encoded without a graph (the RNG state before it is kept); the
loss is computed on the whole batch's representations, made leaves. Backward: the loss's gradients reach those
representations (and any parameters the scoring itself uses), then each chunk is encoded again, with a graph and
the RNG state replayed (the same dropout masks), and backpropagated from its cached representation gradients. The
parameters' gradients are those of the big batch encoded chunk after chunk. The backward runs inside the
trainer's own ``backward()`` (a custom autograd function, as reentrant activation checkpointing does), so the
trainer's loss scaling and accumulation apply unchanged.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from ance_ir.train.task import StepLoss

RngState = tuple[torch.Tensor, torch.Tensor | None]


def rng_state(device: torch.device) -> RngState:
    """The CPU RNG state and, on a GPU, the device's."""
    return torch.get_rng_state(), torch.cuda.get_rng_state(device) if device.type == "cuda" else None


@contextlib.contextmanager
def replayed_rng(state: RngState, device: torch.device) -> Iterator[None]:
    """Run with the RNGs set to ``state``; the RNGs are as before afterwards."""
    cpu, gpu = state
    with torch.random.fork_rng(devices=[device] if gpu is not None else []):
        torch.set_rng_state(cpu)
        if gpu is not None:
            torch.cuda.set_rng_state(gpu, device)
        yield


class _Deferred(torch.autograd.Function):
    """Returns ``value``; its backward calls ``backward(grad)`` (with grad enabled) and passes nothing on."""

    @staticmethod
    def forward(ctx: Any, anchor: torch.Tensor, value: torch.Tensor, backward: Callable[[torch.Tensor], None]
                ) -> torch.Tensor:
        ctx.run_backward = backward
        return value.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[None, None, None]:
        with torch.enable_grad():
            ctx.run_backward(grad)
        return None, None, None


def grad_cache_loss(encode: Callable[[Any], tuple[torch.Tensor, torch.Tensor]], chunks: Sequence[Any],
                    loss_of: Callable[[torch.Tensor, torch.Tensor], StepLoss], device: torch.device) -> StepLoss:
    """The loss of the whole batch from chunked encoding: ``encode(chunk)`` gives a chunk's query and passage
    representations (concatenated in chunk order they are the batch's), ``loss_of(queries, passages)`` the loss.

    The returned loss's ``backward()`` fills the parameters' gradients chunk by chunk (see the module).
    """
    states, queries, passages = [], [], []
    for chunk in chunks:
        states.append(rng_state(device))
        with torch.no_grad():
            q, p = encode(chunk)
        queries.append(q)
        passages.append(p)
    all_queries = torch.cat(queries).requires_grad_()
    all_passages = torch.cat(passages).requires_grad_()
    inner = loss_of(all_queries, all_passages)

    def backward(grad: torch.Tensor) -> None:
        torch.autograd.backward(inner.loss, grad)
        query_grads = _grad(all_queries).split([len(q) for q in queries])
        passage_grads = _grad(all_passages).split([len(p) for p in passages])
        for state, chunk, query_grad, passage_grad in zip(states, chunks, query_grads, passage_grads, strict=True):
            with replayed_rng(state, device):
                q, p = encode(chunk)
            torch.autograd.backward((q, p), (query_grad, passage_grad))

    anchor = torch.zeros((), device=inner.loss.device, requires_grad=True)
    return StepLoss(_Deferred.apply(anchor, inner.loss.detach(), backward), inner.factor, inner.whole_batch)


def _grad(leaf: torch.Tensor) -> torch.Tensor:
    return leaf.grad if leaf.grad is not None else torch.zeros_like(leaf)
