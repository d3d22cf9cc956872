"""Resumable pair scoring for ``python -m ance_ir.rerank``.

The (query, passage) pairs are scored in chunks of ``chunk_size`` pairs, each chunk's scores kept in the work folder
beside the output (``OUTPUT.partial/scores-00000.npy``, see :mod:`ance_ir.data.resume`) until the output is
written: an interrupted run scores only the pairs it had not reached and writes what an uninterrupted run writes.
A rerun with another model folder or the same folder holding other weights (a model trained again in place), device,
precision, batch size or other pairs is refused.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from ance_ir.data import InputError, atomic_write
from ance_ir.data.checksum import sha256_json_items
from ance_ir.data.resume import ChunkedJob, in_chunks, open_work, work_folder

PAIR_CHUNK = 10_000  # pairs scored (and kept) together: 100 queries at depth 100


class ChunkedScorer:
    """``model.score_pairs`` for a run writing ``output``, in kept chunks of ``chunk_size`` pairs.

    ``settings`` (the model's folder, its kind, the device, ...) and the pairs' texts decide whether kept chunks may
    be reused (:func:`~ance_ir.data.resume.open_work`). Used as a context manager around the scoring and the
    output's writing, under the output's lock (:func:`~ance_ir.data.output_lock`, the caller's): the kept chunks go
    when the block ends without an error.
    """

    def __init__(self, model: Any, output: str | Path, settings: dict[str, Any], chunk_size: int = PAIR_CHUNK):
        if chunk_size < 1:
            raise ValueError(f"chunk size must be positive, got {chunk_size}")
        self.model, self.output, self.settings = model, Path(output), settings
        self.work, self.chunk_size = work_folder(output), chunk_size

    def __enter__(self) -> ChunkedScorer:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if kind is None:
            shutil.rmtree(self.work, ignore_errors=True)

    def score_pairs(self, queries: Sequence[str], passages: Sequence[str], batch_size: int = 32,
                    precision: str | None = None, show_progress: bool = False) -> np.ndarray:
        """The model's scores of the pairs ``(queries[i], passages[i])``, float32 ``[N]``, chunk by chunk."""
        from ance_ir.modeling.inference import model_precision, nested_progress

        job = {**self.settings, "precision": model_precision(self.model, precision), "batch_size": batch_size,
               "chunk_size": self.chunk_size, "pairs": len(queries),
               "pairs_sha256": sha256_json_items(zip(queries, passages, strict=True))}
        open_work([self.output], self.work, job, "reranking")
        several = len(queries) > self.chunk_size  # one chunk: the model's own bar is the only one

        def path(number: int) -> Path:
            return self.work / f"scores-{number:05d}.npy"

        def load(number: int, chunk: list[tuple[str, str]]) -> np.ndarray | None:
            if not path(number).is_file():
                return None
            scores = np.load(path(number))
            if scores.shape != (len(chunk),):
                raise InputError(path(number), f"holds {scores.shape} scores, expected {(len(chunk),)}; delete "
                                               f"{self.work}")
            return scores

        def compute(chunk: list[tuple[str, str]]) -> np.ndarray:
            return self.model.score_pairs([q for q, _ in chunk], [p for _, p in chunk], batch_size=batch_size,
                                          precision=precision,
                                          show_progress=nested_progress(show_progress) if several else show_progress)

        def save(number: int, chunk: list[tuple[str, str]], scores: np.ndarray) -> None:
            with atomic_write(path(number), "wb") as f:
                np.save(f, scores)

        with ChunkedJob(self.work, job, len(queries), "score pairs", load=load, compute=compute, save=save,
                        verb="scored", unit="pairs", bar_unit="pair",
                        show_progress=show_progress and several) as chunked:
            parts = [chunked.chunk(number, chunk)
                     for number, chunk in enumerate(in_chunks(zip(queries, passages, strict=True), self.chunk_size))]
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.float32)
