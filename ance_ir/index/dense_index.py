"""Dense indexes on disk in Pyserini's layout: a folder with ``index`` (faiss) and ``docid`` (one id a line).

Pyserini's ``FaissSearcher(folder, query_encoder)`` reads exactly those two files. ance-ir adds
``meta.json`` (encoder, corpus, index settings) and, for shards, the raw ``vectors.npy`` that lets
:func:`merge_indexes` rebuild any index type.
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
from ance_ir.index.faiss_index import build_index, describe_index, to_gpu

INDEX_FILE, DOCID_FILE, META_FILE, VECTORS_FILE = "index", "docid", "meta.json", "vectors.npy"
# meta.json fields that merged indexes must agree on (a merged index inherits them and "corpus")
SHARED_META = ("encoder", "kind", "encoder_config", "pooling", "normalize", "corpus_sha256")


def check_docid(docid: str) -> None:
    """Raise ValueError for an id the ``docid`` file or a TREC run cannot hold (empty or with whitespace)."""
    if docid.split() != [docid]:
        raise ValueError(f"docid {docid!r} is empty or contains whitespace, which a dense index cannot store")


@dataclass
class DenseIndex:
    """A faiss inner-product index, its docids in faiss row order, and its ``meta.json``."""

    index: faiss.Index
    docids: list[str]
    meta: dict[str, Any] = field(default_factory=dict)
    folder: Path | None = None
    _searchable: faiss.Index | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def dim(self) -> int:
        return self.index.d

    def __len__(self) -> int:
        return self.index.ntotal

    def search(self, queries: np.ndarray, k: int = 10) -> tuple[np.ndarray, list[list[str]]]:
        """Top-``k`` hits by inner product for each query vector (``[Q, D]``, or one ``[D]`` vector).

        Returns scores ``[Q, min(k, N)]`` and each query's docids, best first. A query with fewer hits
        (possible with IVF-PQ) gets a shorter docid list and ``-inf`` for the missing scores.
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
        k = min(k, len(self))
        if k == 0:
            return np.empty((len(queries), 0), np.float32), [[] for _ in queries]
        if self._searchable is None:
            self._searchable = to_gpu(self.index)
        scores, rows = self._searchable.search(np.ascontiguousarray(queries), k)
        scores[rows < 0] = -np.inf
        return scores, [[self.docids[r] for r in row if r >= 0] for row in rows]


def write_dense_index(folder: str | Path, index: faiss.Index, docids: Sequence[str],
                      meta: dict[str, Any] | None = None, vectors: np.ndarray | None = None) -> DenseIndex:
    """Write ``index``, ``docid`` and ``meta.json`` (plus ``vectors.npy`` if given) as one atomic folder.

    ``index`` must be a CPU index. ``meta`` is completed with ``index_type``, ``index_params``,
    ``dimension`` and ``count`` read from the index itself. An existing folder is replaced.
    """
    docids = list(docids)
    if len(docids) != index.ntotal:
        raise ValueError(f"{len(docids)} docids for an index of {index.ntotal} vectors")
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
    with atomic_directory(folder) as tmp:
        faiss.write_index(index, str(tmp / INDEX_FILE))
        (tmp / DOCID_FILE).write_text("".join(f"{d}\n" for d in docids), encoding="utf-8")
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        if vectors is not None:
            np.save(tmp / VECTORS_FILE, vectors)
    return DenseIndex(index, docids, meta, Path(folder))


def _read_meta(path: Path) -> dict[str, Any]:
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(path, f"not valid JSON ({e})") from None
    if not isinstance(meta, dict):
        raise InputError(path, "expected a JSON object")
    return meta


def load_dense_index(folder: str | Path) -> DenseIndex:
    """Open a dense index folder (ours or Pyserini's); ``meta.json`` is optional.

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
        index = faiss.read_index(str(index_path))
    except RuntimeError as e:
        reason = str(e).strip().splitlines()[-1]
        raise InputError(index_path, f"not a readable faiss index ({reason})") from None
    lines = docid_path.read_text(encoding="utf-8").split("\n")
    docids = [line.rstrip() for line in (lines[:-1] if lines[-1] == "" else lines)]
    if len(docids) != index.ntotal:
        raise InputError(docid_path, f"has {len(docids)} docids, but {index_path} holds "
                                     f"{index.ntotal} vectors")
    meta = _read_meta(meta_path) if meta_path.is_file() else {}
    for key, actual in (("dimension", index.d), ("count", index.ntotal)):
        if key in meta and meta[key] != actual:
            raise InputError(meta_path, f"says {key} {meta[key]} but {index_path} has {actual}")
    return DenseIndex(index, docids, meta, folder)


def stored_vectors(dense: DenseIndex) -> np.ndarray:
    """The raw vectors of an index: its ``vectors.npy`` (memory-mapped), or read back from flat/HNSW."""
    path = dense.folder / VECTORS_FILE if dense.folder else None
    if path is not None and path.is_file():
        vectors = np.load(path, mmap_mode="r")
        if vectors.shape != (len(dense), dense.dim):
            raise InputError(path, f"has shape {vectors.shape}, index holds ({len(dense)}, {dense.dim})")
        return vectors
    if isinstance(dense.index, faiss.IndexFlat | faiss.IndexHNSWFlat):
        return dense.index.reconstruct_n(0, len(dense))
    index_type = describe_index(dense.index)[0]
    raise InputError(dense.folder or "index", f"no {VECTORS_FILE}, and its {index_type} index cannot give "
                                              "back its vectors; encode shards with --shard to keep them")


def concat_vectors(parts: Sequence[np.ndarray], path: str | Path) -> np.ndarray:
    """Stack row blocks into a float32 ``.npy`` at ``path`` and return it memory-mapped (no copy in RAM)."""
    dims = {part.shape[1] for part in parts}
    if len(dims) != 1:
        raise ValueError(f"cannot stack vectors of different dimensions {sorted(dims)}")
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32,
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
                  **params: int) -> DenseIndex:
    """Concatenate dense indexes (shards in shard order, else as given) into one index at ``output``.

    The merged index is rebuilt from the shards' raw vectors with :func:`build_index`, as ``index_type``
    (default: the shards' common type) with ``params`` (default: that type's defaults for the merged size).
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
        index = build_index(vectors, index_type, **params)
        meta = {key: first.meta[key] for key in (*SHARED_META, "corpus") if key in first.meta}
        meta["merged_from"] = [str(s.folder) for s in shards]
        return write_dense_index(output, index, [d for s in shards for d in s.docids], meta)
    finally:
        scratch.unlink(missing_ok=True)
