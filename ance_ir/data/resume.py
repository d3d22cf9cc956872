"""Resumable chunked jobs (encode, impact encode, doc2query expansion, the negatives' candidate retrieval,
rerank's pair scoring).

A job writing ``OUTPUT`` keeps each finished chunk in a work folder beside it, ``OUTPUT.partial``, with
``job.json``: the settings that decide the output. A rerun reuses the finished chunks only when its settings are
the same (the corpus path may change, its hash may not); the work folder goes once the output is written (a
training run keeps its samplers' rankings in ``RUN/candidates`` for good).
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import islice
from pathlib import Path
from types import TracebackType
from typing import Any, Generic, TypeVar

from tqdm import tqdm

from ance_ir.data.atomic import atomic_write, remove_stale_temporaries
from ance_ir.data.errors import InputError
from ance_ir.data.lines import read_json_object

JOB_FILE = "job.json"
#: seconds before the bar of a step that is often quick (building an index) shows: a quick step, or an input
#: refused at once, prints none
BAR_DELAY_S = 10.0
T = TypeVar("T")
R = TypeVar("R")


def say(message: str) -> None:
    """``message`` as a line on stderr that leaves a progress bar there intact."""
    tqdm.write(message, file=sys.stderr)


def slow_bar(iterable: Iterable[T] | None = None, *, desc: str, unit: str, show: bool,
             total: int | None = None) -> tqdm:
    """A bar on stderr (with ``show``) for a step that is often quick (reading a corpus, building an index): it
    appears once the step has taken ``BAR_DELAY_S``."""
    return tqdm(iterable, total=total, desc=desc, unit=unit, disable=not show, delay=BAR_DELAY_S, file=sys.stderr)


def work_folder(output: str | Path) -> Path:
    """Where the finished chunks of a run writing ``output`` are kept: ``OUTPUT.partial``."""
    output = Path(output)
    return output.with_name(output.name + ".partial")


def in_chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """``items`` in lists of ``size`` (the last one shorter)."""
    items = iter(items)
    while chunk := list(islice(items, size)):
        yield chunk


class UnreadableChunk(InputError):
    """A chunk kept in a work folder that cannot be read back (a crash before its data reached the disk): the
    folder is left for the user to delete, as the error says."""


class StopChunks(Exception):
    """Raised by a chunked job's ``compute`` to stop before that chunk, keeping those done (``expand``'s
    ``stop_after``)."""


class ChunkedJob(Generic[T, R]):
    """The loop of a chunked job over its work folder ``work``: a chunk kept there is reused, any other one is
    computed and kept (after ``job.json``), with a bar (``desc``, one ``bar_unit`` an item) over ``total`` items
    (``unit``: passages, queries) and a count of those reused.

    ``load(number, items)`` gives chunk ``number``'s kept result, or a mark that it is finished (True, a count) when
    the job reads its chunks back later (None: not finished); ``compute(items)`` gives a new result and ``save(number,
    items, result)`` keeps it (atomically). As a context manager around the loop: the first reused chunk is
    announced, a job that finished or stopped (:class:`StopChunks`) after reusing any says how many, and a Ctrl-C
    inside says what ``work`` keeps and how to go on.
    """

    def __init__(self, work: Path, job: dict[str, Any], total: int, desc: str, *,
                 load: Callable[[int, list[T]], R | None], compute: Callable[[list[T]], R],
                 save: Callable[[int, list[T], R], None], verb: str = "encoded", unit: str = "passages",
                 bar_unit: str = "passage", show_progress: bool = True):
        self.work, self.job, self.total, self.verb, self.unit = work, job, total, verb, unit
        self.load, self.compute, self.save = load, compute, save
        self.bar = tqdm(total=total, unit=bar_unit, desc=desc, disable=not show_progress, file=sys.stderr)
        self.done = self.reused = 0

    def chunk(self, number: int, items: list[T]) -> R:
        """Chunk ``number`` of the job, ``items``: its kept result, else a new one, kept before it is returned;
        :class:`UnreadableChunk` naming ``work`` for a kept chunk that cannot be read back."""
        try:
            result = self.load(number, items)
        except InputError:
            raise
        except (OSError, ValueError, EOFError) as error:  # numpy's and json's errors for a file cut short
            raise UnreadableChunk(self.work, f"chunk {number} kept here cannot be read ({error}); delete {self.work} "
                                             "to start over") from error
        if result is None:
            result = self.compute(items)
            _record_job(self.work, self.job)
            self.save(number, items, result)
        else:
            if not self.reused:
                say(f"resuming from the chunks {self.verb} in {self.work}")
            self.reused += len(items)
        self.done += len(items)
        self.bar.update(len(items))
        return result

    def __enter__(self) -> ChunkedJob[T, R]:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.bar.close()
        if (kind is None or issubclass(kind, StopChunks)) and self.reused:
            print(f"reused {self.reused} of {self.total} {self.unit} already {self.verb} in {self.work}",
                  file=sys.stderr)
        elif kind is not None and issubclass(kind, KeyboardInterrupt) and not str(error):
            kept = (f"{self.done} of {self.total} {self.unit} {self.verb} are kept in {self.work}; rerun the same "
                    "command to resume" if self.done else f"no chunk of the {self.total} {self.unit} was finished")
            raise type(error)(f"interrupted: {kept}") from None


@contextmanager
def kept_on_interrupt(work: Path, phase: str, after: Callable[[], bool] = lambda: True) -> Iterator[None]:
    """The phase after a chunked job's chunks (``phase``: building the index from them): a Ctrl-C or SIGTERM there
    says that the finished chunks are kept in ``work`` and that a rerun goes on from them. ``after()`` tells whether
    the chunks were all finished when the interrupt came, for a block that makes them too."""
    try:
        yield
    except KeyboardInterrupt as error:
        if str(error) or not after():  # already says what it left, or came before the chunks were all made
            raise
        raise type(error)(f"interrupted while {phase}: every chunk is finished and kept in {work}; rerun the same "
                          "command to go on from them") from None


def _record_job(work: Path, job: dict[str, Any]) -> None:
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
        recorded = read_json_object(path)
    except (InputError, OSError) as e:
        reason = e.reason if isinstance(e, InputError) else e.strerror or e
        raise InputError(path, f"unreadable resume record ({reason}); delete {work} to start over") from None
    for key, value in job.items():  # a key the record lacks was not recorded then (an older version): not checked
        if key != "corpus" and key in recorded and recorded[key] != value:
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


def recorded_job(work: Path) -> dict[str, Any] | None:
    """The settings the chunks kept in ``work`` record (``job.json``); None when there are none or they cannot be
    read."""
    try:
        return read_json_object(work / JOB_FILE)
    except (InputError, OSError):
        return None


def restart_changed_work(work: Path, job: dict[str, Any], dropped: str) -> None:
    """Before a job that writes no user's output (a training run's refresh, its samplers' rankings) starts or
    resumes: drop the chunks in ``work`` when they were made with other settings than ``job`` (they are only made
    again), saying the line ``dropped``; else remove the temporaries a killed run left among them."""
    if not work.is_dir():
        return
    if recorded_job(work) == job:
        _remove_stale([], work)
        return
    shutil.rmtree(work)
    print(dropped, file=sys.stderr)


def open_work(outputs: Sequence[Path], work: Path, job: dict[str, Any], what: str = "job") -> None:
    """Before a run starts or resumes: refuse an unfinished ``what`` in ``work`` whose settings differ from ``job``
    (touching nothing), then remove the temporaries a killed run left beside ``outputs`` and in ``work``."""
    if work.exists() and not work.is_dir():
        raise InputError(work, f"is a file where the {what}'s resume folder goes; move it away")
    if work.is_dir():
        _check_job(work, job, what)
    _remove_stale(outputs, work)
