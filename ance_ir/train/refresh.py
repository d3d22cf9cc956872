"""One ANN refresh, ANCE's inferencer step: checkpoint -> corpus vectors -> faiss index -> negatives + metrics.

The negatives of every training query are the top ``negatives.depth`` passages of the new index with the
query's judged-relevant passages removed (:func:`ance_ir.negatives.mining.mine`) and, when the sampler denoises
(RocketQA's ``denoise_with`` / ``denoise_above``), those a cross-encoder scores above the threshold; they are
published as version = checkpoint step, as Tevatron-style JSONL groups with their scores, the format
``python -m ance_ir.negatives`` writes and ``data.source: groups`` trains from. The eval
topics are searched in the same index and scored with :func:`ance_ir.eval.evaluate`. The record
(``refresh/step-N.json``) holds the metrics, the timings of each phase and wall-clock start and end.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import sys
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ance_ir.data import GroupPassage, Qrels, Topics, TrainingGroup, atomic_write
from ance_ir.data.resume import ChunkedJob, in_chunks, recorded_job, restart_changed_work
from ance_ir.datasets import qrels_for_topics, resolve_qrels, resolve_topics
from ance_ir.eval import evaluate
from ance_ir.index import DenseIndex, passage_index, write_dense_index
from ance_ir.modeling.encoder import ENCODE_WINDOW
from ance_ir.modeling.inference import model_precision, weights_sha256
from ance_ir.modeling.kinds import load_model
from ance_ir.negatives.mining import mine
from ance_ir.train.checkpoint import list_checkpoints, step_of
from ance_ir.train.dataset import TrainData
from ance_ir.train.layout import RunDir
from ance_ir.train.negatives import NEGATIVE_STRATEGIES
from ance_ir.train.settings import ConfigError, RefreshSection
from ance_ir.train.store import EncodingWork, NegativesStore, RefreshRecords, VectorStore, write_status

if TYPE_CHECKING:
    from ance_ir.train.arguments import TrainConfig

SEARCH_BATCH = 4096  # queries per faiss search call
#: passages a refresh encodes and keeps at a time (and reports, in the async inferencer): whole windows of the
#: encoder, so the vectors are those of one call over all the passages
REPORT_EVERY = 5 * ENCODE_WINDOW


def refresh_needed(config: TrainConfig) -> bool:
    """Whether checkpoints of this run are refreshed at all: ANCE negatives to mine, or eval topics to score."""
    return NEGATIVE_STRATEGIES[config.negatives.name].refreshed or config.refresh.eval_topics is not None


def refreshes(config: TrainConfig) -> bool:
    """Whether this run refreshes checkpoints while it trains: when needed, every ``refresh.every`` steps, or (ANCE
    negatives) at its start when that is 0."""
    return refresh_needed(config) and (config.refresh.every > 0 or NEGATIVE_STRATEGIES[config.negatives.name].refreshed)


@dataclass
class RefreshJob:
    """What every refresh of a run does: the corpus, the queries to mine for, the topics to evaluate. Built by
    :meth:`from_config`; the settings' defaults live in ``RefreshSection``, not here."""

    docids: list[str]
    passages: list[str]
    queries: dict[str, str]
    positives: dict[str, list[str]]
    exclude: dict[str, frozenset[str]]
    eval_topics: Topics | None
    eval_qrels: Qrels | None
    mine: bool
    depth: int
    batch_size: int
    precision: str
    index_type: str
    eval_hits: int
    denoise_with: str | None
    denoise_above: float | None
    keep_index: bool
    reencode_share: float
    priority_depth: int
    passage_max_length: int | None
    progress: bool

    @functools.cached_property
    def corpus_sha256(self) -> str:
        """SHA-256 of the corpus the job encodes (each docid and text): what an unfinished refresh's kept parts were
        encoded from."""
        digest = hashlib.sha256()
        for docid, text in zip(self.docids, self.passages, strict=True):
            digest.update(f"{docid}\t{text}\n".encode())
        return digest.hexdigest()

    @classmethod
    def from_config(cls, config: TrainConfig, data: TrainData | None = None) -> RefreshJob:
        """The job of a run (``data``: the trainer's already-loaded data, else it is read here)."""
        data = data or TrainData.load(config)
        cfg = config.refresh
        eval_topics, eval_qrels = eval_set(cfg, data.docids)
        positives: dict[str, list[str]] = {}
        for qid, docid in data.pairs:
            positives.setdefault(qid, []).append(docid)
        return cls(data.docids, [data.texts[d] for d in data.docids], data.queries, positives, data.exclude,
                   eval_topics, eval_qrels, NEGATIVE_STRATEGIES[config.negatives.name].refreshed,
                   config.negatives.depth,
                   cfg.batch_size, cfg.precision, cfg.index_type, cfg.hits,
                   config.negatives.options.get("denoise_with"), config.negatives.options.get("denoise_above"),
                   cfg.keep_index, cfg.reencode_share, cfg.priority_depth, cfg.passage_max_length, config.progress)


def eval_set(cfg: RefreshSection, docids: Collection[str]) -> tuple[Topics | None, Qrels | None]:
    """The topics and qrels each refresh evaluates (None, None without ``eval_topics``); ConfigError for topics
    without qrels (a file, and no ``eval_qrels``), qrels that judge none of them, or none of the corpus's ``docids``
    (qrels of another corpus: every measure would be 0). The trainer calls it before step 0, so that a run fails
    before it starts rather than in its first refresh."""
    if not cfg.eval_topics:
        return None, None
    topics = resolve_topics(cfg.eval_topics)
    qrels = resolve_qrels(cfg.eval_qrels) if cfg.eval_qrels else qrels_for_topics(cfg.eval_topics)
    if qrels is None:
        raise ConfigError("refresh.eval_topics", f"{cfg.eval_topics} has no qrels of its own (a topics file, or a "
                                                 "dataset without qrels): set refresh.eval_qrels (--eval-qrels) too")
    if not set(topics) & set(qrels):
        raise ConfigError("refresh.eval_qrels", f"judge none of the eval_topics {cfg.eval_topics}")
    corpus = set(docids)
    if not any(d in corpus for q in topics if q in qrels for d in qrels[q]):
        raise ConfigError("refresh.eval_qrels", f"judge no passage of the training corpus for the eval_topics "
                                                f"{cfg.eval_topics} (another corpus's qrels? every measure would be 0)")
    return topics, qrels


def _ranking(qids: list[str], results: list[tuple[np.ndarray, list[str]]]) -> dict[str, list[tuple[str, float]]]:
    return {qid: [(d, float(s)) for d, s in zip(ranked, scores, strict=False)]
            for qid, (scores, ranked) in zip(qids, results, strict=True)}


def _search(index: DenseIndex, vectors: np.ndarray, k: int) -> list[tuple[np.ndarray, list[str]]]:
    out = []
    for start in range(0, len(vectors), SEARCH_BATCH):
        scores, docids = index.search(vectors[start:start + SEARCH_BATCH], k)
        out.extend(zip(scores, docids, strict=True))
    return out


def refresh_checkpoint(checkpoint: Path, job: RefreshJob, run: RunDir, device: torch.device,
                       mode: str) -> dict[str, Any]:
    """Refresh from ``checkpoint``: publish its negatives (if the job mines) and write its metrics record."""
    step = step_of(checkpoint)
    started, clock = time.time(), time.perf_counter()
    timings: dict[str, float] = {}

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        timings[name] = round(now - clock, 3)
        clock = now

    encoder = load_model(checkpoint, **({"passage_max_length": job.passage_max_length}
                                         if job.passage_max_length else {})).to(device)
    lap("load_s")
    def report(done: int, total: int) -> None:  # the async inferencer's log and status: no bar there
        write_status(run, "refreshing", step, since=started, encoded=done, passages=total)
        print(f"refresh of step {step}: encoded {done} of {total} passages", file=sys.stderr, flush=True)

    vectors, encoding = refreshed_vectors(encoder, job, run, step, show_progress=job.progress and mode == "sync",
                                          report=report if mode == "async" else None)
    lap("encode_s")
    if device.type == "cuda":  # the encoding's cached blocks back to the GPU, which faiss allocates the index from
        torch.cuda.empty_cache()
    index = passage_index(vectors, job.docids, job.index_type)  # [N, m, D] (ME-BERT): m rows per passage
    index.use_device(device)
    lap("index_s")
    if job.keep_index:
        meta = {"encoder": str(checkpoint.resolve()), "kind": encoder.kind, "encoder_config": encoder.config.to_dict(),
                "pooling": encoder.config.pooling, "normalize": encoder.config.normalize}
        write_dense_index(run.refresh / f"step-{step:08d}.index", index.index, job.docids, meta,
                          vectors_per_passage=index.vectors_per_passage)
        lap("keep_index_s")
    record: dict[str, Any] = {"step": step, "checkpoint": str(checkpoint), "mode": mode, "device": str(device),
                              "passages": len(job.docids), **encoding}
    if job.mine:
        qids = list(job.queries)
        query_vectors = encoder.encode_queries([job.queries[q] for q in qids], batch_size=job.batch_size,
                                               precision=query_precision(encoder, job.precision))
        extra = max(len(job.exclude.get(q, ())) for q in qids)
        ranking = _ranking(qids, _search(index, query_vectors, job.depth + extra))
        mined = mine(ranking, job.positives, job.exclude, job.depth)
        lap("mine_s")
        groups = []
        for qid in qids:
            scored = dict(ranking[qid])
            groups.append(TrainingGroup(qid, job.queries[qid],
                                        tuple(GroupPassage(d, score=scored.get(d)) for d in job.positives[qid]),
                                        tuple(GroupPassage(d, score=s) for d, s in mined[qid]), "dense"))
        if job.denoise_with:
            groups, record["denoised"] = denoise_groups(groups, job, device)
            lap("denoise_s")
        NegativesStore(run.negatives).publish(step, groups)
        lap("publish_s")
        record.update(negatives_version=step, queries_mined=len(groups))
    if job.eval_topics is not None:
        qids = list(job.eval_topics)
        query_vectors = encoder.encode_queries([job.eval_topics[q] for q in qids], batch_size=job.batch_size,
                                               precision=query_precision(encoder, job.precision))
        record["metrics"] = evaluate(job.eval_qrels, _ranking(qids, _search(index, query_vectors, job.eval_hits)))
        lap("eval_s")
    record.update(timings=timings, total_s=round(sum(timings.values()), 3), started=round(started, 3),
                  finished=round(time.time(), 3))
    RefreshRecords(run.refresh).write(record)
    present = {step_of(c) for c in list_checkpoints(run)}
    EncodingWork(run.refresh).remove(lambda kept: kept <= step or kept not in present)  # done, or never resumable
    return record


def query_precision(encoder: Any, precision: str) -> str:
    """The precision a refresh encodes queries at: the passages', but fp32 where that is int8 (int8 queries cost
    0.004-0.006 nDCG@10 more than fp32 queries against the same int8 passages, docs/bench.md; queries are few)."""
    return "fp32" if model_precision(encoder, precision) == "int8" else precision


def reencode_rows(steps: np.ndarray, priority: list[int], share: float) -> np.ndarray:
    """The rows a partial refresh re-encodes: every ``priority`` row (the training queries' latest top negatives),
    then the least recently encoded others (the smallest ``steps``, then by row) until ``share`` of all rows."""
    budget = max(len(set(priority)), int(np.ceil(share * len(steps))))
    chosen = np.zeros(len(steps), dtype=bool)
    chosen[priority] = True
    rest = np.flatnonzero(~chosen)
    oldest = rest[np.lexsort((rest, steps[rest]))][:budget - int(chosen.sum())]
    chosen[oldest] = True
    return np.flatnonzero(chosen)


def refreshed_vectors(encoder: Any, job: RefreshJob, run: RunDir, step: int, show_progress: bool = False,
                      report: Callable[[int, int], None] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
    """The corpus vectors of a refresh (a bar on stderr with ``show_progress``; ``report(encoded, of)`` called every
    ``REPORT_EVERY`` passages), and what its record says about them. The passages encoded so far are kept in
    ``refresh/encoding-STEP/`` (:class:`~ance_ir.train.store.EncodingWork`) until the refresh's record is written.

    With ``job.reencode_share`` < 1 and the vectors of an earlier refresh kept (:class:`VectorStore`), only part of
    the corpus is re-encoded (:func:`reencode_rows`): the top ``job.priority_depth`` passages of the training
    queries' latest negatives published before this step (judged passages are never mined, so they need no fresh
    vector), then the passages encoded longest ago; the others keep their earlier vectors. A job that does not
    mine (it only evaluates) encodes all. The record gives the share re-encoded and the vectors' age in steps."""
    partial = job.mine and job.reencode_share < 1
    store = VectorStore(run.refresh)
    kept = store.load(len(job.docids), before=step) if partial else None
    work = EncodingWork(run.refresh).path(step)
    if kept is None:
        rows = np.arange(len(job.docids))
        vectors = _encode_passages(encoder, job, rows, work, show_progress, report)
        steps = np.full(len(job.docids), step, dtype=np.int64)
    else:
        vectors, steps = kept
        row = {d: i for i, d in enumerate(job.docids)}
        published = NegativesStore(run.negatives)
        earlier = [v for v in published.versions() if v < step]  # not this step's own, if a redo published it
        mined = published.load(earlier[-1]) if earlier else {}
        rows = reencode_rows(steps, [row[d] for ranked in mined.values() for d in ranked[:job.priority_depth]],
                             job.reencode_share)
        vectors[rows] = _encode_passages(encoder, job, rows, work, show_progress, report)
        steps[rows] = step
    if partial:
        store.save(step, vectors, steps)
    age = step - steps
    return vectors, {"reencoded": round(len(rows) / len(job.docids), 4), "vector_age_mean": round(float(age.mean()), 1),
                     "vector_age_max": int(age.max())}


def _encode_passages(encoder: Any, job: RefreshJob, rows: np.ndarray, work: Path, show_progress: bool,
                     report: Callable[[int, int], None] | None) -> np.ndarray:
    """The vectors of the passages at ``rows``, ``REPORT_EVERY`` at a time, ``report(encoded, of)`` called after each
    part. Each part is kept in ``work`` once encoded, so that a refresh redone after a crash or a kill encodes only
    the rest; parts an earlier try encoded from other weights, rows or settings are dropped."""
    settings = {**encoding_settings(job), "weights_sha256": weights_sha256(encoder),
                "rows_sha256": hashlib.sha256(np.asarray(rows, dtype=np.int64).tobytes()).hexdigest(),
                "precision": model_precision(encoder, job.precision), "device": encoder.device.type}
    restart_changed_work(work, settings, f"dropped the unfinished refresh encoding in {work}: its settings differ (or "
                                          "are unreadable)")

    def part(number: int) -> Path:
        return work / f"part-{number:05d}.npy"

    def load(number: int, chunk: list[int]) -> np.ndarray | None:  # a part cut short is encoded again
        try:
            vectors = np.load(part(number)) if part(number).is_file() else None
        except (OSError, ValueError, EOFError):
            return None
        return vectors if vectors is not None and len(vectors) == len(chunk) else None

    def save(number: int, chunk: list[int], vectors: np.ndarray) -> None:
        with atomic_write(part(number), "wb") as f:
            np.save(f, vectors)

    def compute(chunk: list[int]) -> np.ndarray:
        return encoder.encode_passages([job.passages[i] for i in chunk], batch_size=job.batch_size,
                                       precision=job.precision, show_progress=show_progress)

    vectors = None
    with ChunkedJob(work, settings, len(rows), f"refresh {work.name}", load=load, compute=compute, save=save,
                    show_progress=show_progress) as chunked:
        for number, chunk in enumerate(in_chunks(rows.tolist(), REPORT_EVERY)):
            start, part_vectors = chunked.done, chunked.chunk(number, chunk)
            if vectors is None:  # filled part by part: one copy of the corpus vectors in memory, not two
                vectors = np.empty((len(rows), *part_vectors.shape[1:]), dtype=part_vectors.dtype)
            vectors[start:start + len(chunk)] = part_vectors
            if report is not None:
                report(chunked.done, len(rows))
    return vectors


def encoding_settings(job: RefreshJob) -> dict[str, Any]:
    """The settings of a refresh's encoding that its job alone decides (no model loaded): the corpus, the batch size,
    the passage length and the part size. Kept with its parts, they tell an inferencer which unfinished refresh it can
    go on with (:func:`resumable_encoding`)."""
    return {"passages": len(job.passages), "corpus_sha256": job.corpus_sha256, "batch_size": job.batch_size,
            "passage_max_length": job.passage_max_length, "part": REPORT_EVERY}


def resumable_encoding(work: Path, job: RefreshJob, device: torch.device) -> bool:
    """Whether the parts an unfinished refresh kept in ``work`` were encoded with ``job``'s settings on a device of
    ``device``'s kind, at ``job.precision`` unless that is ``auto`` (the model decides it), so a refresh of its
    checkpoint would reuse them."""
    recorded = recorded_job(work)
    if recorded is None:
        return False
    return (all(recorded.get(k) == v for k, v in encoding_settings(job).items())
            and recorded.get("device") == device.type and job.precision in ("auto", recorded.get("precision")))


def denoise_groups(groups: list[TrainingGroup], job: RefreshJob,
                   device: torch.device) -> tuple[list[TrainingGroup], int]:
    """RocketQA's denoising of freshly mined negatives: every (query, negative) pair scored by the model
    ``job.denoise_with`` (a cross-encoder), those scored above ``job.denoise_above`` left out; the groups and how many
    negatives were left out."""
    from ance_ir.rerank import check_standalone, load_reranker, score_groups

    model = load_reranker(job.denoise_with).to(device)
    check_standalone(model, job.denoise_with)
    scored = score_groups(groups, dict(zip(job.docids, job.passages, strict=True)), model, job.batch_size,
                          precision=job.precision)
    kept = [dataclasses.replace(group, negatives=tuple(p for p, s in zip(group.negatives, judged.negatives,
                                                                         strict=True)
                                                       if not s.score > job.denoise_above))
            for group, judged in zip(groups, scored, strict=True)]
    return kept, sum(len(g.negatives) for g in groups) - sum(len(g.negatives) for g in kept)


def describe(record: dict[str, Any]) -> str:
    """One line about a refresh record, for the console."""
    line = f"refresh of step {record['step']} ({record['mode']}, {record['total_s']:.1f}s)"
    if "negatives_version" in record:
        line += f"; negatives v{record['negatives_version']} for {record['queries_mined']} queries"
    if "denoised" in record:
        line += f" ({record['denoised']} denoised away)"
    if record.get("metrics"):
        line += "; " + " ".join(f"{k}={v:.4f}" for k, v in record["metrics"].items())
    return line
