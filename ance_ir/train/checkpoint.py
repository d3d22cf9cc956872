"""Checkpoints: ``OUTPUT/checkpoints/step-NNNNNNNN/``, each written as one atomic folder.

A checkpoint folder is a saved model (Hugging Face layout plus its kind, loadable by
:func:`ance_ir.modeling.kinds.load_model` and every ance-ir CLI) plus ``trainer_state.pt``: optimizer, scheduler,
step, RNG states of every rank, the pair order and the negatives version in use. Folders are built under a
hidden temporary name and renamed into place, so every listed checkpoint is complete.
"""

from __future__ import annotations

import pickle
import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ance_ir.data import InputError, atomic_directory
from ance_ir.modeling.resolve import ModelNotAvailableError, require_local_model, run_model_dir
from ance_ir.train.layout import RunDir

STATE_FILE = "trainer_state.pt"
_NAME = re.compile(r"^step-(\d{8})$")


def checkpoint_dir(run: RunDir, step: int) -> Path:
    return run.checkpoints / f"step-{step:08d}"


def step_of(path: str | Path) -> int:
    """The step a checkpoint folder was saved at."""
    match = _NAME.match(Path(path).name)
    if not match:
        raise ValueError(f"{path}: not a checkpoint folder name (step-NNNNNNNN)")
    return int(match.group(1))


def list_checkpoints(run: RunDir) -> list[Path]:
    """Complete checkpoint folders, oldest first."""
    if not run.checkpoints.is_dir():
        return []
    found = [p for p in run.checkpoints.iterdir() if _NAME.match(p.name) and (p / STATE_FILE).is_file()]
    return sorted(found, key=step_of)


def latest_checkpoint(run: RunDir) -> Path | None:
    found = list_checkpoints(run)
    return found[-1] if found else None


def save_checkpoint(run: RunDir, step: int, model: Any, state: dict[str, Any]) -> Path:
    """Write the model (any kind: ``save_pretrained``) and ``state`` as ``checkpoints/step-NNNNNNNN``
    atomically; return the folder."""
    folder = checkpoint_dir(run, step)
    with atomic_directory(folder) as tmp:
        model.save_pretrained(tmp)
        torch.save(state, tmp / STATE_FILE)
    return folder


def load_trainer_state(folder: Path) -> dict[str, Any]:
    try:
        return torch.load(folder / STATE_FILE, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError) as e:  # a truncated or foreign file
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise InputError(folder / STATE_FILE, f"unreadable trainer state ({reason})") from None


def prune_checkpoints(run: RunDir, keep: int) -> None:
    """Delete all but the newest ``keep`` checkpoints (``keep`` 0 keeps everything). Each is renamed out of the
    listing first (``.step-N.pruned``, which :func:`remove_partial` also clears), so that a reader, the inferencer
    loading an older checkpoint, never finds one half deleted."""
    if keep > 0:
        for folder in list_checkpoints(run)[:-keep]:
            hidden = folder.with_name(f".{folder.name}.pruned")
            folder.rename(hidden)
            shutil.rmtree(hidden, ignore_errors=True)


def remove_partial(run: RunDir) -> None:
    """Delete the temporaries a killed trainer or inferencer left: half-saved checkpoints in ``checkpoints/``, and
    half-written vectors, indexes, records and negatives in ``refresh/`` and ``negatives/`` (``.NAME.*.tmp``)."""
    if run.checkpoints.is_dir():
        for leftover in run.checkpoints.glob(".*"):
            shutil.rmtree(leftover, ignore_errors=True)
    for folder in (run.refresh, run.negatives):
        for leftover in folder.glob(".*.tmp") if folder.is_dir() else ():
            shutil.rmtree(leftover, ignore_errors=True) if leftover.is_dir() else leftover.unlink(missing_ok=True)


def resolve_init(spec: str) -> str:
    """``init_from``: a run folder means its model (``final/``, else its newest checkpoint), as everywhere;
    anything else is a model dir or name."""
    require_local_model(spec, "model.init_from (--init-from)")
    try:
        model = run_model_dir(Path(spec))
    except ModelNotAvailableError as e:
        raise InputError(spec, "run folder has no complete checkpoint to start from") from e
    return str(model) if model is not None else spec


def capture_rng() -> dict[str, Any]:
    """This process's Python, NumPy and torch (CPU and CUDA) random states, as plain values and tensors."""
    kind, key, pos, has_gauss, gauss = np.random.get_state()
    return {"python": random.getstate(), "numpy": [kind, key.tolist(), pos, has_gauss, gauss],
            "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else []}  # unused CUDA: none


def restore_rng(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    kind, key, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((kind, np.array(key, dtype=np.uint32), pos, has_gauss, gauss))
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():  # resumed with fewer GPUs: theirs (the first ones)
        for index, cuda_state in enumerate(state["cuda"][:torch.cuda.device_count()]):
            torch.cuda.set_rng_state(cuda_state, index)
