"""Line-oriented reading shared by every text format (plain or gzip)."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path

from ance_ir.data.errors import InputError, require_file


def iter_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` for the non-blank lines of a text file, line ends stripped.

    Raises :class:`InputError` for a missing or empty file, undecodable bytes, or no content lines.
    """
    path = require_file(path)
    opener = gzip.open if path.suffix == ".gz" else open
    seen = False
    with opener(path, "rt", encoding="utf-8", newline="") as f:
        lineno = 0
        try:
            for lineno, raw in enumerate(f, start=1):
                line = raw.rstrip("\r\n")
                if line.strip():
                    seen = True
                    yield lineno, line
        except UnicodeDecodeError as e:
            raise InputError(path, f"not UTF-8 text ({e.reason})", lineno + 1) from None
    if not seen:
        raise InputError(path, "file has no content lines")


def split_columns(path: str | Path, lineno: int, line: str, sep: str | None, expected: tuple[int, ...]) -> list[str]:
    """Split ``line`` and check its column count is one of ``expected``."""
    cols = line.split(sep)
    if len(cols) not in expected:
        want = " or ".join(str(n) for n in expected)
        raise InputError(path, f"expected {want} columns, found {len(cols)}", lineno)
    return cols
