"""Encode a corpus into a Lucene impact index (:mod:`ance_ir.index.impact`) with a learned-sparse model (kind index
``impact``, e.g. ``splade``), in resumable chunks: ``OUTPUT.partial/collection/part-NNNNN.jsonl`` holds a finished
chunk's ``JsonVectorCollection`` lines (written atomically; ``job.json`` there records the corpus hash, encoder and
scale, and a run that does not match it is refused). Once every chunk is done, Pyserini indexes the collection and the
folder is moved into place at once.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from ance_ir.bm25.index import run_lucene_indexer
from ance_ir.data import InputError, atomic_directory, atomic_write, iter_corpus, output_lock
from ance_ir.data.resume import ChunkedJob, in_chunks, kept_on_interrupt, open_work, work_folder
from ance_ir.encode.corpus_encoder import count_passages, encode_job
from ance_ir.index.impact import (
    COLLECTION,
    LUCENE,
    check_vector_collection,
    vector_line,
)
from ance_ir.index.records import META_FILE, folder_bytes
from ance_ir.modeling.inference import nested_progress
from ance_ir.modeling.splade import DEFAULT_SCALE, quantize

if TYPE_CHECKING:
    from ance_ir.data import Passage
    from ance_ir.modeling.splade import Splade


def encode_impacts(corpus: str | Path, model: Splade, output: str | Path, *, encoder_name: str,
                   scale: float = DEFAULT_SCALE, batch_size: int = 32, chunk_size: int = 2048,
                   threads: int = 1, overwrite: bool = False, show_progress: bool = True) -> dict:
    """Encode ``corpus`` with ``model`` into an impact index folder at ``output`` (impacts ``round(scale * w)``);
    returns its ``meta.json``. An existing ``output`` is replaced only with ``overwrite``."""
    if chunk_size < 1:
        raise ValueError(f"chunk size must be positive, got {chunk_size}")
    if not scale > 0:
        raise ValueError(f"scale must be positive, got {scale}")
    corpus, output = Path(corpus), Path(output)
    if output.exists() and not overwrite:
        raise ValueError(f"{output} already exists; pass --force to replace it")
    with output_lock(output):
        total = count_passages(corpus, show_progress)
        job = encode_job(corpus, model, encoder_name, model.settings, chunk_size, batch_size, scale=scale)
        work = work_folder(output)
        open_work([output], work, job)
        parts = work / COLLECTION

        def load(number: int, chunk: list[Passage]) -> int | None:
            part = parts / f"part-{number:05d}.jsonl"
            return _check_part(part, [p.docid for p in chunk], work) if part.is_file() else None

        def save(number: int, chunk: list[Passage], weights: list[dict[str, float]]) -> None:
            with atomic_write(parts / f"part-{number:05d}.jsonl") as f:
                f.writelines(vector_line(p.docid, p.text, quantize(w, scale))
                             for p, w in zip(chunk, weights, strict=True))

        def compute(chunk: list[Passage]) -> list[dict[str, float]]:
            return model.encode_passages([p.text for p in chunk], batch_size=batch_size,
                                         show_progress=nested_progress(show_progress))

        documents = postings = 0
        with ChunkedJob(work, job, total, f"encode {output.name}", load=load, compute=compute, save=save,
                        show_progress=show_progress) as chunked:
            for number, chunk in enumerate(in_chunks(iter_corpus(corpus), chunk_size)):
                chunked.chunk(number, chunk)
                counts = check_vector_collection([parts / f"part-{number:05d}.jsonl"])  # under the chunks' bar
                documents, postings = documents + counts[0], postings + counts[1]
        with kept_on_interrupt(work, "building the impact index"), atomic_directory(output) as tmp:
            run_lucene_indexer(["--collection", "JsonVectorCollection", "--impact", "--pretokenized"], parts,
                               tmp / LUCENE, threads, corpus, documents, show_progress)
            shutil.copytree(parts, tmp / COLLECTION)
            meta = {**{k: job[k] for k in ("encoder", "kind", "encoder_config", "corpus", "corpus_sha256", "scale",
                                            "precision")},
                    "index": "impact", "passages": documents, "postings": postings,
                    "postings_per_passage": postings / max(documents, 1),
                    "lucene_bytes": folder_bytes(tmp / LUCENE)}
            (tmp / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        shutil.rmtree(work)
    return meta


def _check_part(part: Path, docids: list[str], work: Path) -> int:
    """A finished chunk's passage count; it must hold exactly the chunk's ``docids``."""
    with open(part, encoding="utf-8") as f:
        try:
            found = [json.loads(line)["id"] for line in f]
        except (KeyError, TypeError):
            raise InputError(part, f"is not a kept chunk of impact vectors (an id a line); delete {work}") from None
    if found != docids:
        raise InputError(part, f"does not match the corpus passages of this chunk; delete {work}")
    return len(found)
