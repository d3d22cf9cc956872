"""Encode a corpus into a token index (:mod:`ance_ir.index.token_index`) with a late-interaction model (kind index
``tokens``, e.g. ``colbert``), in the resumable chunks of :func:`~ance_ir.encode.corpus_encoder.encode_chunks`
(``OUTPUT.partial/chunk-N.npy`` holds a chunk's float16 token vectors back to back, ``chunk-N.lens.npy`` each
passage's count). Once every chunk is done the centroids are trained on the token vectors (faiss k-means), every
token is assigned to its nearest one, and the folder is written at once; the token vectors are stacked into
``OUTPUT.partial/vectors.npy`` and read from there block by block, never held in memory whole, and the centroids
and each token's centroid are kept there too as they are made, so that a rerun interrupted after them goes on.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ance_ir.data import atomic_write, output_lock
from ance_ir.data.resume import kept_on_interrupt, open_work, work_folder
from ance_ir.encode.corpus_encoder import count_passages, encode_chunks, encode_job
from ance_ir.index import concat_vectors
from ance_ir.index.token_index import (
    TokenIndex,
    assign_centroids,
    default_centroids,
    train_centroids,
    write_token_index,
)

if TYPE_CHECKING:
    from ance_ir.modeling.colbert import ColBERT


def encode_tokens(corpus: str | Path, model: ColBERT, output: str | Path, *, encoder_name: str,
                  batch_size: int = 32, chunk_size: int = 2048, centroids: int | None = None, seed: int = 0,
                  overwrite: bool = False, show_progress: bool = True) -> TokenIndex:
    """Encode ``corpus`` with ``model`` into a token index folder at ``output``; ``centroids`` defaults to
    ColBERTv2's ``2^floor(log2(16 sqrt(tokens)))``. An existing ``output`` is replaced only with ``overwrite``."""
    if chunk_size < 1:
        raise ValueError(f"chunk size must be positive, got {chunk_size}")
    corpus, output = Path(corpus), Path(output)
    if output.exists() and not overwrite:
        raise ValueError(f"{output} already exists; pass --force to replace it")
    total = count_passages(corpus, show_progress)
    from ance_ir.modeling.inference import nested_progress

    job = encode_job(corpus, model, encoder_name, model.settings, chunk_size, batch_size, shard=None)

    def encode(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        vectors = model.encode_passages(texts, batch_size=batch_size, show_progress=nested_progress(show_progress))
        return (np.concatenate(vectors).astype(np.float16),
                np.array([len(v) for v in vectors], dtype=np.int32))

    with output_lock(output):  # one writer; its temporaries are ours to remove
        work = work_folder(output)
        open_work([output], work, job)
        docids, parts = encode_chunks(corpus, range(total), work, job, chunk_size, model.dim, encode,
                                      f"encode {output.name}", show_progress, tokens=True)
        vectors = concat_vectors([np.load(p, mmap_mode="r") for p in parts], work / "vectors.npy", np.float16)
        doclens = np.concatenate([np.load(p.with_name(p.stem + ".lens.npy")) for p in parts])
        count = centroids or default_centroids(len(vectors))
        if count > len(vectors):  # known only now; the encoded chunks stay for a rerun to go on from
            raise ValueError(f"--centroids {count}: more than the corpus's {len(vectors)} token vectors (they are "
                             f"kept in {work}: rerun with --centroids at most {len(vectors)} to index them)")
        print(f"k-means: {count} centroids over {len(vectors)} token vectors", file=sys.stderr)
        meta = {k: job[k] for k in ("encoder", "kind", "encoder_config", "corpus", "corpus_sha256")}
        meta["compression"] = None
        with kept_on_interrupt(work, "building the token index"):
            centers = _kept(work / f"centroids-{count}-seed{seed}.npy", lambda: train_centroids(vectors, count, seed))
            codes = _kept(work / f"codes-{count}-seed{seed}.npy",
                          lambda: assign_centroids(vectors, centers, show_progress))
            index = write_token_index(output, docids, doclens, centers, codes, meta, vectors=vectors)
        shutil.rmtree(work)
        return index


def _kept(path: Path, make: Callable[[], np.ndarray]) -> np.ndarray:
    """The array an earlier, interrupted build kept at ``path`` (its work folder's settings are those of this build),
    else ``make()``, kept there (atomically) for a rerun interrupted after it."""
    if path.is_file():
        return np.load(path)
    array = make()
    with atomic_write(path, "wb") as f:
        np.save(f, array)
    return array
