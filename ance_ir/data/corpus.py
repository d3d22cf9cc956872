"""Corpora as Pyserini JsonCollection JSONL (``{"id", "contents"[, "title"]}``) or MS MARCO TSV (``id\\ttext``)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from ance_ir.data.atomic import atomic_write
from ance_ir.data.errors import InputError
from ance_ir.data.lines import iter_lines, split_columns


class Passage(NamedTuple):
    docid: str
    contents: str
    title: str = ""

    @property
    def text(self) -> str:
        """Title and contents joined, as a model should see the passage."""
        return f"{self.title} {self.contents}" if self.title else self.contents


def is_tsv(path: str | Path) -> bool:
    return Path(path).name.removesuffix(".gz").endswith(".tsv")


def _parse_jsonl(path: Path, lineno: int, line: str) -> Passage:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise InputError(path, f"malformed JSON ({e.msg})", lineno) from None
    if not isinstance(obj, dict):
        raise InputError(path, "expected a JSON object", lineno)
    docid, contents, title = obj.get("id"), obj.get("contents"), obj.get("title", "")
    if not isinstance(docid, (str, int)) or str(docid).strip() == "":
        raise InputError(path, 'missing or empty "id"', lineno)
    if not isinstance(contents, str):
        raise InputError(path, 'missing or non-string "contents"', lineno)
    if not isinstance(title, str):
        raise InputError(path, 'non-string "title"', lineno)
    return Passage(str(docid), contents, title)


def iter_corpus(path: str | Path) -> Iterator[Passage]:
    """Stream passages from a JSONL (``.jsonl``/``.json``, optionally ``.gz``) or TSV corpus.

    Every malformed line, and every repeated id, raises :class:`InputError` naming the line.
    """
    path = Path(path)
    tsv = is_tsv(path)
    seen: dict[str, int] = {}
    for lineno, line in iter_lines(path):
        if tsv:
            docid, contents = split_columns(path, lineno, line, "\t", (2,))
            if not docid.strip():
                raise InputError(path, "empty id", lineno)
            passage = Passage(docid, contents)
        else:
            passage = _parse_jsonl(path, lineno, line)
        if passage.docid in seen:
            raise InputError(path, f"duplicate id {passage.docid!r} (first on line {seen[passage.docid]})", lineno)
        seen[passage.docid] = lineno
        yield passage


def load_corpus(path: str | Path) -> list[Passage]:
    """All passages of a corpus file, in file order."""
    return list(iter_corpus(path))


def write_corpus(passages: Iterable[Passage], path: str | Path) -> int:
    """Write passages atomically as JSONL, or TSV when ``path`` ends in ``.tsv``; return the count."""
    tsv = is_tsv(path)
    n = 0
    with atomic_write(path) as f:
        for p in passages:
            if tsv:
                if "\t" in p.text or "\n" in p.text:
                    raise ValueError(f"passage {p.docid!r} has a tab or newline and cannot be written as TSV")
                f.write(f"{p.docid}\t{p.text}\n")
            else:
                obj = {"id": p.docid, "contents": p.contents}
                if p.title:
                    obj["title"] = p.title
                f.write(json.dumps(obj, ensure_ascii=False) + "\n")
            n += 1
    return n
