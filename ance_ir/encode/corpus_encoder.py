"""Encode a corpus into a dense index in resumable chunks.

Finished chunks go to a work folder beside the output (``indexes/NAME.partial/chunk-00000.npy`` plus
``chunk-00000.docid``, each written atomically, the ``.docid`` first), so an interrupted run picks up
from its last finished chunk. ``job.json`` there records the corpus hash, encoder (its weights' hash too) and
sharding; a run that does not match it is refused. The work folder is removed once the index is written.

A shard ``i/n`` covers a contiguous range of corpus positions, ``[i*N//n, (i+1)*N//n)``, so shards
merged in shard order list the passages in corpus order, exactly like an unsharded run. Under torchrun
each process encodes ``Shard(rank, world_size)`` (see :mod:`ance_ir.encode.distributed`).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ance_ir.data import InputError, atomic_write, iter_corpus, output_lock, sha256_file
from ance_ir.data.resume import ChunkedJob, in_chunks, kept_on_interrupt, open_work, work_folder
from ance_ir.index import INDEX_TYPES, DenseIndex, build_index, check_docid, concat_vectors, write_dense_index

if TYPE_CHECKING:
    from ance_ir.data import Passage
    from ance_ir.modeling import DenseEncoder


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count``: a contiguous slice of the corpus positions."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.count:
            raise ValueError(f"shard {self} needs 0 <= i < n")

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @classmethod
    def parse(cls, spec: str) -> Shard:
        """Parse ``"i/n"``, e.g. ``"0/4"``."""
        parts = spec.split("/")
        if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
            raise ValueError(f"shard {spec!r} must look like i/n, e.g. 0/4")
        return cls(int(parts[0]), int(parts[1]))

    def positions(self, total: int) -> range:
        """The corpus positions of this shard in a corpus of ``total`` passages."""
        return range(self.index * total // self.count, (self.index + 1) * total // self.count)


def count_passages(corpus: Path, show_progress: bool = False) -> int:
    """Read the whole corpus once, so any bad line is reported before encoding starts (a bar on stderr with
    ``show_progress`` once it takes more than ``BAR_DELAY_S``)."""
    n = 0
    for passage in iter_corpus(corpus, show_progress, desc="check corpus"):
        try:
            check_docid(passage.docid)
        except ValueError as e:
            raise InputError(corpus, str(e)) from None
        n += 1
    return n


def _chunk_paths(work: Path, number: int) -> tuple[Path, Path]:
    stem = work / f"chunk-{number:05d}"
    return stem.with_suffix(".npy"), stem.with_suffix(".docid")


def _lengths_path(work: Path, number: int) -> Path:
    """A token chunk's passage token counts (``chunk-00000.lens.npy``)."""
    return work / f"chunk-{number:05d}.lens.npy"


def _finished_chunk(work: Path, number: int, docids: list[str], dim: int, per: int = 1, tokens: bool = False) -> bool:
    """Whether chunk ``number`` is on disk; checks it holds ``docids`` and vectors of dimension ``dim`` (``per`` a
    passage, or with ``tokens`` as many as its ``.lens.npy`` counts)."""
    vectors_path, docid_path = _chunk_paths(work, number)
    if not vectors_path.is_file():
        return False
    if docid_path.read_text(encoding="utf-8").splitlines() != docids:
        raise InputError(docid_path, f"does not match the corpus passages of this chunk; delete {work}")
    rows = len(docids) * per
    if tokens:
        lengths = np.load(_lengths_path(work, number))
        if lengths.shape != (len(docids),):
            raise InputError(_lengths_path(work, number), f"has shape {lengths.shape}, expected "
                                                          f"{(len(docids),)}; delete {work}")
        rows = int(lengths.sum())
    shape = np.load(vectors_path, mmap_mode="r").shape
    if shape != (rows, dim):
        raise InputError(vectors_path, f"has shape {shape}, expected {(rows, dim)}; delete {work}")
    return True


def _save_chunk(work: Path, number: int, vectors: np.ndarray, docids: list[str],
                lengths: np.ndarray | None = None) -> None:
    """Write a chunk: ids first, then the token counts (if any), the vectors last (what marks it finished)."""
    vectors_path, docid_path = _chunk_paths(work, number)
    with atomic_write(docid_path) as f:
        f.writelines(f"{d}\n" for d in docids)
    if lengths is not None:
        with atomic_write(_lengths_path(work, number), "wb") as f:
            np.save(f, lengths)
    with atomic_write(vectors_path, "wb") as f:
        np.save(f, vectors)


def encode_job(corpus: Path, model: Any, encoder_name: str, settings: dict[str, Any], chunk_size: int,
               batch_size: int, **more: Any) -> dict[str, Any]:
    """The settings that decide an encoded corpus, recorded in its work folder: the corpus and its bytes, the model's
    name, kind, ``settings`` and weights (:func:`~ance_ir.modeling.inference.weights_sha256`), the chunking, batch
    size, precision and kind of device (bf16 on a CPU and on a GPU round differently), and the encoder's ``more``."""
    from ance_ir.modeling.inference import model_precision, weights_sha256

    device = getattr(model, "device", None)
    return {"corpus": str(corpus.resolve()), "corpus_sha256": sha256_file(corpus), "encoder": encoder_name,
            "weights_sha256": weights_sha256(model), "kind": model.kind, "encoder_config": settings,
            **more, "chunk_size": chunk_size, "batch_size": batch_size, "precision": model_precision(model),
            "device": device.type if device is not None else None}


def encode_chunks(corpus: Path, positions: range, work: Path, job: dict[str, Any], chunk_size: int, dim: int,
                  encode: Callable[[list[str]], tuple[np.ndarray, np.ndarray | None]], desc: str,
                  show_progress: bool = True, tokens: bool = False, per: int = 1) -> tuple[list[str], list[Path]]:
    """Encode the passages at ``positions`` of ``corpus`` chunk by chunk into ``work``, reusing finished chunks.

    ``encode(texts)`` gives a chunk's vectors (``per`` rows a passage) and, with ``tokens`` (token vectors, stored
    back to back), each passage's token count (else None). The caller opens ``work`` first
    (:func:`~ance_ir.data.resume.open_work`: a resumed job's settings checked).
    Returns the docids and the chunks' vector files, in corpus order.
    """
    def load(number: int, chunk: list[Passage]) -> bool | None:
        return _finished_chunk(work, number, [p.docid for p in chunk], dim, per, tokens) or None

    def save(number: int, chunk: list[Passage], encoded: tuple[np.ndarray, np.ndarray | None]) -> None:
        _save_chunk(work, number, encoded[0], [p.docid for p in chunk], encoded[1])

    docids: list[str] = []
    parts: list[Path] = []
    passages = islice(iter_corpus(corpus), positions.start, positions.stop)
    with ChunkedJob(work, job, len(positions), desc, load=load, compute=lambda chunk: encode([p.text for p in chunk]),
                    save=save, show_progress=show_progress) as chunked:
        for number, chunk in enumerate(in_chunks(passages, chunk_size)):
            chunked.chunk(number, chunk)
            docids += [p.docid for p in chunk]
            parts.append(_chunk_paths(work, number)[0])
    return docids, parts


def encode_corpus(corpus: str | Path, encoder: DenseEncoder, output: str | Path, *, encoder_name: str,
                  index_type: str = "flat", batch_size: int = 32, chunk_size: int = 2048,
                  shard: Shard | None = None, overwrite: bool = False,
                  show_progress: bool = True) -> DenseIndex:
    """Encode ``corpus`` (or one shard of it) with ``encoder`` and write a dense index folder at ``output``.

    Resumes from the finished chunks in :func:`work_folder` ``(output)``. A shard keeps its raw
    ``vectors.npy`` so that shards can later be merged into any index type. An existing ``output`` is
    replaced only with ``overwrite``. An encoder of several vectors per passage (``vectors_per_passage``, ME-BERT)
    writes them as consecutive rows (see :func:`~ance_ir.index.write_dense_index`).
    """
    if chunk_size < 1:
        raise ValueError(f"chunk size must be positive, got {chunk_size}")
    if index_type not in INDEX_TYPES:
        raise ValueError(f"unknown index type {index_type!r}; choose from {', '.join(INDEX_TYPES)}")
    corpus, output = Path(corpus), Path(output)
    if output.exists() and not overwrite:
        raise ValueError(f"{output} already exists; pass --force to replace it")
    with output_lock(output):
        return _encode_locked(corpus, encoder, output, encoder_name=encoder_name, index_type=index_type,
                              batch_size=batch_size, chunk_size=chunk_size, shard=shard, show_progress=show_progress)


def _encode_locked(corpus: Path, encoder: DenseEncoder, output: Path, *, encoder_name: str, index_type: str,
                   batch_size: int, chunk_size: int, shard: Shard | None, show_progress: bool) -> DenseIndex:
    total = count_passages(corpus, show_progress)
    positions = shard.positions(total) if shard else range(total)
    if not positions:
        raise ValueError(f"shard {shard} of {corpus} ({total} passages) is empty; use fewer shards")
    job = encode_job(corpus, encoder, encoder_name, encoder.config.to_dict(), chunk_size, batch_size,
                     shard=str(shard) if shard else None)
    per = getattr(encoder, "vectors_per_passage", 1)
    if per > 1:
        job["vectors_per_passage"] = per
    work = work_folder(output)
    open_work([output], work, job)
    docids, parts = encode_chunks(corpus, positions, work, job, chunk_size, encoder.dim,
                                  lambda texts: (encoder.encode_passages(texts, batch_size=batch_size,
                                                                         show_progress=show_progress)
                                                 .reshape(-1, encoder.dim), None),
                                  f"encode {output.name}", show_progress, per=per)
    meta = {**{k: job[k] for k in ("encoder", "weights_sha256", "kind", "encoder_config", "corpus", "corpus_sha256",
                                   "precision")},
            "pooling": encoder.config.pooling, "normalize": encoder.config.normalize,
            "shard": {"index": shard.index, "count": shard.count, "start": positions.start, "stop": positions.stop,
                      **{k: job[k] for k in ("batch_size", "chunk_size", "device")}} if shard else None}
    with kept_on_interrupt(work, f"building the {index_type} index"):
        vectors = concat_vectors([np.load(p, mmap_mode="r") for p in parts], work / "vectors.npy")
        dense = write_dense_index(output, build_index(vectors, index_type, show_progress), docids, meta,
                                  vectors=vectors if shard else None, vectors_per_passage=per)
    shutil.rmtree(work)
    return dense
