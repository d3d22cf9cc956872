"""Atomic writes: build output under a temporary name, rename it into place only on success."""

from __future__ import annotations

import gzip
import io
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def atomic_write(path: str | Path, mode: str = "w") -> Iterator[IO]:
    """Open a temporary file beside ``path``; rename it to ``path`` when the block exits cleanly.

    On any exception the temporary file is removed and ``path`` is left untouched. A ``.gz`` suffix
    writes gzip with an empty name and zero mtime in its header, so the same content gives the same bytes.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    os.chmod(tmp, 0o666 & ~_umask())
    try:
        with open(tmp, "wb") as raw, _open_layers(raw, path.suffix == ".gz", "b" in mode) as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
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
def atomic_directory(path: str | Path, overwrite: bool = True) -> Iterator[Path]:
    """Yield a temporary directory beside ``path``; move it to ``path`` when the block exits cleanly."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    os.chmod(tmp, 0o777 & ~_umask())
    try:
        yield tmp
        if path.exists():
            if not overwrite:
                raise FileExistsError(f"{path}: already exists")
            old = path.with_name(f".{path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
