"""Token indexes (late interaction, ColBERT): every kept token vector of every passage, searchable by MaxSim.

A token index folder holds (``N`` passages, ``T`` token vectors of dimension ``D``, ``C`` centroids):

* ``meta.json``: ``index_type: tokens``, the model kind, encoder and its settings, the corpus and its sha256,
  ``count`` (N), ``tokens`` (T), ``dimension``, ``centroids`` (C), ``compression`` (null, or its bits and bucket
  cutoffs and weights);
* ``docid``: one passage id a line, in corpus order;
* ``doclens.npy``: int32 ``[N]``, the tokens kept of each passage (padding and punctuation are not stored);
* ``centroids.npy``: float32 ``[C, D]``, spherical k-means (faiss), ``C = 2^floor(log2(16 sqrt(T)))`` by default;
* ``codes.npy``: ``[T]``, each token's nearest centroid (uint16, int32 when ``C > 65536``): 2 bytes a token;
* ``vectors.npy``: float16 ``[T, D]``: ``2 D`` bytes a token (256 at D = 128); or, in a compressed index,
* ``residuals.npy``: uint8 ``[T, D b / 8]``, ``b`` bits a dimension: 32 bytes a token at D = 128, b = 2.

Passages' tokens lie back to back in corpus order (passage ``i`` at rows ``offsets[i]:offsets[i] + doclens[i]``).
The centroids (spherical k-means, faiss) serve candidate generation in every index: each query token's
``nprobe`` nearest centroids, and every passage with a token assigned to one of them, is a candidate; the
candidates are then scored exactly by MaxSim over their stored vectors. A compressed index
(:mod:`ance_ir.index.compress`, ColBERTv2) keeps a token as its centroid plus a ``b``-bit residual per dimension.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import faiss
import numpy as np
import torch

from ance_ir.data import InputError, atomic_directory
from ance_ir.data.lines import read_json_object, read_text
from ance_ir.data.resume import slow_bar
from ance_ir.index.dense_index import DOCID_FILE, check_docid, check_docid_lines, load_array
from ance_ir.index.records import META_FILE, check_model_record, index_record

INDEX_TYPE = "tokens"
DOCLENS_FILE, CENTROIDS_FILE, CODES_FILE = "doclens.npy", "centroids.npy", "codes.npy"
VECTORS_FILE, RESIDUALS_FILE = "vectors.npy", "residuals.npy"
_BLOCK = 65_536  # token vectors per block when assigning centroids or scanning the whole index


def default_centroids(tokens: int) -> int:
    """ColBERTv2's number of centroids for ``tokens`` token vectors: ``2^floor(log2(16 sqrt(tokens)))``, at most
    ``tokens``."""
    return max(1, min(tokens, 2 ** int(math.floor(math.log2(16 * math.sqrt(max(tokens, 1)))))))


def train_centroids(vectors: np.ndarray, count: int, seed: int = 0, iterations: int = 4,
                    sample: int = 2 ** 18) -> np.ndarray:
    """Spherical k-means centroids ``[count, D]`` (float32, unit length) of a sample of at most ``sample`` rows of
    ``vectors`` (faiss; ColBERTv2's 4 iterations by default)."""
    if not 1 <= count <= len(vectors):
        raise ValueError(f"cannot train {count} centroids on {len(vectors)} token vectors")
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(len(vectors), size=min(sample, len(vectors)), replace=False))
    train = np.ascontiguousarray(vectors[rows], dtype=np.float32)
    kmeans = faiss.Kmeans(train.shape[1], count, niter=iterations, seed=seed, spherical=True,
                          min_points_per_centroid=1, max_points_per_centroid=max(256, math.ceil(len(train) / count)))
    kmeans.train(train)
    return kmeans.centroids.astype(np.float32)


def assign_centroids(vectors: np.ndarray, centroids: np.ndarray, show_progress: bool = False) -> np.ndarray:
    """Each vector's nearest centroid by inner product, as the smallest unsigned type that holds the ids; a bar on
    stderr with ``show_progress`` once it takes more than ``BAR_DELAY_S``."""
    index = faiss.IndexFlatIP(centroids.shape[1])
    index.add(np.ascontiguousarray(centroids, dtype=np.float32))
    codes = np.empty(len(vectors), dtype=np.uint16 if len(centroids) <= 2 ** 16 else np.int32)
    with slow_bar(total=len(vectors), desc="assign centroids", unit="vector", show=show_progress) as bar:
        for start in range(0, len(vectors), _BLOCK):
            block = np.ascontiguousarray(vectors[start:start + _BLOCK], dtype=np.float32)
            codes[start:start + len(block)] = index.search(block, 1)[1][:, 0]
            bar.update(len(block))
    return codes


@dataclass
class TokenIndex:
    """A token index folder opened for search (arrays memory-mapped)."""

    folder: Path
    meta: dict[str, Any]
    docids: list[str]
    doclens: np.ndarray
    centroids: np.ndarray
    codes: np.ndarray
    vectors: np.ndarray | None = None
    residuals: np.ndarray | None = None
    offsets: np.ndarray = field(init=False, repr=False)
    _probe: faiss.Index | None = field(default=None, init=False, repr=False)
    _lists: tuple[np.ndarray, np.ndarray] | None = field(default=None, init=False, repr=False)
    _padded: np.ndarray | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.offsets = np.concatenate([[0], np.cumsum(self.doclens, dtype=np.int64)])

    def __len__(self) -> int:
        return len(self.docids)

    @property
    def dim(self) -> int:
        return self.centroids.shape[1]

    @property
    def compression(self) -> dict[str, Any] | None:
        return self.meta.get("compression")

    def token_vectors(self, rows: np.ndarray | slice) -> np.ndarray:
        """float32 token vectors of ``rows`` (decompressed from a compressed index)."""
        if self.vectors is not None:  # float16 to float32 by torch: twice numpy's speed on this conversion
            return torch.from_numpy(np.require(self.vectors[rows], requirements=["C", "W"])).float().numpy()
        from ance_ir.index.compress import decompress

        spec = self.compression
        return decompress(self.codes[rows], self.residuals[rows], self.centroids,
                          np.asarray(spec["weights"], np.float32), spec["bits"])

    def passage_rows(self, passages: np.ndarray) -> np.ndarray:
        """The token rows of ``passages`` (positions), passage after passage."""
        lengths = self.doclens[passages].astype(np.int64)
        starts = np.repeat(self.offsets[passages] - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
        return starts + np.arange(int(lengths.sum()))

    def padded_codes(self) -> np.ndarray:
        """``[N, longest doclen]``: each passage's token centroid ids, padded with ``C`` (no centroid); built once,
        uint16 while ``C < 65536`` (about 1.3x ``codes.npy`` at rag24-mini's lengths)."""
        if self._padded is None:
            dtype = np.uint16 if len(self.centroids) < 2 ** 16 else np.int32
            padded = np.full((len(self), int(self.doclens.max(initial=0))), len(self.centroids), dtype=dtype)
            column = np.arange(len(self.codes)) - np.repeat(self.offsets[:-1], self.doclens)
            padded[np.repeat(np.arange(len(self)), self.doclens), column] = self.codes
            self._padded = padded
        return self._padded

    def candidates(self, query: np.ndarray, nprobe: int) -> np.ndarray:
        """Positions of the passages with a token in one of the ``nprobe`` centroids nearest to a query token."""
        if self._probe is None:
            self._probe = faiss.IndexFlatIP(self.dim)
            self._probe.add(np.ascontiguousarray(self.centroids))
            order = np.argsort(self.codes, kind="stable")
            owner = np.repeat(np.arange(len(self), dtype=np.int32), self.doclens)
            bounds = np.searchsorted(self.codes[order], np.arange(len(self.centroids) + 1))
            self._lists = (owner[order], bounds)
        owners, bounds = self._lists
        probed = np.unique(self._probe.search(np.ascontiguousarray(query), min(nprobe, len(self.centroids)))[1])
        probed = probed[probed >= 0]
        return np.unique(np.concatenate([owners[bounds[c]:bounds[c + 1]] for c in probed]))


def write_token_index(folder: str | Path, docids: Sequence[str], doclens: np.ndarray, centroids: np.ndarray,
                      codes: np.ndarray, meta: dict[str, Any], vectors: np.ndarray | None = None,
                      residuals: np.ndarray | None = None) -> TokenIndex:
    """Write a token index folder atomically (``vectors`` float16, or ``residuals`` of a compressed index);
    ``meta`` is completed with the index type, dimension and counts. An existing folder is replaced."""
    docids = list(docids)
    if len(set(docids)) != len(docids):
        raise ValueError("a docid appears more than once")
    for docid in docids:
        check_docid(docid)
    tokens = int(np.sum(doclens))
    if len(doclens) != len(docids) or len(codes) != tokens:
        raise ValueError(f"{len(docids)} docids, {len(doclens)} passage lengths and {len(codes)} centroid codes "
                         f"for {tokens} tokens")
    meta = {**meta, "index_type": INDEX_TYPE, "dimension": int(centroids.shape[1]), "count": len(docids),
            "tokens": tokens, "centroids": len(centroids)}
    with atomic_directory(folder) as tmp:
        (tmp / DOCID_FILE).write_text("".join(f"{d}\n" for d in docids), encoding="utf-8")
        np.save(tmp / DOCLENS_FILE, np.asarray(doclens, dtype=np.int32))
        np.save(tmp / CENTROIDS_FILE, np.asarray(centroids, dtype=np.float32))
        np.save(tmp / CODES_FILE, codes)
        if vectors is not None:
            _save_blocks(tmp / VECTORS_FILE, vectors, np.float16)
        if residuals is not None:
            np.save(tmp / RESIDUALS_FILE, residuals)
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return load_token_index(folder)


def _save_blocks(path: Path, array: np.ndarray, dtype: type) -> None:
    """``array`` as a ``dtype`` ``.npy`` at ``path``, converted block by block (no full copy in memory)."""
    out = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=array.shape)
    for start in range(0, len(array), _BLOCK):
        out[start:start + _BLOCK] = array[start:start + _BLOCK]
    out.flush()
    del out


def is_token_index(folder: str | Path) -> bool:
    """Whether ``folder`` is a token index (its ``meta.json`` says ``index_type: tokens``)."""
    record = index_record(folder)
    return record is not None and record.get("index_type") == INDEX_TYPE


def load_token_index(folder: str | Path) -> TokenIndex:
    """Open a token index folder; InputError naming the file that is missing or disagrees with the others."""
    folder = Path(folder)
    meta_path = folder / META_FILE
    if not folder.is_dir():
        raise InputError(folder, "no such token index folder")
    if not meta_path.is_file():
        raise InputError(meta_path, "missing: not a token index (one has a meta.json with index_type: tokens)")
    meta = read_json_object(meta_path)
    if meta.get("index_type") != INDEX_TYPE:
        raise InputError(meta_path, f"index_type {meta.get('index_type')!r}: not a token index (index_type: tokens)")
    check_model_record(meta_path, meta)
    compressed = meta.get("compression") is not None
    needed = (DOCID_FILE, DOCLENS_FILE, CENTROIDS_FILE, CODES_FILE, RESIDUALS_FILE if compressed else VECTORS_FILE)
    for name in needed:
        if not (folder / name).is_file():
            raise InputError(folder / name, "missing from the token index")
    docids = read_text(folder / DOCID_FILE).splitlines()
    arrays = {name: load_array(folder / name) for name in needed[1:]}
    doclens = np.asarray(arrays[DOCLENS_FILE], dtype=np.int64)
    stored = arrays[needed[-1]]
    for path, found, expected in ((folder / DOCID_FILE, len(docids), meta.get("count")),
                                  (folder / DOCLENS_FILE, len(doclens), meta.get("count")),
                                  (folder / CODES_FILE, len(arrays[CODES_FILE]), meta.get("tokens")),
                                  (folder / needed[-1], len(stored), meta.get("tokens")),
                                  (folder / DOCLENS_FILE, int(doclens.sum()), meta.get("tokens"))):
        if found != expected:
            raise InputError(path, f"holds {found} entries, {meta_path} says {expected}")
    check_docid_lines(folder / DOCID_FILE, docids)
    _check_arrays(folder, meta, arrays, compressed)
    return TokenIndex(folder, meta, docids, doclens, np.asarray(arrays[CENTROIDS_FILE]), arrays[CODES_FILE],
                      None if compressed else stored, stored if compressed else None)


def _check_arrays(folder: Path, meta: dict, arrays: dict[str, np.ndarray], compressed: bool) -> None:
    """InputError naming the array whose shape disagrees with ``meta.json`` (dimension, centroids, residual bits)
    or whose centroid codes point past the centroids."""
    dim, centroids = meta.get("dimension"), arrays[CENTROIDS_FILE]
    stored, width = (RESIDUALS_FILE, -(-dim * meta["compression"]["bits"] // 8)) if compressed else (VECTORS_FILE, dim)
    for name, shape, expected in ((CENTROIDS_FILE, centroids.shape, (meta.get("centroids"), dim)),
                                  (stored, arrays[stored].shape[1:], (width,))):
        if tuple(shape) != expected:
            raise InputError(folder / name, f"has shape {tuple(shape)}, {folder / META_FILE} says {expected}")
    codes = arrays[CODES_FILE]
    if len(codes) and int(codes.max()) >= len(centroids):
        raise InputError(folder / CODES_FILE, f"holds centroid id {int(codes.max())}, but the index has "
                                              f"{len(centroids)} centroids (ids 0 to {len(centroids) - 1})")
