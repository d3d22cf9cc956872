"""AdamW with a linear warm-up then linear decay to zero, and mixed-precision autocast."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from ance_ir.modeling.inference import note_emulated_bf16


def build_optimizer(module: torch.nn.Module, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """Fused AdamW (one kernel over all parameters, about 5x faster than PyTorch's default step on CPU, see
    docs/bench.md); biases and normalisation weights (1-D parameters) get no weight decay."""
    params = [p for p in module.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.ndim > 1], "weight_decay": weight_decay},
              {"params": [p for p in params if p.ndim <= 1], "weight_decay": 0.0}]
    return torch.optim.AdamW([g for g in groups if g["params"]], lr=lr, fused=True)


def linear_schedule(optimizer: torch.optim.Optimizer, warmup: int, total: int) -> torch.optim.lr_scheduler.LambdaLR:
    """Learning-rate factor rising linearly from 0 over ``warmup`` steps, then falling linearly to 0 at ``total``."""
    def factor(step: int) -> float:
        if step < warmup:
            return step / warmup
        return max(0.0, (total - step) / max(1, total - warmup))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


class Precision:
    """Autocast for bf16 or fp16 (with gradient scaling) on devices that support it; fp32 does nothing."""

    def __init__(self, name: str, device: torch.device):
        self.name, self.device = name, device
        self.dtype = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[name]
        if name == "fp16" and device.type != "cuda":
            raise ValueError("precision fp16 needs a CUDA device; use bf16 or fp32 on the CPU")
        if name == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
            raise ValueError(f"precision bf16 is not supported by {torch.cuda.get_device_name(device)}; "
                             "use fp16 or fp32")
        note_emulated_bf16(name, device)
        self.scaler = torch.amp.GradScaler("cuda") if name == "fp16" else None

    @contextlib.contextmanager
    def autocast(self) -> Iterator[None]:
        if self.dtype is None:
            yield
        else:
            with torch.autocast(self.device.type, dtype=self.dtype):
                yield
