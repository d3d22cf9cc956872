"""Corpora as JSONL (Pyserini, BEIR or Tevatron fields, told apart by the first line) or MS MARCO TSV.

* Pyserini JsonCollection: ``{"id", "contents"[, "title"]}``
* BEIR ``corpus.jsonl``: ``{"_id", "text"[, "title", "metadata"]}``
* Tevatron corpus: ``{"docid", "text"[, "title"]}``
* MS MARCO TSV (``.tsv``, optionally ``.gz``): ``id<TAB>text``

A title is kept apart from the text and joined in front of it by :attr:`Passage.text` with a space, as
Pyserini's encoders join ``title`` and ``text`` (its BEIR "flat" Lucene indexes join them with a newline:
the same tokens).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from ance_ir.data.atomic import atomic_write
from ance_ir.data.errors import InputError
from ance_ir.data.lines import check_id, iter_lines, json_object, split_columns
from ance_ir.data.resume import slow_bar


class Passage(NamedTuple):
    docid: str
    contents: str
    title: str = ""

    @property
    def text(self) -> str:
        """Title and contents joined, as a model should see the passage."""
        return f"{self.title} {self.contents}" if self.title else self.contents


class JsonFields(NamedTuple):
    """The field names of one JSONL corpus layout."""

    name: str
    id: str
    text: str


PYSERINI = JsonFields("Pyserini", "id", "contents")
BEIR = JsonFields("BEIR", "_id", "text")
TEVATRON = JsonFields("Tevatron", "docid", "text")


def is_tsv(path: str | Path) -> bool:
    return Path(path).name.removesuffix(".gz").endswith(".tsv")


def corpus_fields(obj: dict) -> JsonFields:
    """The layout of a corpus whose first line is ``obj``: BEIR (``_id``), Tevatron (``docid``), else Pyserini."""
    if "_id" in obj:
        return BEIR
    if "docid" in obj:
        return TEVATRON
    return PYSERINI


def _parse_json(path: Path, lineno: int, obj: dict, fields: JsonFields, first: bool) -> Passage:
    layout = "" if first or fields is PYSERINI else f" ({fields.name} corpus, as line 1 says)"
    docid, contents, title = obj.get(fields.id), obj.get(fields.text), obj.get("title", "")
    if not isinstance(docid, (str, int)) or isinstance(docid, bool) or str(docid).strip() == "":
        raise InputError(path, f'missing or empty "{fields.id}"{layout}', lineno)
    if not isinstance(contents, str):
        raise InputError(path, f'missing or non-string "{fields.text}"{layout}', lineno)
    if title is None:
        title = ""
    if not isinstance(title, str):
        raise InputError(path, 'non-string "title"', lineno)
    return Passage(check_id(path, lineno, "id", str(docid)), contents, title)


def iter_corpus(path: str | Path, show_progress: bool = False, desc: str = "read corpus") -> Iterator[Passage]:
    """Stream passages from a JSONL (``.jsonl``/``.json``, optionally ``.gz``) or TSV corpus, counted on stderr
    (``desc``) with ``show_progress`` once reading takes more than ``BAR_DELAY_S``.

    The JSONL layout (Pyserini, BEIR or Tevatron fields) is taken from the first line; every later line
    must use the same fields. Every malformed line, and every repeated id, raises :class:`InputError`
    naming the line.
    """
    yield from slow_bar(_passages(Path(path)), desc=desc, unit="passage", show=show_progress)


def _passages(path: Path) -> Iterator[Passage]:
    tsv = is_tsv(path)
    fields: JsonFields | None = None
    seen: dict[str, int] = {}
    for lineno, line in iter_lines(path):
        if tsv:
            docid, contents = split_columns(path, lineno, line, "\t", (2,))
            passage = Passage(check_id(path, lineno, "id", docid), contents)
        else:
            obj = json_object(path, lineno, line)
            first = fields is None
            if fields is None:
                fields = corpus_fields(obj)
            passage = _parse_json(path, lineno, obj, fields, first)
        if passage.docid in seen:
            raise InputError(path, f"duplicate id {passage.docid!r} (first on line {seen[passage.docid]})", lineno)
        seen[passage.docid] = lineno
        yield passage


def load_corpus(path: str | Path, show_progress: bool = False) -> list[Passage]:
    """All passages of a corpus file, in file order (a count of those read on stderr, with ``show_progress``, once
    reading takes more than ``BAR_DELAY_S``)."""
    return list(iter_corpus(path, show_progress, desc=f"read {Path(path).name}"))


def corpus_texts(path: str | Path, docids: Collection[str] | None = None,
                 show_progress: bool = False) -> dict[str, str]:
    """``{docid: text}`` of a corpus's passages, of those in ``docids`` only when given (the caller checks that
    none is missing); a count on stderr with ``show_progress``, as :func:`iter_corpus`."""
    return {p.docid: p.text for p in iter_corpus(path, show_progress) if docids is None or p.docid in docids}


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
