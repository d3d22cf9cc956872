"""Resumable chunked jobs (encode, impact encode, doc2query expansion, the negatives' candidate retrieval,
rerank's pair scoring).

A job writing ``OUTPUT`` keeps each finished chunk in a work folder beside it, ``OUTPUT.partial``, with
``job.json``: the settings that decide the output. A rerun reuses the finished chunks only when its settings are
the same (the corpus path may change, its hash may not); the work folder goes once the output is written.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from tqdm import tqdm

from ance_ir.data.atomic import atomic_write, remove_stale_temporaries
from ance_ir.data.errors import InputError

JOB_FILE = "job.json"
T = TypeVar("T")


def work_folder(output: str | Path) -> Path:
    """Where the finished chunks of a run writing ``output`` are kept: ``OUTPUT.partial``."""
    output = Path(output)
    return output.with_name(output.name + ".partial")


def in_chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """``items`` in lists of ``size`` (the last one shorter)."""
    items = iter(items)
    while chunk := list(islice(items, size)):
        yield chunk


class ChunkTally:
    """The items (``unit``: passages, queries) of a chunked job finished so far, and those reused from an earlier
    run's ``work`` folder.

    As a context manager around the job's loop: the first reused chunk is announced, a finished job that reused
    any says how many, and a Ctrl-C inside says what ``work`` keeps and how to go on.
    """

    def __init__(self, work: Path, total: int, verb: str = "encoded", unit: str = "passages"):
        self.work, self.total, self.verb, self.unit = work, total, verb, unit
        self.done = self.reused = 0

    def finished(self, count: int) -> None:
        self.done += count

    def reuse(self, count: int) -> None:
        if not self.reused:
            tqdm.write(f"resuming from the chunks {self.verb} in {self.work}", file=sys.stderr)
        self.reused += count
        self.done += count

    def __enter__(self) -> ChunkTally:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if kind is None and self.reused:
            print(f"reused {self.reused} of {self.total} {self.unit} already {self.verb} in {self.work}",
                  file=sys.stderr)
        elif kind is not None and issubclass(kind, KeyboardInterrupt) and not str(error):
            kept = (f"{self.done} of {self.total} {self.unit} {self.verb} are kept in {self.work}; rerun the same "
                    "command to resume" if self.done else f"no chunk of the {self.total} {self.unit} was finished")
            raise type(error)(f"interrupted: {kept}") from None


def record_job(work: Path, job: dict[str, Any]) -> None:
    """Write ``job.json`` into ``work`` (created if needed) unless it is there already."""
    path = work / JOB_FILE
    if not path.is_file():
        with atomic_write(path) as f:
            f.write(json.dumps(job, indent=2) + "\n")


def _check_job(work: Path, job: dict[str, Any], what: str) -> None:
    """Refuse to resume the unfinished ``what`` in ``work`` when a setting of ``job`` other than the corpus path
    differs from its record."""
    path = work / JOB_FILE
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise InputError(path, f"unreadable resume record ({e}); delete {work} to start over") from None
    for key, value in job.items():
        if key != "corpus" and recorded.get(key) != value:
            raise InputError(work, f"holds an unfinished {what} with a different {key} ({recorded.get(key)!r}, "
                                   f"now {value!r}); delete it or choose another --output")


def _remove_stale(outputs: Sequence[Path], work: Path) -> None:
    """Remove the temporaries a killed run left beside ``outputs`` and among the finished chunks in ``work``."""
    stale = [p for output in outputs for p in remove_stale_temporaries(output)]
    if work.is_dir():
        for p in work.glob(".*.tmp"):
            p.unlink(missing_ok=True)
            stale.append(p)
    if stale:
        print(f"removed {len(stale)} temporary files left by an interrupted run", file=sys.stderr)


def open_work(outputs: Sequence[Path], work: Path, job: dict[str, Any], what: str = "job") -> None:
    """Before a run starts or resumes: refuse an unfinished ``what`` in ``work`` whose settings differ from ``job``
    (touching nothing), then remove the temporaries a killed run left beside ``outputs`` and in ``work``."""
    if work.is_dir():
        _check_job(work, job, what)
    _remove_stale(outputs, work)
