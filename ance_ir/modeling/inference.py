"""Precision modes for encoding (inference only; training uses its own autocast).

``fp32``: the plain float32 model. ``bf16``/``fp16``: autocast, so matrix products run in 16 bits while
layer norms, softmax and the residual stream stay float32 (fp16 needs CUDA). ``int8``: a copy of the encoder
whose ``Linear`` layers are dynamically quantised to int8 (CPU only; lossy, for fast ANCE refresh encodes).
``auto``: bf16 where the hardware computes bf16 natively (a CPU with AVX-512 BF16 or AMX, or a CUDA GPU with
bf16 support), fp16 on older GPUs; on other CPUs the model's ``cpu_auto_precision``: int8 for a dense encoder of
L2-normalised vectors (its fastest mode there within 0.005 nDCG@10 of fp32), fp32 for unnormalised vectors (ANCE's,
ME-BERT's, the poly-encoder's: int8 moves their dot products more) and the other kinds. ``docs/bench.md`` has the
speed and nDCG@10 of each mode on both kinds of CPU.
"""

from __future__ import annotations

import copy
import hashlib
import sys
import warnings
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeVar

import torch
from tqdm import tqdm

if TYPE_CHECKING:
    from ance_ir.modeling.encoder import DenseEncoder

T = TypeVar("T")
PRECISIONS = ("auto", "fp32", "bf16", "fp16", "int8")
_AUTOCAST = {"bf16": torch.bfloat16, "fp16": torch.float16}
# encoder -> (parameter versions when quantised, int8 copy); a training step bumps the versions
_INT8: weakref.WeakKeyDictionary[DenseEncoder, tuple[tuple[int, ...], DenseEncoder]] = weakref.WeakKeyDictionary()


def native_bf16(device: torch.device | str) -> bool:
    """Whether ``device`` computes bf16 matrix products in hardware (so bf16 is faster than fp32 there)."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.is_available() and torch.cuda.get_device_capability(device)[0] >= 8
    if device.type == "cpu":  # private probes of torch's CPU dispatcher; absent in old releases
        if torch.backends.cpu.get_cpu_capability() in ("DEFAULT", "AVX2"):  # kernels capped below AVX-512
            return False
        probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
        return any(getattr(torch.cpu, name, lambda: False)() for name in probes)
    return False


def note_emulated_bf16(precision: str, device: torch.device | str) -> None:
    """One note on stderr when bf16 is asked for on a CPU that only emulates it: there it is slower than fp32
    (docs/bench.md, the AVX2 tables), so a config written for a CPU with AMX runs many times longer. A GPU that
    emulates it (before compute capability 8.0) gets a note too."""
    if precision == "bf16" and torch.device(device).type == "cuda" and not native_bf16(device):
        print(f"note: {torch.cuda.get_device_name(device)} has no native bf16 (it needs compute capability 8.0): "
              "bf16 is emulated there and slower than fp16 or fp32", file=sys.stderr)
    if precision == "bf16" and torch.device(device).type == "cpu" and not native_bf16(device):
        print("note: this CPU has no native bf16 (AVX-512 BF16 or AMX): bf16 is emulated and slower than fp32 "
              "here (docs/bench.md)", file=sys.stderr)


def resolve_device(name: str | None, local_rank: int | None = None) -> torch.device:
    """The device ``name`` names (a ``--device`` flag, a config's ``device``): cuda when torch sees a GPU and none is
    named, else the CPU; with ``local_rank`` (a torchrun process's), plain cuda is that process's own GPU.

    Raises ValueError for a name torch does not read as a device, or a CUDA device where torch sees no GPU, so a
    command fails before it reads anything.
    """
    try:
        device = torch.device(name or ("cuda" if torch.cuda.is_available() else "cpu"))
    except RuntimeError:
        raise ValueError(f"device {name!r}: not a device name (cpu, cuda or cuda:N)") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device}: torch sees no CUDA GPU")
    if device.type == "cuda" and device.index is None and local_rank is not None:
        device = torch.device("cuda", local_rank)
    return device


def check_precision(precision: str, device: torch.device | str) -> str:
    """A command's ``--precision`` resolved on ``device`` before any work (ValueError where it cannot run there),
    with :func:`note_emulated_bf16`'s note where it means bf16 on a CPU that only emulates it."""
    resolved = resolve_precision(precision, device)
    note_emulated_bf16(resolved, device)
    return resolved


def resolve_precision(precision: str, device: torch.device | str, cpu_auto: str = "fp32") -> str:
    """The concrete mode (fp32, bf16, fp16 or int8) that ``precision`` means on ``device``; ``cpu_auto``: what
    ``auto`` means on a CPU without native bf16.

    Raises ValueError for an unknown mode, fp16 off CUDA, and int8 off the CPU.
    """
    device = torch.device(device)
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choose from {', '.join(PRECISIONS)}")
    if precision == "auto":
        if native_bf16(device):
            return "bf16"
        return "fp16" if device.type == "cuda" else cpu_auto
    if precision == "fp16" and device.type != "cuda":
        raise ValueError("precision fp16 needs a CUDA device; use bf16 (or auto) on the CPU")
    if precision == "int8" and device.type != "cpu":
        raise ValueError(f"precision int8 (dynamic quantisation) runs on the CPU only, not {device.type}")
    return precision


def weights_sha256(model: torch.nn.Module) -> str:
    """SHA-256 of ``model``'s weights (each state-dict entry's name, dtype, shape and bytes, by name): what a resumed
    job records, so that a model trained again in place is not mixed with the old one's output."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}\n".encode())
        digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy())
    return digest.hexdigest()


def model_precision(model: torch.nn.Module, precision: str | None = None) -> str:
    """The concrete mode ``model`` runs at for ``precision`` (default: its ``inference_precision``)."""
    return resolve_precision(precision or model.inference_precision, model.device,
                             getattr(model, "cpu_auto_precision", "fp32"))


def quantize_int8(encoder: DenseEncoder) -> DenseEncoder:
    """A copy of ``encoder`` with every ``Linear`` dynamically quantised to int8, one weight scale per output
    channel (closer to fp32 than one scale per tensor, at the same speed: docs/bench.md). Activations are
    quantised as they come, one scale per batch, so a passage's vector depends a little on its batch-mates.

    The source encoder is left untouched; embeddings, layer norms and attention stay float32.
    """
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    source = copy.deepcopy(encoder).cpu().eval()
    with warnings.catch_warnings():  # torch.ao.quantization's notice that it is moving to torchao
        warnings.simplefilter("ignore")
        return quantize_dynamic(source, {torch.nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8,
                                inplace=True)


def _int8_copy(encoder: DenseEncoder) -> DenseEncoder:
    """The cached int8 copy of ``encoder``, rebuilt whenever a parameter was changed in place since."""
    versions = tuple(p._version for p in encoder.parameters())
    cached = _INT8.get(encoder)
    if cached is None or cached[0] != versions:
        cached = (versions, quantize_int8(encoder))
        _INT8[encoder] = cached
    return cached[1]


@contextmanager
def running(encoder: DenseEncoder, precision: str) -> Iterator[DenseEncoder]:
    """Yield the encoder to run at ``precision`` (itself, or its int8 copy), inside autocast when needed."""
    mode = model_precision(encoder, precision)
    if mode == "int8":
        yield _int8_copy(encoder)
    elif mode in _AUTOCAST:
        with torch.autocast(encoder.device.type, dtype=_AUTOCAST[mode]):
            yield encoder
    else:
        yield encoder


@contextmanager
def evaluating(model: torch.nn.Module, precision: str | None) -> Iterator[torch.nn.Module]:
    """Eval mode, no autograd, the model (or its int8 copy) at ``precision`` (default: its
    ``inference_precision``); the training mode is restored after."""
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode(), running(model, precision or model.inference_precision) as running_model:
            yield running_model
    finally:
        model.train(was_training)


def batch_bar(batches: Iterable[T], desc: str, show_progress: bool) -> tqdm[T]:
    """``batches`` behind a model call's progress bar (shown with ``show_progress``, cleared once done). A caller
    that runs the call under a bar of its own (``encode``'s chunks) shows it on a terminal only
    (:func:`nested_progress`): in a log file each redraw of a nested bar is a new line."""
    return tqdm(batches, desc=desc, unit="batch", disable=not show_progress, leave=False, file=sys.stderr)


def nested_progress(show_progress: bool) -> bool:
    """Whether a bar under a caller's bar is shown: with ``show_progress``, on a terminal only."""
    return show_progress and sys.stderr.isatty()
