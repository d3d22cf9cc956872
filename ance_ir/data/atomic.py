"""Atomic writes: build output under a temporary name, rename it into place only on success.

Temporaries are named ``.NAME.*.tmp`` beside the output ``NAME``; a job that can run long takes
:func:`output_lock` on its output and, holding it, removes the temporaries a killed run left
(:func:`remove_stale_temporaries`).
"""

from __future__ import annotations

import fcntl
import glob
import gzip
import io
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TypeVar

from ance_ir.data.errors import InputError

T = TypeVar("T")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _missing_folders(path: Path) -> list[Path]:
    """The folders above ``path`` that do not exist yet, deepest first (what writing it would create)."""
    return [p for p in Path(os.path.abspath(path)).parents if not p.exists()]


def _remove_empty(folders: list[Path]) -> None:
    """Remove ``folders`` (deepest first) that a failed write created, as long as they are empty."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:  # not empty: something else is in it
            break


def _beside(path: Path, make: Callable[[], T]) -> T:
    """``make()`` a temporary or lock file beside ``path`` (its parent folders first); an OSError of ``make`` names
    ``path``, the output the caller asked for, not the hidden name beside it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        return make()
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(path)) from None


@contextmanager
def atomic_write(path: str | Path, mode: str = "w") -> Iterator[IO]:
    """Open a temporary file beside ``path``; rename it to ``path`` when the block exits cleanly.

    On any exception the temporary file is removed and ``path`` is left untouched. A ``.gz`` suffix
    writes gzip with an empty name and zero mtime in its header, so the same content gives the same bytes.
    """
    path = Path(path)
    created = _missing_folders(path)
    fd, tmp = _beside(path, lambda: tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    os.close(fd)
    os.chmod(tmp, 0o666 & ~_umask())
    try:
        with open(tmp, "wb") as raw, _open_layers(raw, path.suffix == ".gz", "b" in mode) as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        _remove_empty(created)
        raise


@contextmanager
def _open_layers(raw: IO[bytes], gzipped: bool, binary: bool) -> Iterator[IO]:
    """Stack reproducible gzip (header without name or time) and UTF-8 text layers over ``raw``."""
    stream: IO = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) if gzipped else raw
    if not binary:
        stream = io.TextIOWrapper(stream, encoding="utf-8", newline="\n")
    try:
        yield stream
    finally:
        if stream is not raw:
            stream.close()


@contextmanager
def atomic_directory(path: str | Path) -> Iterator[Path]:
    """Yield a temporary directory beside ``path``; move it to ``path`` when the block exits cleanly (replacing
    what is there)."""
    path = Path(path)
    created = _missing_folders(path)
    tmp = Path(_beside(path, lambda: tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)))
    os.chmod(tmp, 0o777 & ~_umask())
    try:
        yield tmp
        if path.exists():
            old = path.with_name(f".{path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        _remove_empty(created)
        raise


@contextmanager
def output_lock(path: str | Path) -> Iterator[Path]:
    """Hold an exclusive lock on the output ``path`` for the block (``.NAME.lock`` beside it, removed after).

    Raises :class:`InputError` at once when another process holds it: two writers never share an output.
    Parent folders it had to create are removed again if the block leaves them empty.
    """
    path = Path(os.path.abspath(path))  # "." and ".." name no folder to put a lock file beside
    created = _missing_folders(path)
    lock = path.with_name(f".{path.name}.lock")
    while True:
        fd = _beside(path, lambda: os.open(lock, os.O_RDWR | os.O_CREAT, 0o666 & ~_umask()))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise InputError(path, f"another process (pid {holder}) is writing this output (it holds {lock}); "
                                   "wait for it to finish or choose another output") from None
        try:  # the previous holder may have removed the file between our open and flock: take the new one
            current = os.stat(lock).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            current = False
        if current:
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield lock
    finally:
        lock.unlink(missing_ok=True)
        os.close(fd)
        _remove_empty(created)


def remove_stale_temporaries(path: str | Path) -> list[Path]:
    """Remove the ``.NAME.*.tmp`` and ``.NAME.old`` left beside ``path`` by a killed run; call under
    :func:`output_lock`. Returns what was removed."""
    path = Path(path)
    if not path.parent.is_dir():
        return []
    stale = [*path.parent.glob(f".{glob.escape(path.name)}.*.tmp"), path.with_name(f".{path.name}.old")]
    removed = []
    for p in stale:
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        elif p.exists():
            p.unlink(missing_ok=True)
        else:
            continue
        removed.append(p)
    return removed
