"""doc2query expansion: each passage of a corpus with queries appended to its text, for BM25 to index.

The queries come from a query generator (:class:`~ance_ir.modeling.generator.QueryGenerator`: ``n`` sampled per
passage) or, as the upper bound, from the judged training queries themselves (:func:`judged_queries`: each passage
judged relevant gets the text of the queries it is relevant to). Two files are written, each atomically:

* ``OUTPUT``: the expanded corpus, Pyserini's JsonCollection ``{"id", "contents"}`` with the corpus's ids in its
  order, ``contents`` the passage's text (its title first) and its queries, joined by spaces;
* ``OUTPUT.queries.jsonl`` (:func:`queries_path`): one ``{"docid": ..., "queries": [...]}`` a passage, in corpus
  order, which :func:`ance_ir.pretrain_data.qgen.read_generated_queries` reads (the ``qgen`` data source, GPL).

Work goes in chunks of passages, each saved under ``OUTPUT.partial/`` (``chunk-00000.jsonl``: that chunk's lines of
the queries file, written atomically; ``job.json``: what the run does) as soon as it is done. A rerun of an
interrupted command reuses the finished chunks, and since a passage's queries depend only on its text and the
settings (:meth:`~ance_ir.modeling.generator.QueryGenerator.generate`), it writes the same bytes an uninterrupted
run writes; a rerun with other settings, another corpus or another generator is refused. The work folder goes once
both files are written.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ance_ir.data import InputError, Passage, atomic_write, iter_corpus, output_lock
from ance_ir.data.checksum import sha256_json
from ance_ir.data.resume import ChunkedJob, StopChunks, in_chunks, open_work, slow_bar, work_folder

QUERIES_SUFFIX = ".queries.jsonl"

#: ``generate(passages)`` -> the queries of each passage, in order
Generate = Callable[[Sequence[Passage]], list[list[str]]]


def queries_path(output: str | Path) -> Path:
    """The generated-queries file written beside the expanded corpus ``output``: ``OUTPUT.queries.jsonl``."""
    output = Path(output)
    return output.with_name(output.name + QUERIES_SUFFIX)


def expanded_text(text: str, queries: Sequence[str]) -> str:
    """A passage's text with its queries appended, one space between each."""
    return " ".join([text, *(q for q in queries if q)])


def queries_line(docid: str, queries: Sequence[str]) -> str:
    """One line of the queries file."""
    return json.dumps({"docid": docid, "queries": list(queries)}, ensure_ascii=False) + "\n"


def judged_queries(topics: Mapping[str, str], qrels: Mapping[str, Mapping[str, int]], min_grade: int = 1,
                   ) -> dict[str, list[str]]:
    """``{docid: [query text, ...]}``: for each passage judged >= ``min_grade`` for a topic of ``topics``, the text of
    those topics, in the topics' order (whitespace collapsed; the same text once)."""
    out: dict[str, list[str]] = {}
    for qid, text in topics.items():
        for docid, grade in qrels.get(qid, {}).items():
            if grade >= min_grade:
                query = " ".join(text.split())
                if query not in out.setdefault(docid, []):
                    out[docid].append(query)
    return out


def mapping_digest(queries: Mapping[str, Sequence[str]]) -> str:
    """SHA-256 of a ``{docid: queries}`` mapping (the resume record of an expansion with judged queries)."""
    return sha256_json(sorted(queries.items()))


def _chunk_path(work: Path, number: int) -> Path:
    return work / f"chunk-{number:05d}.jsonl"


def _finished_chunk(work: Path, number: int, docids: list[str]) -> bool:
    """Whether chunk ``number`` is on disk; checks that it lists ``docids``."""
    path = _chunk_path(work, number)
    if not path.is_file():
        return False
    try:
        found = [json.loads(line)["docid"] for line in path.read_text(encoding="utf-8").splitlines()]
    except (json.JSONDecodeError, KeyError, TypeError):
        found = None
    if found != docids:
        raise InputError(path, f"does not list the corpus passages of this chunk; delete {work}")
    return True


def check_outputs(output: str | Path, overwrite: bool) -> None:
    """Refuse an existing output (or queries file) unless ``overwrite``, or an unfinished run's work folder is there
    to finish (checked again under the lock)."""
    output = Path(output)
    if work_folder(output).is_dir() or overwrite:
        return
    for path in (output, queries_path(output)):
        if path.exists():
            raise InputError(path, "already exists; pass --force to replace it")


def expand_corpus(corpus: str | Path, output: str | Path, generate: Generate, job: dict[str, Any], *,
                  chunk_size: int = 1000, overwrite: bool = False, stop_after: int | None = None,
                  show_progress: bool = True) -> dict[str, Any] | None:
    """Expand ``corpus`` into ``output`` and its queries file, chunk by chunk, resuming from finished chunks.

    ``job`` describes the settings that decide the output (checked against an unfinished run's record; its
    ``corpus`` entry, the path, may change). ``stop_after``: stop once this many chunks were written by this call,
    keeping them for a rerun (returns None). Returns counts of what was written.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk size must be positive, got {chunk_size}")
    corpus, output = Path(corpus), Path(output)
    if corpus.resolve() in (output.resolve(), queries_path(output).resolve()):
        raise InputError(output, "is the corpus itself; write the expanded corpus to another file")
    with output_lock(output):
        work = work_folder(output)
        check_outputs(output, overwrite)
        # every bad line is reported before any work
        total = sum(1 for _ in iter_corpus(corpus, show_progress, desc="check corpus"))
        job = {**job, "chunk_size": chunk_size}
        open_work([output, queries_path(output)], work, job, "expansion")
        written = 0

        def load(number: int, chunk: list[Passage]) -> bool | None:
            return _finished_chunk(work, number, [p.docid for p in chunk]) or None

        def compute(chunk: list[Passage]) -> list[list[str]]:
            if stop_after is not None and written == stop_after:
                raise StopChunks
            queries = generate(chunk)
            if len(queries) != len(chunk):
                raise RuntimeError(f"{len(queries)} query lists for {len(chunk)} passages")
            return queries

        def save(number: int, chunk: list[Passage], queries: list[list[str]]) -> None:
            nonlocal written
            with atomic_write(_chunk_path(work, number)) as f:
                f.writelines(queries_line(p.docid, q) for p, q in zip(chunk, queries, strict=True))
            written += 1

        chunks: list[Path] = []
        try:
            with ChunkedJob(work, job, total, f"expand {output.name}", load=load, compute=compute, save=save,
                            verb="expanded", show_progress=show_progress) as chunked:
                for number, chunk in enumerate(in_chunks(iter_corpus(corpus), chunk_size)):
                    chunked.chunk(number, chunk)
                    chunks.append(_chunk_path(work, number))
        except StopChunks:
            print(f"stopped after {written} chunks; rerun the same command to continue", file=sys.stderr)
            return None
        counts = _assemble(corpus, output, chunks, total, show_progress)
        shutil.rmtree(work, ignore_errors=True)
        return counts


def _assemble(corpus: Path, output: Path, chunks: list[Path], total: int, show_progress: bool) -> dict[str, Any]:
    """Write the expanded corpus, then the queries file, from the corpus and the finished chunks (a bar on stderr
    with ``show_progress``, past ``BAR_DELAY_S``)."""
    passages = queries = expanded = 0

    def lines() -> Iterator[tuple[str, list[str]]]:
        for path in chunks:
            for line in path.read_text(encoding="utf-8").splitlines():
                obj = json.loads(line)
                yield obj["docid"], obj["queries"]

    with atomic_write(output) as f:
        written = slow_bar(iter_corpus(corpus), desc=f"write {output.name}", unit="passage", show=show_progress,
                           total=total)  # a total, which iter_corpus's own count lacks
        for passage, (docid, generated) in zip(written, lines(), strict=True):
            if docid != passage.docid:
                raise InputError(corpus, f"passage {passage.docid!r} where the chunks have {docid!r}; delete "
                                         f"{work_folder(output)}")
            f.write(json.dumps({"id": docid, "contents": expanded_text(passage.text, generated)},
                               ensure_ascii=False) + "\n")
            passages += 1
            queries += len(generated)
            expanded += bool(generated)
    with atomic_write(queries_path(output), "wb") as f:
        for path in chunks:
            f.write(path.read_bytes())
    return {"passages": passages, "expanded": expanded, "queries": queries}
