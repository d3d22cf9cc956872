"""Inner-product faiss indexes: flat (exact), HNSW and IVF-PQ, built on a GPU when faiss sees one."""

from __future__ import annotations

import functools
import math
import sys
import warnings
from typing import Any

import faiss
import numpy as np

from ance_ir.data.resume import slow_bar

INDEX_TYPES = ("flat", "hnsw", "ivfpq")
HNSW_DEFAULTS = {"m": 32, "ef_construction": 200, "ef_search": 128}
ADD_BATCH = 65536  # rows copied into faiss at a time, so memory-mapped vectors are never loaded whole
MIN_POINTS_PER_LIST = 39  # faiss k-means wants at least this many training points per centroid
GPU_FLOAT32_PQ_MAX_M = 48  # the most IVF-PQ sub-quantizers faiss-GPU takes with float32 lookup tables


def ivfpq_defaults(n: int, dim: int) -> dict[str, int]:
    """IVF-PQ settings for ``n`` vectors of dimension ``dim``.

    ``nlist`` is about 4*sqrt(n), capped so each list gets 39 training points; ``m`` gives 4 dimensions
    per sub-quantizer (the largest divisor of ``dim`` not above dim/4); ``nbits`` is 8, or fewer when
    there are under 256 vectors to train on (not capped at 39 points a code: 6,011 vectors train 256 codes per
    sub-quantizer); ``nprobe`` searches 1/16 of the lists, at least 16.
    """
    nlist = max(1, min(round(4 * math.sqrt(n)), n // MIN_POINTS_PER_LIST))
    m = max(d for d in range(1, max(1, dim // 4) + 1) if dim % d == 0)
    return {"nlist": nlist, "m": m, "nbits": max(1, min(8, int(math.log2(max(n, 1))))),
            "nprobe": min(nlist, max(16, nlist // 16))}


def _check_params(index_type: str, params: dict[str, Any], allowed: dict[str, Any]) -> dict[str, int]:
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        known = ", ".join(allowed) or "none"
        raise ValueError(f"unknown {index_type} parameter(s) {', '.join(unknown)}; known: {known}")
    merged = {**allowed, **params}
    for key, value in merged.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{index_type} parameter {key} must be a positive integer, got {value!r}")
    return merged


@functools.cache
def _gpu_resources(gpu: int) -> Any:
    return faiss.StandardGpuResources()


def faiss_gpu(device: Any) -> int | None:
    """The GPU faiss should use beside a model on the torch ``device``: its own (the current one for plain
    ``cuda``), or None (the CPU) for any other device."""
    if getattr(device, "type", None) != "cuda":
        return None
    if device.index is not None:
        return device.index
    import torch

    return torch.cuda.current_device()


def to_gpu(index: faiss.Index, gpu: int | None = 0) -> faiss.Index:
    """A copy of a flat or IVF index on faiss GPU ``gpu`` when faiss sees GPUs; otherwise (``gpu`` None, or
    HNSW) ``index`` itself."""
    if gpu is None or faiss.get_num_gpus() == 0 or isinstance(index, faiss.IndexHNSW):
        return index
    options = faiss.GpuClonerOptions()
    # faiss-GPU's IVF-PQ keeps its lookup tables in shared memory: float32 ones fit at most 48 sub-quantizers,
    # float16 ones 56, 64 and 96 (the default m of 384-d vectors)
    options.useFloat16 = isinstance(index, faiss.IndexIVFPQ) and index.pq.M > GPU_FLOAT32_PQ_MAX_M
    try:
        return faiss.index_cpu_to_gpu(_gpu_resources(gpu), gpu, index, options)
    except RuntimeError as e:  # e.g. an IVF-PQ layout the GPU kernels do not support
        warnings.warn(f"faiss GPU cannot hold this {type(index).__name__} ({e}); using the CPU", stacklevel=2)
        return index


def _add(index: faiss.Index, vectors: np.ndarray, desc: str, show_progress: bool) -> None:
    """Add ``vectors`` to ``index`` ``ADD_BATCH`` rows at a time, with a bar (``desc``) on stderr when
    ``show_progress`` and the adding takes more than ``BAR_DELAY_S``."""
    with slow_bar(total=len(vectors), desc=desc, unit="vector", show=show_progress) as bar:
        for start in range(0, len(vectors), ADD_BATCH):
            batch = np.ascontiguousarray(vectors[start:start + ADD_BATCH], dtype=np.float32)
            if not np.isfinite(batch).all():
                raise ValueError(f"vectors contain NaN or infinity (in rows {start}..{start + len(batch) - 1})")
            index.add(batch)
            bar.update(len(batch))


def _training_sample(vectors: np.ndarray, size: int) -> np.ndarray:
    if len(vectors) <= size:
        return np.ascontiguousarray(vectors, dtype=np.float32)
    rows = np.sort(np.random.default_rng(0).choice(len(vectors), size, replace=False))
    return np.ascontiguousarray(vectors[rows], dtype=np.float32)


def _build_ivfpq(vectors: np.ndarray, show_progress: bool, nlist: int, m: int, nbits: int,
                 nprobe: int) -> faiss.Index:
    n, dim = vectors.shape
    if dim % m:
        raise ValueError(f"ivfpq m={m} must divide the vector dimension {dim}")
    if nlist > n or 2 ** nbits > n:
        raise ValueError(f"ivfpq with nlist={nlist}, nbits={nbits} needs at least {max(nlist, 2 ** nbits)} "
                         f"vectors to train on, got {n}")
    index = faiss.IndexIVFPQ(faiss.IndexFlatIP(dim), dim, nlist, m, nbits, faiss.METRIC_INNER_PRODUCT)
    index.nprobe = min(nprobe, nlist)
    # 2^nbits codes from fewer than faiss's 39 points a code (8 bits below 9,984 vectors), or one list from fewer
    # than 39 vectors, is ivfpq_defaults' choice: no warning from the lists' and each sub-quantizer's k-means (only
    # the warning goes: the index is the same)
    index.cp.min_points_per_centroid = index.pq.cp.min_points_per_centroid = 1
    work = to_gpu(index)
    if show_progress:
        print(f"training IVF-PQ ({nlist} lists, {m} sub-quantizers of {2 ** nbits} codes) ...", file=sys.stderr)
    work.train(_training_sample(vectors, 256 * max(nlist, 2 ** nbits)))
    _add(work, vectors, "build ivfpq index", show_progress)
    return index if work is index else faiss.index_gpu_to_cpu(work)


def build_index(vectors: np.ndarray, index_type: str = "flat", show_progress: bool = False,
                **params: int) -> faiss.Index:
    """Build a CPU inner-product index over ``vectors`` (``[N, D]``; row i becomes faiss id i).

    ``flat``: exact ``IndexFlatIP``. ``hnsw``: ``IndexHNSWFlat`` with ``m`` (neighbours, 32),
    ``ef_construction`` (200) and ``ef_search`` (128). ``ivfpq``: ``IndexIVFPQ`` with ``nlist``, ``m``
    (sub-quantizers, must divide D), ``nbits`` and ``nprobe``, trained on the vectors; defaults from
    :func:`ivfpq_defaults`. IVF-PQ trains and encodes on a GPU when faiss has one and its kernels take the layout
    (faiss-GPU takes up to 48 sub-quantizers with float32 lookup tables, 56, 64 or 96 with the float16 ones
    :func:`to_gpu` then asks for; unverified here, no GPU), else on the CPU with a warning: 768-d vectors' default
    m of 192 is one of those.
    ``show_progress``: a bar on stderr for a build that takes more than ``BAR_DELAY_S`` (HNSW's graph, IVF-PQ's
    encoding), a line before IVF-PQ's training.
    """
    if index_type not in INDEX_TYPES:
        raise ValueError(f"unknown index type {index_type!r}; choose from {', '.join(INDEX_TYPES)}")
    if vectors.ndim != 2 or len(vectors) == 0 or vectors.shape[1] == 0:
        raise ValueError(f"expected a non-empty [N, D] matrix of vectors, got shape {vectors.shape}")
    n, dim = vectors.shape
    if index_type == "flat":
        _check_params(index_type, params, {})
        index = faiss.IndexFlatIP(dim)
    elif index_type == "hnsw":
        p = _check_params(index_type, params, HNSW_DEFAULTS)
        index = faiss.IndexHNSWFlat(dim, p["m"], faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = p["ef_construction"]
        index.hnsw.efSearch = p["ef_search"]
    else:
        return _build_ivfpq(vectors, show_progress, **_check_params(index_type, params, ivfpq_defaults(n, dim)))
    _add(index, vectors, f"build {index_type} index", show_progress)
    return index


def describe_index(index: faiss.Index) -> tuple[str, dict[str, int]]:
    """The index type and parameters of a faiss index (``type(index).__name__`` and ``{}`` for others)."""
    if isinstance(index, faiss.IndexHNSWFlat):
        return "hnsw", {"m": index.hnsw.nb_neighbors(1), "ef_construction": index.hnsw.efConstruction,
                        "ef_search": index.hnsw.efSearch}
    if isinstance(index, faiss.IndexIVFPQ):
        return "ivfpq", {"nlist": index.nlist, "m": index.pq.M, "nbits": index.pq.nbits,
                         "nprobe": index.nprobe}
    if isinstance(index, faiss.IndexFlat) and index.metric_type == faiss.METRIC_INNER_PRODUCT:
        return "flat", {}
    return type(index).__name__, {}
