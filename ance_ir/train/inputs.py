"""The files a training run's settings name (corpus, topics, qrels, groups, a first-stage run, ...), fingerprinted
when the run starts (``OUTPUT/inputs.json``) so that a resume reads the same data: a file edited or regenerated in
between would otherwise mix two datasets in one run silently. Dataset names (``rag24-mini``) and folders (indexes,
models: a resume restores its weights from the checkpoint) are not fingerprinted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from ance_ir.data import InputError, atomic_write, sha256_file

if TYPE_CHECKING:
    from ance_ir.train.arguments import TrainConfig


def named_paths(config: TrainConfig) -> list[Path]:
    """Every path the settings name that exists (a file or a folder), lists of them included."""
    values = [x for v in config.flat().values() for x in (v if isinstance(v, list) else [v])]
    return [Path(v) for v in values if isinstance(v, str) and v and Path(v).exists()]


def input_files(config: TrainConfig) -> list[Path]:
    """The files the settings name, in settings order, each once."""
    return list(dict.fromkeys(p for p in named_paths(config) if p.is_file()))


def fingerprints(config: TrainConfig) -> dict[str, str]:
    """Each input file's path (as the settings give it) -> the sha256 of its bytes."""
    return {str(path): sha256_file(path) for path in input_files(config)}


def record_inputs(config: TrainConfig, path: Path) -> None:
    """Write the fingerprints of ``config``'s input files to ``path`` (``inputs.json``), atomically."""
    with atomic_write(path) as f:
        f.write(json.dumps(fingerprints(config), indent=2) + "\n")


def check_inputs(config: TrainConfig, path: Path) -> None:
    """InputError naming the first file recorded in ``path`` that is gone or whose bytes changed since the run
    started; then the record is brought up to date with any file a changed (resumable) setting names now."""
    recorded = json.loads(path.read_text(encoding="utf-8"))
    for name, digest in recorded.items():
        if not Path(name).is_file():
            raise InputError(name, "this run started from it and it is gone; a resume reads the data the run "
                                   "started with (restore it, or train into a new output folder)")
        if (current := sha256_file(name)) != digest:
            raise InputError(name, f"changed since this run started (sha256 {digest[:12]}..., now {current[:12]}...); "
                                   "a resume reads the data the run started with (restore it, or train into a new "
                                   "output folder)")
    if added := [p for p in input_files(config) if str(p) not in recorded]:  # each file hashed once
        with atomic_write(path) as f:
            f.write(json.dumps({**recorded, **{str(p): sha256_file(p) for p in added}}, indent=2) + "\n")
