"""Resolve ``--corpus``, ``--topics`` and ``--qrels`` arguments: a registered name or a file path.

Registered names:

* ``rag24-mini`` (corpus); ``rag24-mini-train`` / ``rag24-mini-test`` (topics and UMBRELA qrels);
  ``rag24-mini-test-nist`` (test topics, NIST qrels). Fetched on first use.
* ``dl19-passage`` (``dl19``), ``dl20-passage`` (``dl20``), ``msmarco-passage-dev-subset``
  (``msmarco-dev``) and ``beir-v1.0.0-NAME-test``: topics and qrels only.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ance_ir.data import InputError, Qrels, Topics, read_qrels, read_topics_tsv
from ance_ir.datasets import anserini, rag24
from ance_ir.datasets.home import ance_ir_home

# topics/qrels name -> (topics file, qrels file) inside the rag24-mini folder
RAG24_SPLITS = {
    "rag24-mini-train": ("train", "umbrela"),
    "rag24-mini-test": ("test", "umbrela"),
    "rag24-mini-test-nist": ("test", "nist"),
}
DATASETS = {rag24.NAME: "TREC RAG 2024 mini-collection: 6,011 passages, 200 train / 101 test topics"}


def dataset_dir(name: str) -> Path:
    return ance_ir_home() / name


def fetch(name: str, force: bool = False) -> Path:
    """Make sure dataset ``name`` is in the cache; return its folder."""
    if name not in DATASETS:
        raise KeyError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    target = dataset_dir(name)
    if force or not (target / "manifest.json").is_file():
        print(f"fetching {name} into {target} ...", file=sys.stderr)
        rag24.build(target)
    return target


def _rag24_file(key: str) -> Path:
    return fetch(rag24.NAME) / rag24.FILES[key]


def resolve_corpus(spec: str) -> Path:
    """The corpus file for a dataset name or a path."""
    if spec in DATASETS:
        return _rag24_file("corpus")
    path = Path(spec)
    if not path.is_file():
        raise InputError(spec, "no such corpus file or dataset name (known: " + ", ".join(DATASETS) + ")")
    return path


def _is_name(spec: str) -> bool:
    return spec in RAG24_SPLITS or anserini.canonical(spec) is not None


def resolve_topics(spec: str) -> Topics:
    """Topics for a registered name or a ``qid\\tquery`` TSV file."""
    if spec in RAG24_SPLITS:
        return read_topics_tsv(_rag24_file(RAG24_SPLITS[spec][0]))
    if anserini.canonical(spec):
        return anserini.load_topics(spec)
    return read_topics_tsv(spec)


def resolve_qrels(spec: str) -> Qrels:
    """Qrels for a registered name (restricted to that split's topics) or a TREC qrels file."""
    if spec in RAG24_SPLITS:
        split, judgments = RAG24_SPLITS[spec]
        topics = read_topics_tsv(_rag24_file(split))
        qrels = read_qrels(_rag24_file(judgments))
        return {qid: judged for qid, judged in qrels.items() if qid in topics}
    if anserini.canonical(spec):
        return anserini.load_qrels(spec)
    return read_qrels(spec)


def qrels_for_topics(spec: str) -> Qrels | None:
    """Qrels that go with a topics name, or None for a topics file (no known judgments)."""
    return resolve_qrels(spec) if _is_name(spec) else None


def known_names() -> list[str]:
    return [*DATASETS, *RAG24_SPLITS, *anserini.ALIASES, *anserini.FILES]
