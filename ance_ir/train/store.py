"""What refreshes publish: versioned negatives (``negatives/``), one metrics record per checkpoint
(``refresh/``), and the inferencer's status and stop files.

All are written to a temporary name and renamed, and readers list only final names, so nothing
half-written is ever read, even while another process publishes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ance_ir.data import InputError, TrainingGroup, atomic_write, read_groups, write_groups
from ance_ir.train.layout import RunDir

_VERSION = re.compile(r"^v-(\d{8})\.jsonl\.gz$")
_RECORD = re.compile(r"^step-(\d{8})\.json$")
_VECTORS = re.compile(r"^vectors-(\d{8})\.npz$")
_ENCODING = re.compile(r"^encoding-(\d{8})$")


def _numbered(folder: Path, pattern: re.Pattern[str]) -> list[int]:
    if not folder.is_dir():
        return []
    return sorted(int(m.group(1)) for p in folder.iterdir() if (m := pattern.match(p.name)))


class NegativesStore:
    """Training groups (query, positives, scored negatives best first) published under a version: the checkpoint
    step they came from. Each version is a Tevatron-style JSONL file (:mod:`ance_ir.data.groups`)."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)

    def path(self, version: int) -> Path:
        return self.folder / f"v-{version:08d}.jsonl.gz"

    def publish(self, version: int, groups: list[TrainingGroup]) -> Path:
        """Write a version atomically (replacing an identical re-publication)."""
        path = self.path(version)
        write_groups(path, groups)
        return path

    def versions(self) -> list[int]:
        return _numbered(self.folder, _VERSION)

    def latest(self) -> int | None:
        versions = self.versions()
        return versions[-1] if versions else None

    def load(self, version: int) -> dict[str, list[str]]:
        """The negatives of a version, ``{qid: [docid, ...best first]}``."""
        path = self.path(version)
        if not path.is_file():
            raise InputError(path, f"negatives version {version} was never published (or was deleted)")
        try:
            return {g.query_id: [p.docid for p in g.negatives] for g in read_groups(path)}
        except (OSError, EOFError) as e:
            raise InputError(path, f"unreadable negatives ({e})") from None


class VectorStore:
    """The corpus vectors of each partial refresh and the checkpoint step that encoded each row
    (``refresh/vectors-STEP.npz``): what the next partial refresh keeps for the passages it does not re-encode.

    A refresh of step N reads the newest store of a step before N, so a refresh redone after an interruption
    (its store written, its record not yet) starts from the same vectors; saving keeps only the new store and the
    one before it."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)

    def path(self, step: int) -> Path:
        return self.folder / f"vectors-{step:08d}.npz"

    def steps(self) -> list[int]:
        return _numbered(self.folder, _VECTORS)

    def load(self, rows: int, before: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The vectors and steps of the newest store before step ``before``, or None when there is none for a
        corpus of ``rows`` passages."""
        earlier = [s for s in self.steps() if s < before]
        if not earlier:
            return None
        with np.load(self.path(earlier[-1])) as stored:
            vectors, steps = stored["vectors"], stored["steps"]
        return (vectors, steps) if len(vectors) == len(steps) == rows else None

    def save(self, step: int, vectors: np.ndarray, steps: np.ndarray) -> None:
        with atomic_write(self.path(step), "wb") as f:
            np.savez(f, vectors=vectors, steps=steps)
        earlier = [s for s in self.steps() if s < step]
        for old in earlier[:-1]:
            self.path(old).unlink(missing_ok=True)


class EncodingWork:
    """The passages an unfinished refresh has encoded so far, kept part by part in ``refresh/encoding-STEP/`` with
    the settings they were encoded with (:class:`~ance_ir.data.resume.ChunkedJob`), so that a refresh redone after a
    crash, a kill or a preemption encodes only the rest. A refresh removes its own folder, any older one and those of
    checkpoints gone (pruned), once its record is written."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)

    def path(self, step: int) -> Path:
        return self.folder / f"encoding-{step:08d}"

    def steps(self) -> list[int]:
        """Steps whose refresh left encoded parts."""
        return _numbered(self.folder, _ENCODING)

    def remove(self, which: Callable[[int], bool]) -> None:
        """Remove the parts of the refreshes of the steps ``which`` is true of."""
        for step in self.steps():
            if which(step):
                shutil.rmtree(self.path(step), ignore_errors=True)


class RefreshRecords:
    """One JSON record per refreshed checkpoint: step, eval metrics, timings (``refresh/step-N.json``)."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)

    def write(self, record: dict[str, Any]) -> Path:
        path = self.folder / f"step-{record['step']:08d}.json"
        with atomic_write(path) as f:
            f.write(json.dumps(record, indent=2) + "\n")
        return path

    def steps(self) -> list[int]:
        """Steps of the checkpoints refreshed so far."""
        return _numbered(self.folder, _RECORD)

    def read_all(self) -> list[dict[str, Any]]:
        """Every record, by step."""
        records = []
        for step in self.steps():
            path = self.folder / f"step-{step:08d}.json"
            try:
                records.append(json.loads(path.read_text(encoding="utf-8")))
            except json.JSONDecodeError as e:
                raise InputError(path, f"not valid JSON ({e.msg})", e.lineno) from None
        return records


def write_status(run: RunDir, state: str, step: int | None = None, since: float | None = None,
                 **progress: int) -> None:
    """The inferencer's status: its ``state`` (of checkpoint ``step``) since ``since`` (default now), and how far it
    is (``progress``: a refresh's ``encoded`` of its ``passages``)."""
    with atomic_write(run.inferencer_status) as f:
        json.dump({"state": state, "step": step, "pid": os.getpid(), "since": round(since or time.time(), 3),
                   **progress}, f)


def read_status(run: RunDir) -> dict[str, Any] | None:
    """The inferencer's last status, or None before it wrote one."""
    try:
        return json.loads(run.inferencer_status.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


def read_stop(run: RunDir) -> str | None:
    """``drain`` or ``now`` once the trainer asked the inferencer to stop."""
    try:
        return run.inferencer_stop.read_text(encoding="utf-8").strip() or "now"
    except OSError:
        return None


def request_stop(run: RunDir, mode: str) -> None:
    """Ask the inferencer to stop: ``drain`` (after refreshing the newest checkpoint) or ``now``."""
    with atomic_write(run.inferencer_stop) as f:
        f.write(mode)
