"""Line-oriented reading shared by every text format (plain or gzip)."""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections.abc import Iterator
from pathlib import Path

from ance_ir.data.errors import InputError, require_file

BOM = "\ufeff"


def not_utf8(path: str | Path, error: UnicodeDecodeError, lineno: int, column: int) -> InputError:
    """The error for a byte that is not UTF-8 at byte ``column`` (from 1) of line ``lineno``."""
    return InputError(path, f"not UTF-8 text ({error.reason} at byte {column} of the line)", lineno)


def decode_line(path: str | Path, lineno: int, raw: bytes) -> str:
    """One line's bytes as text; :func:`not_utf8`'s error for a byte that is not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise not_utf8(path, e, lineno, e.start + 1) from None


def iter_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` for the non-blank lines of a text file, line ends stripped.

    Lines are decoded one by one, so a byte that is not UTF-8 is reported on its own line. A UTF-8
    byte-order mark at the start of the file is dropped (it would otherwise become part of the first id).
    Raises :class:`InputError` for a missing or empty file, undecodable bytes, a broken gzip stream, or no
    content lines.
    """
    path = require_file(path)
    opener = gzip.open if path.suffix == ".gz" else open
    seen = False
    lineno = 0
    try:
        with opener(path, "rb") as f:
            for lineno, raw in enumerate(f, start=1):
                line = decode_line(path, lineno, raw).rstrip("\r\n")
                if lineno == 1:
                    line = line.removeprefix(BOM)
                if line.strip():
                    seen = True
                    yield lineno, line
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise InputError(path, f"broken gzip file ({e or type(e).__name__})", lineno + 1) from None
    if not seen:
        raise InputError(path, "file has no content lines")


def read_text(path: str | Path) -> str:
    """A whole (small) file as UTF-8 text, less a leading byte order mark; InputError naming the file and the line
    of a byte that is not UTF-8."""
    raw = Path(path).read_bytes()
    try:
        return raw.decode("utf-8").removeprefix(BOM)
    except UnicodeDecodeError as e:
        raise not_utf8(path, e, raw.count(b"\n", 0, e.start) + 1, e.start - raw.rfind(b"\n", 0, e.start)) from None


def read_json_object(path: str | Path) -> dict:
    """A whole file (a record such as ``meta.json``) parsed as one JSON object; InputError naming the file (and
    the line of a syntax error)."""
    try:
        obj = json.loads(read_text(path))
    except json.JSONDecodeError as e:
        raise InputError(path, f"not valid JSON ({e.msg})", e.lineno) from None
    except RecursionError:
        raise InputError(path, "not valid JSON (nested too deeply)") from None
    if not isinstance(obj, dict):
        raise InputError(path, "expected a JSON object")
    return obj


#: a JSON escape of a UTF-16 surrogate (``\ud800``-``\udfff``): text only in a high-low pair
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def json_object(path: str | Path, lineno: int, line: str) -> dict:
    """``line`` parsed as a JSON object; InputError for malformed JSON, nesting too deep to parse, or a lone
    surrogate escape (a string that is not text: no tokenizer or UTF-8 file can hold it)."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise InputError(path, f"malformed JSON ({e.msg})", lineno) from None
    except RecursionError:
        raise InputError(path, "malformed JSON (nested too deeply)", lineno) from None
    if not isinstance(obj, dict):
        raise InputError(path, "expected a JSON object", lineno)
    if SURROGATE_ESCAPE.search(line):
        try:
            json.dumps(obj, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as e:
            raise InputError(path, f"a lone surrogate escape (\\u{ord(e.object[e.start]):04x}) is not text",
                             lineno) from None
    return obj


def split_columns(path: str | Path, lineno: int, line: str, sep: str | None, expected: tuple[int, ...]) -> list[str]:
    """Split ``line`` and check its column count is one of ``expected``."""
    cols = line.split(sep)
    if len(cols) not in expected:
        want = " or ".join(str(n) for n in expected)
        raise InputError(path, f"expected {want} columns, found {len(cols)}", lineno)
    return cols


def check_id(path: str | Path, lineno: int, kind: str, value: str) -> str:
    """``value`` as an id: non-empty and without whitespace (TREC runs and qrels are whitespace-separated)."""
    if not value:
        raise InputError(path, f"empty {kind}", lineno)
    if any(c.isspace() for c in value):
        raise InputError(path, f"{kind} {value!r} contains whitespace (TREC run and qrels files could not hold it)",
                         lineno)
    return value
