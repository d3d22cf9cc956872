"""Dense indexes on disk in Pyserini's layout: a folder with ``index`` (faiss) and ``docid`` (one id a line).

Pyserini's ``FaissSearcher(folder, query_encoder)`` reads exactly those two files. ance-ir adds
``meta.json`` (encoder, corpus, index settings) and, for shards, the raw ``vectors.npy`` that lets
:func:`merge_indexes` rebuild any index type.

An index of several vectors per passage (ME-BERT, ``vectors_per_passage: m`` in ``meta.json``) stores passage
``i``'s vectors as rows ``i*m .. i*m+m-1`` and repeats its docid on those ``m`` lines of ``docid``, so Pyserini
reads it too (its hits may name a passage more than once; the first is its best). :meth:`DenseIndex.search`
scores each passage by its best vector: it searches ``k*m`` rows and keeps each passage's first, which gives
the exact top ``k`` of a flat index (the top ``k`` passages' best vectors are all within the top ``k*m`` rows).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from ance_ir.data import InputError, atomic_directory
from ance_ir.data.lines import read_json_object, read_text
from ance_ir.index.faiss_index import build_index, describe_index, faiss_gpu, to_gpu
from ance_ir.index.records import META_FILE, check_model_record

INDEX_FILE, DOCID_FILE, VECTORS_FILE = "index", "docid", "vectors.npy"
# meta.json fields that merged indexes must agree on (a merged index inherits them and "corpus")
SHARED_META = ("encoder", "weights_sha256", "kind", "encoder_config", "pooling", "normalize", "corpus_sha256",
               "vectors_per_passage", "precision")


def check_docid(docid: str) -> None:
    """Raise ValueError for an id the ``docid`` file or a TREC run cannot hold (empty or with whitespace)."""
    if docid.split() != [docid]:
        raise ValueError(f"docid {docid!r} is empty or contains whitespace, which a dense index cannot store")


#: the most hits faiss's GPU indexes select per query; a search for more runs on the CPU index
GPU_MAX_K = 2048


def check_docid_lines(path: Path, docids: list[str], step: int = 1) -> None:
    """A docid file read back (``docids``: every ``step``-th line): InputError naming the line of an id that is
    empty, holds whitespace or repeats."""
    first: dict[str, int] = {}
    for i, docid in enumerate(docids):
        lineno = i * step + 1
        if docid.split() != [docid]:
            raise InputError(path, f"docid {docid!r} is empty or contains whitespace", lineno)
        if first.setdefault(docid, lineno) != lineno:
            raise InputError(path, f"docid {docid!r} repeated (first on line {first[docid]})", lineno)


@dataclass
class DenseIndex:
    """A faiss inner-product index, its docids in faiss row order, and its ``meta.json``."""

    index: faiss.Index
    docids: list[str]
    meta: dict[str, Any] = field(default_factory=dict)
    folder: Path | None = None
    _searchable: faiss.Index | None = field(default=None, init=False, repr=False, compare=False)
    #: the faiss GPU searches run on when faiss sees GPUs (None: the CPU); :meth:`use_device` sets it
    gpu: int | None = field(default=0, init=False, repr=False, compare=False)

    @property
    def dim(self) -> int:
        return self.index.d

    @property
    def vectors_per_passage(self) -> int:
        """Consecutive rows (and ``docid`` lines) per passage: ``meta.json``'s ``vectors_per_passage``, else 1."""
        return int(self.meta.get("vectors_per_passage", 1))

    def __len__(self) -> int:
        return self.index.ntotal

    @property
    def ef_search(self) -> int | None:
        """An HNSW index's candidate list length when searching (faiss ``efSearch``); None for other types."""
        return self.index.hnsw.efSearch if isinstance(self.index, faiss.IndexHNSW) else None

    def set_ef_search(self, ef_search: int) -> None:
        """Search an HNSW index with ``ef_search`` candidates a query: more finds more of the exact top hits, and
        a query gets at most about ``ef_search`` hits. ValueError for another index type or a value below 1."""
        self._check_search_setting("ef_search", self.ef_search, "HNSW", ef_search)
        self.index.hnsw.efSearch = ef_search

    @property
    def nprobe(self) -> int | None:
        """An IVF index's inverted lists searched per query (faiss ``nprobe``); None for other types."""
        return self.index.nprobe if isinstance(self.index, faiss.IndexIVF) else None

    def use_device(self, device: Any) -> None:
        """Search beside a model on the torch ``device``: on its GPU (:func:`faiss_gpu`), else on the CPU."""
        gpu = faiss_gpu(device)
        if gpu != self.gpu:
            self.gpu, self._searchable = gpu, None

    def set_nprobe(self, nprobe: int) -> None:
        """Search an IVF (IVF-PQ) index's ``nprobe`` nearest lists a query (at most all of them): more finds more of
        the exact top hits. ValueError for another index type or a value below 1."""
        self._check_search_setting("nprobe", self.nprobe, "IVF", nprobe)
        self.index.nprobe = min(nprobe, self.index.nlist)
        self._searchable = None  # a GPU copy holds the old setting

    def _check_search_setting(self, name: str, current: int | None, index_type: str, value: int) -> None:
        """ValueError unless this index has the search setting ``name`` (``current`` is not None) and ``value`` is
        at least 1."""
        if current is None:
            raise ValueError(f"{self.folder or 'this index'}: {name} applies to an {index_type} index; this one is "
                             f"{describe_index(self.index)[0]}")
        if value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")

    def search(self, queries: np.ndarray, k: int = 10) -> tuple[np.ndarray, list[list[str]]]:
        """Top-``k`` hits by inner product for each query vector (``[Q, D]``, or one ``[D]`` vector).

        Returns scores ``[Q, min(k, N)]`` and each query's docids, best first (``N`` passages; a passage of
        several vectors scores its best one). A query with fewer hits (possible with IVF-PQ) gets a shorter
        docid list and ``-inf`` for the missing scores.
        """
        queries = np.asarray(queries, dtype=np.float32)
        if queries.ndim == 1:
            queries = queries[None]
        if queries.ndim != 2 or queries.shape[1] != self.dim:
            where = f"index {self.folder}" if self.folder else "the index"
            raise ValueError(f"query vectors have shape {queries.shape}, "
                             f"but {where} has dimension {self.dim}")
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        per = self.vectors_per_passage
        k = min(k, len(self) // per)
        if k == 0:
            return np.empty((len(queries), 0), np.float32), [[] for _ in queries]
        if self._searchable is None:
            self._searchable = to_gpu(self.index, self.gpu)
        wanted = min(k * per, len(self))
        searcher = self._searchable if wanted <= GPU_MAX_K else self.index  # the CPU index when faiss GPU cannot
        scores, rows = searcher.search(np.ascontiguousarray(queries), wanted)
        if per > 1:
            scores, rows = _best_per_passage(scores, rows, per, k)
        scores[rows < 0] = -np.inf
        return scores, [[self.docids[r] for r in row if r >= 0] for row in rows]


def _best_per_passage(scores: np.ndarray, rows: np.ndarray, per: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each query's first ``k`` hits of distinct passages (passage = row // ``per``), rows -1 past the end."""
    best_scores = np.full((len(rows), k), -np.inf, dtype=np.float32)
    best_rows = np.full((len(rows), k), -1, dtype=np.int64)
    for q, (row_scores, row_ids) in enumerate(zip(scores, rows, strict=True)):
        seen: set[int] = set()
        for score, row in zip(row_scores.tolist(), row_ids.tolist(), strict=True):
            if row < 0 or row // per in seen:
                continue
            seen.add(row // per)
            best_scores[q, len(seen) - 1], best_rows[q, len(seen) - 1] = score, row
            if len(seen) == k:
                break
    return best_scores, best_rows


def write_dense_index(folder: str | Path, index: faiss.Index, docids: Sequence[str],
                      meta: dict[str, Any] | None = None, vectors: np.ndarray | None = None,
                      vectors_per_passage: int = 1) -> DenseIndex:
    """Write ``index``, ``docid`` and ``meta.json`` (plus ``vectors.npy`` if given) as one atomic folder.

    ``index`` must be a CPU index. ``docids`` names each passage once; with ``vectors_per_passage`` m > 1 the
    index holds m consecutive rows per passage, ``docid`` repeats each id m times and ``meta.json`` records m.
    ``meta`` is completed with ``index_type``, ``index_params``, ``dimension`` and ``count`` (vectors) read
    from the index itself. An existing folder is replaced.
    """
    docids = list(docids)
    per = vectors_per_passage
    if len(docids) * per != index.ntotal:
        raise ValueError(f"{len(docids)} docids of {per} vector(s) each for an index of {index.ntotal} vectors")
    seen: set[str] = set()
    for docid in docids:
        check_docid(docid)
        if docid in seen:
            raise ValueError(f"docid {docid!r} appears more than once")
        seen.add(docid)
    if vectors is not None and vectors.shape != (index.ntotal, index.d):
        raise ValueError(f"vectors have shape {vectors.shape}, index holds ({index.ntotal}, {index.d})")
    index_type, params = describe_index(index)
    meta = {**(meta or {}), "index_type": index_type, "index_params": params, "dimension": index.d,
            "count": index.ntotal}
    meta.pop("vectors_per_passage", None)
    if per > 1:
        meta["vectors_per_passage"] = per
        docids = [d for d in docids for _ in range(per)]
    with atomic_directory(folder) as tmp:
        faiss.write_index(index, str(tmp / INDEX_FILE))
        (tmp / DOCID_FILE).write_text("".join(f"{d}\n" for d in docids), encoding="utf-8")
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        if vectors is not None:
            np.save(tmp / VECTORS_FILE, vectors)
    return DenseIndex(index, docids, meta, Path(folder))


def passage_index(vectors: np.ndarray, docids: Sequence[str], index_type: str = "flat") -> DenseIndex:
    """An in-memory index of passage vectors ``[N, D]``, or ``[N, m, D]`` (m per passage), named ``docids``."""
    per = vectors.shape[1] if vectors.ndim == 3 else 1
    rows = vectors.reshape(-1, vectors.shape[-1])
    meta = {"vectors_per_passage": per} if per > 1 else {}
    return DenseIndex(build_index(rows, index_type), [d for d in docids for _ in range(per)], meta)


def load_dense_index(folder: str | Path, mmap: bool = False) -> DenseIndex:
    """Open a dense index folder (ours or Pyserini's); ``meta.json`` is optional. ``mmap``: the faiss index mapped
    read-only rather than read into memory (checking a big index before work that searches it later).

    Raises :class:`InputError` naming the file when ``index`` or ``docid`` is missing or unreadable,
    or when the number of docids, the vector count and ``meta.json`` disagree.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(folder, "no such dense index folder")
    index_path, docid_path, meta_path = folder / INDEX_FILE, folder / DOCID_FILE, folder / META_FILE
    for path in (index_path, docid_path):
        if not path.is_file():
            raise InputError(path, f"missing (a dense index folder needs {INDEX_FILE!r} and {DOCID_FILE!r})")
    try:
        index = faiss.read_index(str(index_path), faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY if mmap else 0)
    except RuntimeError as e:
        reason = str(e).strip().splitlines()[-1]
        raise InputError(index_path, f"not a readable faiss index ({reason})") from None
    lines = read_text(docid_path).split("\n")
    docids = [line.rstrip() for line in (lines[:-1] if lines[-1] == "" else lines)]
    if len(docids) != index.ntotal:
        raise InputError(docid_path, f"has {len(docids)} docids, but {index_path} holds "
                                     f"{index.ntotal} vectors")
    meta = read_json_object(meta_path) if meta_path.is_file() else {}
    for key, actual in (("dimension", index.d), ("count", index.ntotal)):
        if key in meta and meta[key] != actual:
            raise InputError(meta_path, f"says {key} {meta[key]} but {index_path} has {actual}")
    check_model_record(meta_path, meta)
    per = meta.get("vectors_per_passage", 1)
    if not isinstance(per, int) or isinstance(per, bool) or per < 1 or index.ntotal % per:
        raise InputError(meta_path, f"vectors_per_passage {per!r} must be a positive integer dividing the "
                                    f"{index.ntotal} vectors")
    if per > 1 and any(len(set(docids[i:i + per])) != 1 for i in range(0, len(docids), per)):
        raise InputError(docid_path, f"must repeat each docid on {per} consecutive lines (vectors_per_passage)")
    check_docid_lines(docid_path, docids[::per], per)
    return DenseIndex(index, docids, meta, folder)


def single_vector_index(folder: str | Path) -> DenseIndex:
    """:func:`load_dense_index` of an index with one vector a passage (InputError for an ME-BERT index, whose
    passages have several)."""
    dense = load_dense_index(folder)
    if dense.vectors_per_passage > 1:
        raise InputError(dense.folder / META_FILE, f"an index of {dense.vectors_per_passage} vectors a passage "
                                                   "(ME-BERT) has no one vector a passage to draw")
    return dense


def load_array(path: Path) -> np.ndarray:
    """An index's ``.npy`` file, memory-mapped; InputError naming it when it is cut short or not an array."""
    try:
        return np.load(path, mmap_mode="r")
    except (ValueError, OSError) as e:
        raise InputError(path, f"not a readable .npy array ({e}); re-create the index") from None


def stored_vectors(dense: DenseIndex) -> np.ndarray:
    """The raw vectors of an index: its ``vectors.npy`` (memory-mapped), or read back from flat/HNSW."""
    path = dense.folder / VECTORS_FILE if dense.folder else None
    if path is not None and path.is_file():
        vectors = load_array(path)
        if vectors.shape != (len(dense), dense.dim):
            raise InputError(path, f"has shape {vectors.shape}, index holds ({len(dense)}, {dense.dim})")
        return vectors
    if isinstance(dense.index, faiss.IndexFlat | faiss.IndexHNSWFlat):
        return dense.index.reconstruct_n(0, len(dense))
    index_type = describe_index(dense.index)[0]
    raise InputError(dense.folder or "index", f"no {VECTORS_FILE}, and its {index_type} index cannot give "
                                              "back its vectors; encode shards with --shard to keep them")


def concat_vectors(parts: Sequence[np.ndarray], path: str | Path, dtype: type = np.float32) -> np.ndarray:
    """Stack row blocks into a ``dtype`` ``.npy`` at ``path`` and return it memory-mapped (no copy in RAM)."""
    dims = {part.shape[1] for part in parts}
    if len(dims) != 1:
        raise ValueError(f"cannot stack vectors of different dimensions {sorted(dims)}")
    out = np.lib.format.open_memmap(path, mode="w+", dtype=dtype,
                                    shape=(sum(len(part) for part in parts), dims.pop()))
    row = 0
    for part in parts:
        out[row:row + len(part)] = part
        row += len(part)
    out.flush()
    return out


def _shard_order(shards: list[DenseIndex]) -> list[DenseIndex]:
    """Shards sorted by shard number, checking that 0..n-1 are all there once; other indexes as given."""
    if not all(isinstance(s.meta.get("shard"), dict) for s in shards):
        return shards
    counts = {s.meta["shard"]["count"] for s in shards}
    numbers = sorted(s.meta["shard"]["index"] for s in shards)
    if len(counts) != 1 or numbers != list(range(counts.pop())):
        found = ", ".join(f"{s.meta['shard']['index']}/{s.meta['shard']['count']}" for s in shards)
        raise ValueError(f"shards do not form one complete set 0/n..(n-1)/n: got {found}")
    return sorted(shards, key=lambda s: s.meta["shard"]["index"])


def merge_indexes(shard_folders: Sequence[str | Path], output: str | Path, index_type: str | None = None,
                  show_progress: bool = False, **params: int) -> DenseIndex:
    """Concatenate dense indexes (shards in shard order, else as given) into one index at ``output``.

    The merged index is rebuilt from the shards' raw vectors with :func:`build_index`, as ``index_type``
    (default: the shards' common type) with ``params`` (default: that type's defaults for the merged size), with
    its bar when ``show_progress``.
    """
    if not shard_folders:
        raise ValueError("no indexes to merge")
    shards = _shard_order([load_dense_index(f) for f in shard_folders])
    first = shards[0]
    for shard in shards[1:]:
        if shard.dim != first.dim:
            raise InputError(shard.folder, f"dimension {shard.dim} differs from {first.folder}'s {first.dim}")
        for key in SHARED_META:
            if shard.meta.get(key) != first.meta.get(key):
                raise InputError(shard.folder / META_FILE, f"{key} {shard.meta.get(key)!r} differs from "
                                                           f"{first.folder}'s {first.meta.get(key)!r}")
    holder: dict[str, int] = {}
    for number, shard in enumerate(shards):  # before any work: the merged index could not hold a passage twice
        for docid in shard.docids[::shard.vectors_per_passage]:
            if holder.setdefault(docid, number) != number:
                raise InputError(shard.folder / DOCID_FILE, f"docid {docid!r} is also in the merged "
                                                            f"{shards[holder[docid]].folder}")
    types = sorted({describe_index(s.index)[0] for s in shards})
    if index_type is None:
        if len(types) > 1:
            raise ValueError(f"indexes have different types ({', '.join(types)}); choose one for the merge")
        index_type = types[0]
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    scratch = output.with_name(f".{output.name}.vectors.npy")
    try:
        vectors = concat_vectors([stored_vectors(s) for s in shards], scratch)
        index = build_index(vectors, index_type, show_progress, **params)
        meta = {key: first.meta[key] for key in (*SHARED_META, "corpus") if key in first.meta}
        meta["merged_from"] = [str(s.folder) for s in shards]
        per = first.vectors_per_passage
        return write_dense_index(output, index, [d for s in shards for d in s.docids[::per]], meta,
                                 vectors_per_passage=per)
    finally:
        scratch.unlink(missing_ok=True)
