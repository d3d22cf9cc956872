"""Lucene impact indexes of learned sparse term weights (a ``splade`` model's), built by Pyserini.

An impact index folder holds ``meta.json`` (encoder, kind, settings, corpus hash, the quantisation ``scale``, counts),
``collection/`` (the passages in Pyserini's ``JsonVectorCollection`` format: one JSON object a line,
``{"id", "contents", "vector": {term: integer impact}}``) and ``lucene/``, the index Pyserini's Java indexer builds
from it (``-impact -pretokenized``: a term's impact is stored as its frequency, so a query of integer weights scores
``sum_t q_t d_t`` exactly).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ance_ir.data import InputError
from ance_ir.data.lines import decode_line, read_json_object
from ance_ir.index.records import META_FILE, check_model_record, index_record

COLLECTION = "collection"
LUCENE = "lucene"


def vector_line(docid: str, text: str, vector: Mapping[str, int]) -> str:
    """One line of a ``JsonVectorCollection``."""
    return json.dumps({"id": docid, "contents": text, "vector": dict(vector)}, ensure_ascii=False) + "\n"


def check_vector_collection(files: Iterable[Path]) -> tuple[int, int]:
    """Validate ``JsonVectorCollection`` files (an ``id`` string, ``contents`` string, ``vector`` of terms free of
    whitespace to positive integers); the number of documents and of their postings (terms), or :class:`InputError`
    naming the file and line."""
    count, postings, seen = 0, 0, set()
    for path in files:
        with open(path, "rb") as f:
            for number, raw in enumerate(f, 1):
                try:
                    doc = json.loads(decode_line(path, number, raw))
                except json.JSONDecodeError as e:
                    raise InputError(path, f"not JSON ({e.msg})", number) from None
                if not isinstance(doc, dict) or not isinstance(doc.get("id"), str) or not doc["id"]:
                    raise InputError(path, "needs a non-empty string 'id'", number)
                if not isinstance(doc.get("contents", ""), str):
                    raise InputError(path, "'contents' must be a string", number)
                vector = doc.get("vector")
                if not isinstance(vector, dict):
                    raise InputError(path, "needs a 'vector' object of term -> integer impact", number)
                for term, weight in vector.items():
                    if not term or any(c.isspace() for c in term):
                        raise InputError(path, f"term {term!r} is empty or holds whitespace", number)
                    if not isinstance(weight, int) or isinstance(weight, bool) or weight < 1:
                        raise InputError(path, f"impact of {term!r} must be a positive integer, got {weight!r}",
                                         number)
                if doc["id"] in seen:
                    raise InputError(path, f"duplicate id {doc['id']!r}", number)
                seen.add(doc["id"])
                count += 1
                postings += len(vector)
    return count, postings


def is_impact_index(folder: str | Path) -> bool:
    """Whether ``folder`` is an impact index written by ``python -m ance_ir.encode``."""
    record = index_record(folder)
    return record is not None and record.get("index") == "impact"


def read_meta(folder: str | Path) -> dict[str, Any]:
    """An impact index's ``meta.json``; :class:`InputError` for a folder that is not one."""
    path = Path(folder) / META_FILE
    if not Path(folder).is_dir():
        raise InputError(folder, "no such impact index folder")
    try:
        meta = read_json_object(path)
    except InputError as e:
        raise InputError(path, f"not an impact index record ({e.reason})", e.line) from None
    except OSError as e:
        raise InputError(path, f"not an impact index record ({e.strerror or e})") from None
    if meta.get("index") != "impact" or not (Path(folder) / LUCENE).is_dir():
        raise InputError(folder, "not an impact index (meta.json index 'impact' and a lucene/ folder)")
    missing = [key for key in ("encoder", "kind", "encoder_config") if key not in meta]
    if missing:
        raise InputError(path, f"names no {missing[0]!r} (an impact index records its model)")
    check_model_record(path, meta)
    return meta
