"""The process group under ``torchrun`` (gloo on CPU, nccl on CUDA), or a single process.

Every collective here is a no-op (or the identity) in a single process, so the trainer has one code path.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from ance_ir.modeling.inference import resolve_device
from ance_ir.process_group import join_process_group

T = TypeVar("T")
# A synchronous refresh or a staleness wait on rank 0 keeps the other ranks in a collective meanwhile.
TIMEOUT = timedelta(hours=6)


@dataclass
class Distributed:
    """This process's rank, the world size and its device."""

    rank: int
    world_size: int
    device: torch.device

    @classmethod
    def init(cls, device_spec: str | None) -> Distributed:
        """Join the process group when launched by torchrun (``WORLD_SIZE`` > 1)."""
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        device = resolve_device(device_spec, local_rank)
        if world_size > 1 and device.type == "cuda" and device_spec and torch.device(device_spec).index is not None:
            raise ValueError(f"device {device_spec} under torchrun would put every rank on one GPU; give cuda (each "
                             "rank takes its LOCAL_RANK's GPU)")
        if device.type == "cuda":
            torch.cuda.set_device(device)  # what follows on the current device (faiss, probes) is this one
        if world_size == 1:
            return cls(0, 1, device)
        if not dist.is_initialized():
            join_process_group("nccl" if device.type == "cuda" else "gloo", TIMEOUT)
        return cls(dist.get_rank(), world_size, device)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    def local_share(self, batch: list[T]) -> list[T]:
        """This rank's consecutive share of a global ``batch`` drawn alike on every rank (its size a multiple of the
        world size: the config checks the batch size)."""
        local = len(batch) // self.world_size
        return batch[self.rank * local:(self.rank + 1) * local]

    def barrier(self) -> None:
        if self.enabled:
            dist.barrier()

    def all_gather_object(self, obj: Any) -> list[Any]:
        """Every rank's ``obj``, in rank order."""
        if not self.enabled:
            return [obj]
        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def on_main(self, compute: Callable[[], T]) -> T:
        """Run ``compute`` on rank 0 only and hand its result to every rank."""
        value = compute() if self.is_main else None
        if not self.enabled:
            return value
        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def mean(self, value: float) -> float:
        """The mean of ``value`` over ranks."""
        if not self.enabled:
            return value
        tensor = torch.tensor([value], dtype=torch.float64, device=self.device)
        dist.all_reduce(tensor)
        return tensor.item() / self.world_size

    def global_mean(self, summed: torch.Tensor, count: int) -> torch.Tensor:
        """This rank's share of the mean over every rank's items, from ``summed``, its loss summed over its ``count``
        items (tokens: ranks hold different numbers): DDP averages the ranks' gradients, so the share is the sum over
        the global count, times the world size."""
        if not self.enabled:
            return summed / max(count, 1)
        total = round(self.mean(float(count)) * self.world_size)
        return summed * self.world_size / max(total, 1)

    def gather_with_grad(self, local: torch.Tensor) -> torch.Tensor:
        """All ranks' tensors concatenated along dim 0; this rank's slice keeps its autograd graph.

        Gradients reach only the local slice, so a loss over the gathered tensors must be computed over
        the whole batch on every rank and multiplied by the world size (DDP averages the gradients).
        """
        if not self.enabled:
            return local
        parts = [torch.empty_like(local) for _ in range(self.world_size)]
        dist.all_gather(parts, local.detach().contiguous())
        parts[self.rank] = local
        return torch.cat(parts)

    def close(self) -> None:
        if self.enabled and dist.is_initialized():
            dist.destroy_process_group()
