"""Resolve ``--corpus``, ``--topics`` and ``--qrels`` arguments: a name, a dataset folder or a file path.

In this order:

* ``rag24-mini`` (corpus); ``rag24-mini-train`` / ``rag24-mini-test`` (topics and UMBRELA qrels);
  ``rag24-mini-test-nist`` (test topics, NIST qrels). Fetched on first use.
* ``dl19-passage`` (``dl19``), ``dl20-passage`` (``dl20``), ``msmarco-passage-dev-subset``
  (``msmarco-dev``) and ``beir-v1.0.0-NAME-test``: topics and qrels only.
* ``irds:NAME``: an ir_datasets name (optional package; see :mod:`ance_ir.datasets.irds`).
* ``DIR`` or ``DIR:SPLIT``: a dataset folder in BEIR layout, one name for corpus, topics and qrels
  (see :mod:`ance_ir.datasets.folder`).
* a file: corpus JSONL (Pyserini, BEIR or Tevatron fields) or TSV; topics TSV or JSONL (BEIR, Tevatron);
  qrels in TREC or BEIR format (see :mod:`ance_ir.data`).
"""

from __future__ import annotations

import sys
from pathlib import Path

from ance_ir.data import InputError, Qrels, Topics, read_qrels, read_topics, read_topics_tsv
from ance_ir.datasets import anserini, irds, rag24
from ance_ir.datasets.folder import dataset_folder
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
    """The corpus file for a dataset name, ``irds:NAME``, a BEIR-layout folder (``DIR/corpus.jsonl``) or a path."""
    if spec in DATASETS:
        return _rag24_file("corpus")
    if irds.is_irds(spec):
        return irds.corpus_file(spec)
    folder = dataset_folder(spec)
    if folder is not None:
        return folder.corpus
    path = Path(spec)
    if not path.is_file():
        raise InputError(spec, "no such corpus file or dataset name (known: " + ", ".join(DATASETS) + ")")
    return path


def _is_name(spec: str) -> bool:
    return (spec in RAG24_SPLITS or anserini.canonical(spec) is not None or irds.is_irds(spec)
            or dataset_folder(spec) is not None)


def resolve_topics(spec: str) -> Topics:
    """Topics for a registered name, ``irds:NAME``, a BEIR-layout folder (its split's judged queries) or a file
    (``qid\\tquery`` TSV, or BEIR/Tevatron JSONL)."""
    if spec in RAG24_SPLITS:
        return read_topics_tsv(_rag24_file(RAG24_SPLITS[spec][0]))
    if anserini.canonical(spec):
        return anserini.load_topics(spec)
    if irds.is_irds(spec):
        return irds.load_topics(spec)
    folder = dataset_folder(spec)
    if folder is not None:
        return folder.topics()
    return read_topics(spec)


def resolve_qrels(spec: str) -> Qrels:
    """Qrels for a registered name (restricted to that split's topics), ``irds:NAME``, a BEIR-layout folder
    (``DIR/qrels/SPLIT.tsv``) or a TREC/BEIR qrels file."""
    if spec in RAG24_SPLITS:
        split, judgments = RAG24_SPLITS[spec]
        topics = read_topics_tsv(_rag24_file(split))
        qrels = read_qrels(_rag24_file(judgments))
        return {qid: judged for qid, judged in qrels.items() if qid in topics}
    if anserini.canonical(spec):
        return anserini.load_qrels(spec)
    if irds.is_irds(spec):
        return irds.load_qrels(spec)
    folder = dataset_folder(spec)
    if folder is not None:
        return folder.qrels()
    return read_qrels(spec)


def qrels_for_topics(spec: str) -> Qrels | None:
    """Qrels that go with a topics name or folder, or None for a topics file (no known judgments)."""
    if irds.is_irds(spec) and not irds.has_qrels(spec):
        return None
    return resolve_qrels(spec) if _is_name(spec) else None


def resolve_eval_qrels(qrels: str | None, topics_spec: str, topics: Topics) -> Qrels | None:
    """The qrels a run of ``topics`` is evaluated with: ``qrels`` (a file or name) if given, else those that go with
    ``topics_spec`` (:func:`qrels_for_topics`); InputError naming them when they judge none of the topics, before
    anything is computed (the run could not be measured)."""
    judged = resolve_qrels(qrels) if qrels else qrels_for_topics(topics_spec)
    if judged is not None and topics and not any(qid in judged for qid in topics):
        raise InputError(qrels or topics_spec, f"judges none of the {len(topics)} topics of {topics_spec}")
    return judged

