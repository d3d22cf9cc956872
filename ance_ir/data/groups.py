"""Training groups in Tevatron's JSONL format, one query a line.

    {"query_id": "q1", "query": "...", "positive_passages": [P, ...], "negative_passages": [P, ...]}

where each passage ``P`` is ``{"docid": str, "title": str, "text": str, "score": float}`` with only
``docid`` required. Unknown keys of the top object are ignored (Tevatron's datasets carry extras) but
``scored_by``, what gave the scores (a candidate source of ``python -m ance_ir.negatives``, ``grades``, or the
models of ``python -m ance_ir.rerank --groups``); a passage may hold only those four keys.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ance_ir.data.atomic import atomic_write
from ance_ir.data.corpus import Passage
from ance_ir.data.errors import InputError
from ance_ir.data.lines import check_id, iter_lines, json_object

PASSAGE_KEYS = ("docid", "title", "text", "score")


@dataclass(frozen=True)
class GroupPassage:
    """One passage of a group: its id, optionally its text, title and the score it was retrieved with."""

    docid: str
    text: str | None = None
    score: float | None = None
    title: str | None = None

    def own_text(self) -> str | None:
        """The group's own text for this passage, its title joined in front as a corpus passage's
        (:attr:`Passage.text`); None where it carries none (the corpus's is meant)."""
        return None if self.text is None else Passage(self.docid, self.text, self.title or "").text

    def to_json(self) -> dict[str, Any]:
        obj: dict[str, Any] = {"docid": self.docid}
        if self.title is not None:
            obj["title"] = self.title
        if self.text is not None:
            obj["text"] = self.text
        if self.score is not None:
            obj["score"] = float(self.score)
        return obj


@dataclass(frozen=True)
class TrainingGroup:
    """A query with its positive passages and its (mined) negative passages, best first."""

    query_id: str
    query: str
    positives: tuple[GroupPassage, ...]
    negatives: tuple[GroupPassage, ...] = ()
    scored_by: str | None = None  # what gave the passages' scores (a source, "grades", a teacher's models)

    def to_json(self) -> dict[str, Any]:
        obj = {"query_id": self.query_id, "query": self.query,
               "positive_passages": [p.to_json() for p in self.positives],
               "negative_passages": [p.to_json() for p in self.negatives]}
        return obj if self.scored_by is None else {**obj, "scored_by": self.scored_by}


def _parse_passage(path: Path, lineno: int, field: str, obj: Any) -> GroupPassage:
    if not isinstance(obj, dict):
        raise InputError(path, f'"{field}" must hold JSON objects, found {type(obj).__name__}', lineno)
    unknown = sorted(set(obj) - set(PASSAGE_KEYS))
    if unknown:
        raise InputError(path, f'unknown key {unknown[0]!r} in a passage of "{field}" '
                               f"(a passage has {', '.join(PASSAGE_KEYS)})", lineno)
    docid = obj.get("docid")
    if not isinstance(docid, str) or not docid.strip():
        raise InputError(path, f'a passage of "{field}" has a missing, empty or non-string "docid"', lineno)
    check_id(path, lineno, "docid", docid)
    for key in ("text", "title"):
        if key in obj and not isinstance(obj[key], str):
            raise InputError(path, f'passage {docid!r}: "{key}" must be a string', lineno)
    score = obj.get("score")
    if score is not None:
        if isinstance(score, bool) or not isinstance(score, (int, float)):
            raise InputError(path, f'passage {docid!r}: "score" must be a number', lineno)
        try:
            score = float(score)  # an integer beyond a float's range overflows
        except OverflowError:
            score = math.inf
        if not math.isfinite(score):
            raise InputError(path, f'passage {docid!r}: "score" is not a finite number', lineno)
    return GroupPassage(docid, obj.get("text"), score, obj.get("title"))


def _parse_group(path: Path, lineno: int, line: str) -> TrainingGroup:
    obj = json_object(path, lineno, line)
    for key in ("query_id", "query"):
        if key not in obj:
            raise InputError(path, f'missing "{key}"', lineno)
        if not isinstance(obj[key], str):
            raise InputError(path, f'"{key}" must be a string', lineno)
    qid = obj["query_id"].strip()
    if not qid:
        raise InputError(path, "empty query id", lineno)
    check_id(path, lineno, "query id", qid)
    if not obj["query"].strip():
        raise InputError(path, f"query {qid!r} has no text", lineno)
    lists = []
    for field in ("positive_passages", "negative_passages"):
        if field not in obj:
            raise InputError(path, f'missing "{field}"', lineno)
        if not isinstance(obj[field], list):
            raise InputError(path, f'"{field}" must be a list', lineno)
        lists.append(tuple(_parse_passage(path, lineno, field, p) for p in obj[field]))
    positives, negatives = lists
    if not positives:
        raise InputError(path, f"query {qid!r} has no positive passage", lineno)
    seen: set[str] = set()
    for p in (*positives, *negatives):
        if p.docid in seen:
            raise InputError(path, f"docid {p.docid!r} appears twice in the group of query {qid!r}", lineno)
        seen.add(p.docid)
    scored_by = obj.get("scored_by")
    if scored_by is not None and not isinstance(scored_by, str):
        raise InputError(path, '"scored_by" must be a string', lineno)
    return TrainingGroup(qid, obj["query"], positives, negatives, scored_by)


def read_groups(paths: str | Path | Sequence[str | Path]) -> list[TrainingGroup]:
    """Read a groups file (JSONL, optionally ``.gz``), or several as one list in order; every bad line raises
    :class:`InputError` naming it.

    Errors: malformed JSON, a missing or ill-typed field, an empty or repeated query id (within a file or across
    files), a docid twice in one group, a non-finite score, a group without positives.
    """
    groups: list[TrainingGroup] = []
    first: dict[str, tuple[Path, int]] = {}
    for path in map(Path, [paths] if isinstance(paths, (str, Path)) else paths):
        for lineno, line in iter_lines(path):
            group = _parse_group(path, lineno, line)
            if group.query_id in first:
                where, at = first[group.query_id]
                raise InputError(path, f"query id {group.query_id!r} repeated (first on line "
                                       f"{at}{'' if where == path else f' of {where}'})", lineno)
            first[group.query_id] = path, lineno
            groups.append(group)
    return groups


def write_groups(path: str | Path, groups: Iterable[TrainingGroup]) -> int:
    """Write ``groups`` atomically as JSONL (gzip when ``path`` ends in ``.gz``); return the count.

    The same groups always give the same bytes; fields that are None are left out.
    """
    n = 0
    with atomic_write(path) as f:
        for group in groups:
            f.write(json.dumps(group.to_json(), ensure_ascii=False, allow_nan=False) + "\n")
            n += 1
    return n
