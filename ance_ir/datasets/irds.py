"""``irds:NAME``: corpora, topics and qrels through the optional ``ir_datasets`` package.

``irds:beir/scifact/test`` gives the documents, queries and qrels of ir_datasets' ``beir/scifact/test``.
ir_datasets downloads on first use (it needs network access then) and caches under ``~/.ir_datasets``.
A corpus is exported once as JSONL to ``$ANCE_IR_HOME/irds/NAME/corpus.jsonl``, since every step
reads corpora from a file.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ance_ir.data import InputError, Passage, Qrels, Topics, write_corpus
from ance_ir.data.resume import slow_bar
from ance_ir.datasets.home import ance_ir_home

PREFIX = "irds:"
INSTALL = "pip install ir_datasets (or pip install 'ance-ir[irds]')"


def is_irds(spec: str) -> bool:
    return spec.startswith(PREFIX)


def _dataset(spec: str) -> Any:
    name = spec[len(PREFIX):]
    if not name:
        raise InputError(spec, "expected irds:NAME with an ir_datasets name, e.g. irds:beir/scifact/test")
    try:
        import ir_datasets
    except ImportError:
        raise InputError(spec, f"needs the ir_datasets package, which is not installed: {INSTALL}") from None
    try:
        return ir_datasets.load(name)
    except KeyError:
        raise InputError(spec, f"ir_datasets has no dataset {name!r} (see https://ir-datasets.com)") from None


def _guarded(spec: str, what: str, items: Iterable[Any]) -> Iterator[Any]:
    """Iterate ``items``, turning a failed download (offline, server down) into one clear InputError."""
    try:
        yield from items
    except InputError:
        raise
    except Exception as e:  # noqa: BLE001 - ir_datasets raises many kinds when a download fails
        detail = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
        raise InputError(spec, f"ir_datasets could not load the {what} ({type(e).__name__}: {detail}); it "
                               "downloads on first use, so it needs network access once (cache: ~/.ir_datasets)"
                         ) from None


def _require(spec: str, dataset: Any, what: str) -> None:
    if not getattr(dataset, f"has_{what}")():
        raise InputError(spec, f"this ir_datasets dataset has no {what}")


def _text(spec: str, record: Any, kind: str) -> str:
    text = getattr(record, "text", None)
    if not isinstance(text, str) and hasattr(record, "default_text"):
        text = record.default_text()
    if not isinstance(text, str):
        raise InputError(spec, f"{kind} {record[0]!r} has no text field ({', '.join(record._fields)})")
    return text


def has_qrels(spec: str) -> bool:
    return bool(_dataset(spec).has_qrels())


def load_topics(spec: str) -> Topics:
    dataset = _dataset(spec)
    _require(spec, dataset, "queries")
    return {str(q.query_id): _text(spec, q, "query").strip()
            for q in _guarded(spec, "queries", dataset.queries_iter())}


def load_qrels(spec: str) -> Qrels:
    dataset = _dataset(spec)
    _require(spec, dataset, "qrels")
    qrels: Qrels = {}
    for q in _guarded(spec, "qrels", dataset.qrels_iter()):
        qrels.setdefault(str(q.query_id), {})[str(q.doc_id)] = int(q.relevance)
    return qrels


def corpus_file(spec: str) -> Path:
    """The JSONL export of the dataset's documents (written on first use)."""
    name = spec[len(PREFIX):]
    target = ance_ir_home() / "irds" / name.strip("/").replace("/", "__") / "corpus.jsonl"
    if target.is_file():
        return target
    dataset = _dataset(spec)
    _require(spec, dataset, "docs")

    def passages() -> Iterator[Passage]:
        for doc in _guarded(spec, "documents", dataset.docs_iter()):
            title = getattr(doc, "title", "")
            if isinstance(getattr(doc, "text", None), str) and isinstance(title, str):
                yield Passage(str(doc.doc_id), doc.text, title)
            else:  # default_text() already holds the title where there is one
                yield Passage(str(doc.doc_id), _text(spec, doc, "document"))

    print(f"exporting the documents of {spec} to {target} ...", file=sys.stderr)
    n = write_corpus(slow_bar(passages(), desc="export", unit="document", show=True), target)
    print(f"exported {n} documents", file=sys.stderr)
    return target
