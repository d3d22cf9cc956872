"""The one error type for bad input files."""

from __future__ import annotations

from pathlib import Path


class InputError(ValueError):
    """Bad or missing input, reported as ``PATH:LINE: message`` (or ``PATH: message``)."""

    def __init__(self, path: str | Path, message: str, line: int | None = None):
        self.path = str(path)
        self.line = line
        self.reason = message
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {message}")


def require_file(path: str | Path) -> Path:
    """Return ``path`` as a Path, raising :class:`InputError` if it is not an existing, non-empty file."""
    path = Path(path)
    if not path.exists():
        raise InputError(path, "no such file")
    if not path.is_file():
        raise InputError(path, "not a file")
    if path.stat().st_size == 0:
        raise InputError(path, "file is empty")
    return path
