"""The model an index's ``meta.json`` records (``encoder``, ``kind``, ``encoder_config``), checked for its types; and
what identifies an index folder's contents, for a resume to check."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ance_ir.data import InputError, sha256_file
from ance_ir.data.lines import read_json_object

META_FILE = "meta.json"  # an index folder's record: its model, corpus and settings
T = TypeVar("T")

#: each recorded field, the type it must have, and how an error names it
MODEL_FIELDS = (("encoder", str, "a string"), ("kind", str, "a string"),
                ("encoder_config", dict, "a JSON object of the encoder's settings"))


def check_model_record(path: str | Path, meta: dict[str, Any]) -> None:
    """InputError naming ``path`` (the ``meta.json``) for a recorded model field of the wrong type."""
    for key, kind, what in MODEL_FIELDS:
        if key in meta and not isinstance(meta[key], kind):
            raise InputError(path, f"{key} must be {what}, got {meta[key]!r}")


def recorded_encoder_settings(meta: dict[str, Any]) -> dict[str, Any]:
    """The encoder settings a dense index's ``meta.json`` records: its ``encoder_config`` over the top-level
    ``pooling`` and ``normalize`` (all an index records of them where it has no ``encoder_config``)."""
    return {**{k: meta[k] for k in ("pooling", "normalize") if k in meta}, **meta.get("encoder_config", {})}


def recorded_model(folder: str | Path, load: Callable[[], T]) -> T:
    """``load()`` of the model an index's ``meta.json`` names, with the settings it records: what is wrong with them
    (a setting out of range, a model of another kind, one that cannot be found) as an InputError naming that file."""
    try:
        return load()
    except InputError:
        raise
    except ValueError as e:
        raise InputError(Path(folder) / META_FILE, str(e)) from None


def index_record(folder: str | Path) -> dict[str, Any] | None:
    """A folder's ``meta.json``, or None where it has none that reads as a JSON object (what tells index kinds
    apart; loading an index reports what is wrong with its record)."""
    try:
        return read_json_object(Path(folder) / META_FILE)
    except (InputError, OSError):
        return None


def folder_bytes(folder: str | Path) -> int:
    """Bytes on disk of the files under ``folder`` (an index's size)."""
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())


def index_identity(folder: Path) -> dict[str, Any]:
    """What tells an index folder encoded again in place from the one it was: its ``meta.json``'s sha256, or for a
    folder without one (a Pyserini-built dense index) its files' sizes and modification times."""
    meta = folder / META_FILE
    if meta.is_file():
        return {"index_meta_sha256": sha256_file(meta)}
    return {"index_files": {p.name: [p.stat().st_size, p.stat().st_mtime_ns] for p in sorted(folder.iterdir())
                            if p.is_file()}}
