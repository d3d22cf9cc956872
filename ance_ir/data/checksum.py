"""File checksums, used to tie indexes and datasets to the exact bytes they came from."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def sha256_file(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def sha256_json(value: Any) -> str:
    """Hex SHA-256 of ``value``'s JSON text (``json.dumps`` with non-ASCII kept), as recorded by resumable jobs."""
    return hashlib.sha256(json.dumps(value, ensure_ascii=False).encode("utf-8")).hexdigest()


def sha256_json_items(values: Iterable[Any]) -> str:
    """Hex SHA-256 of each of ``values``' JSON text in turn, one line each: a long sequence (a rerank's pairs)
    hashed without its whole text in memory."""
    digest = hashlib.sha256()
    for value in values:
        digest.update(json.dumps(value, ensure_ascii=False).encode("utf-8") + b"\n")
    return digest.hexdigest()
