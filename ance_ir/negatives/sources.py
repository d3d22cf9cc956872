"""Candidate sources for negative mining, chosen by name from :data:`CANDIDATE_SOURCES`.

A source answers ``retrieve(queries, depth)``: for every query id, up to ``depth`` ``(docid, score)``
candidates, best first. ``bm25`` searches a Lucene index with Pyserini, ``dense`` a dense index written by
``python -m ance_ir.encode``, ``run`` reads a TREC run file. A new source is one subclass with a ``name``,
decorated with :func:`register_source`. Heavy libraries (Pyserini, torch, faiss) are imported only when a
source retrieves.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from ance_ir.data import InputError, Run, read_run
from ance_ir.train.registry import Registry

CANDIDATE_SOURCES = Registry("candidate source")
#: class decorator: make a source selectable by its ``name``
register_source = CANDIDATE_SOURCES.register

BM25_INDEX_HINT = "build one with: python -m ance_ir.bm25 index --corpus CORPUS --output DIR"


class CandidateSource(ABC):
    """Ranks passages of a corpus for queries."""

    name: ClassVar[str]
    #: whether ``retrieve`` computes its candidates (worth keeping in chunks to resume an interrupted run); a source
    #: that only looks them up in what it read when built says False
    computes: ClassVar[bool] = True

    @abstractmethod
    def retrieve(self, queries: Mapping[str, str], depth: int) -> dict[str, list[tuple[str, float]]]:
        """Up to ``depth`` ``(docid, score)`` candidates for every query id of ``queries``, best first."""

    def resume_record(self) -> dict[str, Any]:
        """What decides the candidates beyond the source's parameters (a model's weights), which a resumed
        retrieval must find unchanged; nothing by default."""
        return {}


def _check_depth(depth: int) -> None:
    if depth < 1:
        raise ValueError(f"retrieval depth must be at least 1, got {depth}")


@register_source
class BM25Source(CandidateSource):
    """Pyserini BM25 over a Lucene index (``python -m ance_ir.bm25 index``); Pyserini's k1=0.9, b=0.4."""

    name = "bm25"

    def __init__(self, index: str | Path | None = None, k1: float = 0.9, b: float = 0.4, threads: int = 2):
        if index is None:
            raise ValueError(f"the bm25 source needs a Lucene index (--index; negatives.index in training); "
                             f"{BM25_INDEX_HINT}")
        if not Path(index).is_dir():
            raise InputError(index, f"no such Lucene index folder; {BM25_INDEX_HINT}")
        if not any(Path(index).glob("segments*")):
            raise InputError(index, f"not a Lucene index (no segments file); {BM25_INDEX_HINT}")
        self.index, self.k1, self.b, self.threads = Path(index), k1, b, threads

    def resume_record(self) -> dict[str, Any]:
        from ance_ir.data import sha256_file

        # the index rebuilt in place: Lucene's newest commit point (segments_N) is a new file, with a new commit id
        commit = max(self.index.glob("segments_*"), key=lambda p: int(p.name.split("_")[1], 36))
        return {"index_commit": f"{commit.name} {sha256_file(commit)}"}

    def retrieve(self, queries: Mapping[str, str], depth: int) -> dict[str, list[tuple[str, float]]]:
        from ance_ir.bm25 import BM25Searcher

        _check_depth(depth)
        return BM25Searcher(self.index, self.k1, self.b).search(dict(queries), hits=depth, threads=self.threads)


@register_source
class DenseSource(CandidateSource):
    """Search of a dense index folder (``python -m ance_ir.encode``), queries encoded by the index's encoder.

    ``encoder`` (a model folder, alias or hub id) replaces the one named in the index's ``meta.json``. The
    index and the encoder are loaded when the source is built, so that a bad one fails before any work.
    """

    name = "dense"

    def __init__(self, index: str | Path | None = None, encoder: str | None = None, batch_size: int = 64,
                 device: str | None = None, threads: int | None = None):
        if index is None:
            raise ValueError("the dense source needs a dense index folder (--index); "
                             "build one with: python -m ance_ir.encode --corpus CORPUS --encoder MODEL --output DIR")
        if not Path(index).is_dir():
            raise InputError(index, "no such dense index folder")
        if batch_size < 1:
            raise ValueError(f"batch size must be at least 1, got {batch_size}")
        import torch

        from ance_ir.index import load_dense_index
        from ance_ir.modeling.inference import resolve_device
        from ance_ir.search import DenseSearcher, encoder_for_index

        if threads:
            import faiss

            torch.set_num_threads(threads)
            faiss.omp_set_num_threads(threads)
        dense = load_dense_index(index)
        model = encoder_for_index(dense, encoder)
        device = resolve_device(device)
        self.searcher = DenseSearcher(dense, model.to(device))
        self.batch_size = batch_size

    def retrieve(self, queries: Mapping[str, str], depth: int) -> dict[str, list[tuple[str, float]]]:
        _check_depth(depth)
        return self.searcher.search(dict(queries), hits=depth, batch_size=self.batch_size)

    def resume_record(self) -> dict[str, Any]:
        from ance_ir.index.records import index_identity
        from ance_ir.modeling.inference import weights_sha256

        return {"weights_sha256": weights_sha256(self.searcher.encoder),  # the query encoder trained again in place
                **index_identity(self.searcher.index.folder),  # the index encoded again in place
                "device": self.searcher.encoder.device.type}  # a GPU rounds otherwise


@register_source
class RunSource(CandidateSource):
    """A TREC run file, read when the source is built.

    Each query's hits are sorted by score (file order breaks ties) and cut to ``depth``; queries the run
    does not hold get no candidates.
    """

    name = "run"
    computes = False

    def __init__(self, path: str | Path | None = None):
        if path is None:
            raise ValueError("the run source needs a TREC run file (--run)")
        self.path = Path(path)
        self.run: Run = read_run(self.path)

    def retrieve(self, queries: Mapping[str, str], depth: int) -> dict[str, list[tuple[str, float]]]:
        _check_depth(depth)
        return {qid: list(self.run.get(qid, ())[:depth]) for qid in queries}


def source_class(name: str) -> type[CandidateSource]:
    """The source registered as ``name``; ValueError naming the known ones for an unknown name."""
    return CANDIDATE_SOURCES.require(name)


def build_source(name: str, **params: Any) -> CandidateSource:
    """The source registered as ``name``, built with ``params``; ValueError for an unknown name or parameter."""
    cls = source_class(name)
    try:
        inspect.signature(cls).bind(**params)
    except TypeError as e:
        raise ValueError(f"candidate source {name!r}: {e}") from None
    return cls(**params)
