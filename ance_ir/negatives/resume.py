"""Resumable candidate retrieval for ``python -m ance_ir.negatives``.

A source's rankings are retrieved in chunks of queries, each chunk kept in the work folder beside the output
(``OUTPUT.partial/ranking-00000.jsonl``, see :mod:`ance_ir.data.resume`) until the groups are written: an
interrupted run retrieves only the queries it had not reached, and gives the groups an uninterrupted run gives
(scores are kept as JSON numbers, which round-trip exactly).
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ance_ir.data import atomic_write
from ance_ir.data.checksum import sha256_json
from ance_ir.data.resume import ChunkedJob, UnreadableChunk, in_chunks, open_work, work_folder
from ance_ir.negatives.sources import CandidateSource

QUERY_CHUNK = 512  # queries retrieved (and kept) together
Ranking = dict[str, list[tuple[str, float]]]


def _read_chunk(path: Path, qids: list[str]) -> Ranking:
    ranking = {}
    with path.open(encoding="utf-8") as f:
        for record in map(json.loads, f):
            try:
                ranking[record["qid"]] = [(docid, score) for docid, score in record["hits"]]
            except (KeyError, TypeError, ValueError):
                raise UnreadableChunk(path, f"is not a kept ranking ({{qid, hits}} a line); delete {path.parent}") \
                    from None
    if list(ranking) != qids:
        raise UnreadableChunk(path, f"does not hold the rankings of this chunk's queries; delete {path.parent}")
    return ranking


def retrieval_settings(name: str, params: Mapping[str, Any], source: CandidateSource) -> dict[str, Any]:
    """What decides the candidates of ``source`` (built as ``name`` with ``params``), recorded with its kept chunks
    for a resume to check: its name, its parameters but ``threads`` (which changes no result) and ``device`` (as
    given; the source records the kind it runs on) and its ``resume_record``."""
    return {"source": name, **{k: v for k, v in params.items() if k not in ("threads", "device")},
            **source.resume_record()}


class SearchSource(CandidateSource):
    """A search command's ``search(queries, hits) -> run`` as a candidate source, so that :class:`ChunkedRetrieval`
    keeps its runs in chunks."""

    name = "search"

    def __init__(self, search: Callable[[dict[str, str], int], Ranking]):
        self.search = search

    def retrieve(self, queries: Mapping[str, str], depth: int) -> Ranking:
        return self.search(dict(queries), depth)


def write_searched_run(search: Callable[[dict[str, str], int], Ranking], queries: Mapping[str, str], hits: int,
                       output: str | Path, tag: str, settings: dict[str, Any], show_progress: bool) -> Ranking:
    """``search`` of ``queries`` at ``hits`` written as the TREC run ``output`` (run tag ``tag``), searched in chunks
    kept in ``OUTPUT.partial`` until the run is written, so that an interrupted search resumes (refused when
    ``settings``, what decides the run, changed; a failure other than an interrupt drops the chunks). Holds the
    output's lock: one writer, and the temporaries and chunks of a killed run are its own. Says on stderr what it
    wrote, and how many queries found nothing (a TREC run has no line for them)."""
    from ance_ir.data import output_lock, write_run

    with output_lock(output):
        kept = ChunkedRetrieval(SearchSource(search), output, settings, show_progress=show_progress, desc="search")
        try:
            run = kept.retrieve(queries, hits)
        except Exception:
            kept.discard()
            raise
        write_run(run, output, tag=tag)
        shutil.rmtree(kept.work, ignore_errors=True)
    empty = sum(not ranking for ranking in run.values())
    print(f"wrote {output}: {len(run)} queries" + (f", {empty} of them without a hit" if empty else ""),
          file=sys.stderr)
    return run


class ChunkedRetrieval(CandidateSource):
    """``source``'s retrieval for a run writing ``output``, in kept chunks of ``chunk_size`` queries (default
    :data:`QUERY_CHUNK`).

    ``settings`` (the source's name and parameters) decide whether kept chunks may be reused: a rerun with other
    settings, queries or depth is refused (:func:`~ance_ir.data.resume.open_work`). The chunks are kept in
    ``work`` (default :func:`~ance_ir.data.resume.work_folder` ``(output)``, which the caller removes once its
    output is written; a training run keeps its own for good).
    """

    def __init__(self, source: CandidateSource, output: str | Path, settings: dict[str, Any],
                 chunk_size: int | None = None, show_progress: bool = True, work: Path | None = None,
                 desc: str | None = None):
        self.source, self.output, self.settings = source, Path(output), settings
        self.work, self.chunk_size = work or work_folder(output), chunk_size or QUERY_CHUNK
        self.show_progress, self.desc = show_progress, desc or f"{source.name} candidates"
        self.name = source.name
        self._opened = self.complete = False  # complete: every chunk retrieved (and kept)

    def discard(self) -> None:
        """Remove the kept chunks after an error other than an interrupt (a rerun that fixes it starts afresh);
        a work folder this run refused to resume is left as it is."""
        if self._opened:
            shutil.rmtree(self.work, ignore_errors=True)

    def job(self, queries: Mapping[str, str], depth: int) -> dict[str, Any]:
        """What the kept chunks of a retrieval of ``queries`` at ``depth`` record (``job.json``)."""
        return {**self.settings, "depth": depth, "queries_sha256": sha256_json(list(queries.items())),
                "chunk_size": self.chunk_size}

    def retrieve(self, queries: Mapping[str, str], depth: int) -> Ranking:
        job = self.job(queries, depth)
        open_work([self.output], self.work, job, "retrieval")
        self._opened = True
        items = list(queries.items())

        def path(number: int) -> Path:
            return self.work / f"ranking-{number:05d}.jsonl"

        def load(number: int, chunk: list[tuple[str, str]]) -> Ranking | None:
            return _read_chunk(path(number), [qid for qid, _ in chunk]) if path(number).is_file() else None

        def compute(chunk: list[tuple[str, str]]) -> Ranking:
            found = self.source.retrieve(dict(chunk), depth)
            return {qid: [(docid, float(score)) for docid, score in found.get(qid, [])] for qid, _ in chunk}

        def save(number: int, chunk: list[tuple[str, str]], part: Ranking) -> None:
            with atomic_write(path(number)) as f:
                f.writelines(json.dumps({"qid": qid, "hits": hits}, ensure_ascii=False) + "\n"
                             for qid, hits in part.items())

        ranking: Ranking = {}
        try:
            with ChunkedJob(self.work, job, len(items), self.desc, load=load, compute=compute, save=save,
                            verb="retrieved", unit="queries", bar_unit="query",
                            show_progress=self.show_progress and len(items) > self.chunk_size) as chunked:
                for number, chunk in enumerate(in_chunks(items, self.chunk_size)):
                    ranking.update(chunked.chunk(number, chunk))
        except UnreadableChunk:  # the error names the folder for the user to delete: it stays
            self._opened = False
            raise
        self.complete = True
        return ranking
