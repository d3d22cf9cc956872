"""Negative samplers, chosen by name from :data:`NEGATIVE_STRATEGIES` (the ``negatives`` section).

Every sampler answers ``sample(qid, exclude, n, rng)``: ``n`` distinct corpus passages for the query,
none of them in ``exclude`` (the passages judged relevant to it). Samplers with a candidate list draw
uniformly from its top ``negatives.depth`` entries and top up with random corpus passages when a query has
fewer than ``n`` candidates left. Where the candidates come from is a *candidate source*: BM25 (``bm25``,
``dpr``), a file (``static``), the training groups (``groups``), the ANN index refreshed from the model
being trained (``ance``), or any source of :mod:`ance_ir.negatives.sources` by name (``candidates`` with
``source: NAME`` and that source's own settings). A new sampler is one subclass with a ``name``,
decorated with :func:`register_negatives`.
"""

from __future__ import annotations

import math
import random
import shutil
import sys
from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ance_ir.data import InputError
from ance_ir.data.corpus import is_tsv
from ance_ir.data.lines import iter_lines, json_object, split_columns
from ance_ir.data.resume import say
from ance_ir.train.registry import Registry
from ance_ir.train.settings import ConfigError

if TYPE_CHECKING:
    from ance_ir.negatives.sources import CandidateSource
    from ance_ir.train.arguments import TrainConfig
    from ance_ir.train.dataset import TrainData
    from ance_ir.train.distributed import Distributed
    from ance_ir.train.layout import RunDir

NEGATIVE_STRATEGIES = Registry("negative sampler")
register_negatives = NEGATIVE_STRATEGIES.register


class NegativeSampler(ABC):
    """Draws negatives for a query from the corpus ``docids``."""

    name: ClassVar[str]
    sampled: ClassVar[bool] = True  # False: no sampled negatives (n is forced to 0)
    forces_in_batch: ClassVar[bool] = False  # True: in-batch negatives are always on
    refreshed: ClassVar[bool] = False  # True: candidates come from ANN refreshes of the model being trained
    options: ClassVar[dict[str, Any]] = {}
    #: the ``negatives`` settings besides ``name`` the sampler reads; another is refused as unused where it differs
    #: from its default or a flag names it (None: all of them)
    reads: ClassVar[frozenset[str] | None] = None

    def __init__(self, docids: Sequence[str]):
        self.docids = list(docids)
        self._docset = frozenset(self.docids)

    @classmethod
    def check_config(cls, config: TrainConfig) -> None:
        """Adjust the task settings this sampler implies (in-batch on, no sampled negatives) and check them."""
        task = config.task
        if cls.forces_in_batch:
            task.in_batch = True
        if not cls.sampled:
            task.n_negatives = 0
        if task.n_negatives == 0 and not task.in_batch:
            raise ConfigError("task.n_negatives", "is 0 and in_batch is off: a query would have no negatives")

    @classmethod
    def create(cls, config: TrainConfig, data: TrainData, run: RunDir, dist: Distributed) -> NegativeSampler:
        """Build the strategy for a run (rank 0 does any expensive work, see ``dist.on_main``)."""
        return cls(data.docids)

    @abstractmethod
    def sample(self, qid: str, exclude: Collection[str], n: int, rng: random.Random) -> list[str]:
        """``n`` distinct negatives for ``qid``, none in ``exclude``."""

    def summary(self) -> dict[str, Any]:
        """What the run's log records of these negatives when training starts (nothing by default)."""
        return {}

    def random_fill(self, qid: str, chosen: list[str], exclude: Collection[str], n: int,
                    rng: random.Random) -> list[str]:
        """``chosen`` topped up with uniformly drawn corpus passages (not excluded, not chosen) to ``n``."""
        if len(chosen) >= n:
            return chosen
        taken = set(chosen)
        available = len(self.docids) - len(taken) - sum(d in self._docset and d not in taken for d in exclude)
        if available < n - len(chosen):
            raise ValueError(f"query {qid!r}: the corpus has too few passages not judged relevant for "
                             f"{n} negatives; lower n_negatives")
        while len(chosen) < n:
            docid = self.docids[rng.randrange(len(self.docids))]
            if docid not in taken and docid not in exclude:
                taken.add(docid)
                chosen.append(docid)
        return chosen


@register_negatives
class RandomNegatives(NegativeSampler):
    """Uniform over the corpus minus the query's judged-relevant passages (the paper's Rand Neg)."""

    name = "random"
    reads = frozenset()

    def sample(self, qid: str, exclude: Collection[str], n: int, rng: random.Random) -> list[str]:
        return self.random_fill(qid, [], exclude, n, rng)


@register_negatives
class InBatchNegatives(NegativeSampler):
    """No sampled negatives: the other queries' positives in the batch are the negatives."""

    name = "inbatch"
    sampled = False
    forces_in_batch = True
    reads = frozenset()

    def sample(self, qid: str, exclude: Collection[str], n: int, rng: random.Random) -> list[str]:
        return []


class CandidateNegatives(NegativeSampler):
    """``n`` drawn uniformly from each query's top ``depth`` candidates (best first)."""

    reads = frozenset({"depth"})

    def __init__(self, docids: Sequence[str], candidates: dict[str, list[str]], depth: int):
        super().__init__(docids)
        self.candidates, self.depth = candidates, depth

    def pool(self, qid: str, exclude: Collection[str], candidates: dict[str, list[str]] | None = None) -> list[str]:
        """``qid``'s top ``depth`` of ``candidates`` (default: this sampler's), best first, less ``exclude``."""
        return [d for d in (self.candidates if candidates is None else candidates).get(qid, ())[:self.depth]
                if d not in exclude]

    def sample(self, qid: str, exclude: Collection[str], n: int, rng: random.Random) -> list[str]:
        pool = self.pool(qid, exclude)
        return self.random_fill(qid, rng.sample(pool, min(n, len(pool))), exclude, n, rng)

    def short_pools(self, n: int, exclude: Mapping[str, Collection[str]]) -> int:
        """How many of the queries of ``exclude`` have fewer than ``n`` candidates to draw from."""
        return sum(len(self.pool(qid, never)) < n for qid, never in exclude.items())


@register_negatives
class BM25Negatives(CandidateNegatives):
    """BM25's top ``negative_depth`` minus the judged-relevant passages (the paper's BM25 Neg, warm-up)."""

    name = "bm25"
    reads = frozenset({"depth", "bm25_index"})

    @classmethod
    def create(cls, config: TrainConfig, data: TrainData, run: RunDir, dist: Distributed) -> NegativeSampler:
        return cls(data.docids, cls.bm25_candidates(config, data, run, dist), config.negatives.depth)

    @staticmethod
    def bm25_candidates(config: TrainConfig, data: TrainData, run: RunDir, dist: Distributed) -> dict[str, list[str]]:
        """Each training query's BM25 top ``negatives.depth``, judged passages removed (searched by rank 0)."""
        def search() -> dict[str, list[str]]:
            from ance_ir.bm25 import build_lucene_index

            index = Path(config.negatives.bm25_index) if config.negatives.bm25_index else run.bm25_index
            if not config.negatives.bm25_index and _older_than(index, data.corpus_path):
                # none yet, or one of the corpus before an edit (whose kept candidates go with it)
                shutil.rmtree(run.candidates, ignore_errors=True)
                build_lucene_index(data.corpus_path, index, progress=config.progress)
            return search_bm25_candidates(index, data, config.negatives.depth, run.candidates, config.progress)

        return dist.on_main(search)


def search_bm25_candidates(index: Path, data: TrainData, depth: int, kept: Path,
                           progress: bool = False) -> dict[str, list[str]]:
    """Each of ``data``'s queries' BM25 top ``depth`` in the Lucene ``index``, its excluded passages (judged ones, a
    pretraining pair's own) removed: what the ``bm25`` sampler draws from; the rankings kept in ``kept``
    (:func:`kept_retrieval`)."""
    from ance_ir.negatives.sources import BM25Source

    ranking = kept_retrieval(BM25Source(index), "bm25", {}, data.queries, depth, kept, progress)
    return {qid: [d for d, _ in ranked if d not in data.exclude.get(qid, ())] for qid, ranked in ranking.items()}


def kept_retrieval(source: CandidateSource, name: str, params: dict[str, Any], queries: Mapping[str, str],
                   depth: int, kept: Path, progress: bool) -> dict[str, list[tuple[str, float]]]:
    """``source``'s top ``depth`` for ``queries``, retrieved in chunks kept in the folder ``kept`` (a run's
    ``candidates/``): a resumed run, or one interrupted while retrieving, reads what was retrieved instead of
    retrieving it again. The chunks are reused only for the same source (built as ``name`` with ``params``: its
    :func:`~ance_ir.negatives.resume.retrieval_settings`), queries and depth; chunks of any other retrieval (an
    earlier attempt's, before the run's first checkpoint, whose settings may differ) are dropped first."""
    from ance_ir.data.resume import restart_changed_work
    from ance_ir.negatives.resume import ChunkedRetrieval, retrieval_settings

    chunked = ChunkedRetrieval(source, kept, retrieval_settings(name, params, source), show_progress=progress,
                               work=kept)
    restart_changed_work(kept, chunked.job(queries, depth), f"note: {kept} holds the rankings of another retrieval "
                                                             "(an earlier attempt's); retrieving again")
    return chunked.retrieve(queries, depth)


def _older_than(index: Path, corpus: Path) -> bool:
    """Whether the run's own Lucene ``index`` is missing or older than ``corpus`` (edited since it was built)."""
    segments = list(index.glob("segments*"))
    return not segments or max(p.stat().st_mtime for p in segments) < corpus.stat().st_mtime


@register_negatives
class DPRNegatives(BM25Negatives):
    """BM25 negatives plus in-batch negatives, as DPR (Karpukhin et al., 2020) trains."""

    name = "dpr"
    forces_in_batch = True


@register_negatives
class BM25RandNegatives(BM25Negatives):
    """Each negative from BM25's top ``negative_depth`` with probability ``bm25_share``, else uniform over the corpus
    (the ANCE paper's BM25 + Rand rows)."""

    name = "bm25-rand"
    options = {"bm25_share": 0.5}

    @classmethod
    def check_config(cls, config: TrainConfig) -> None:
        super().check_config(config)
        check_share("bm25_share", config.negatives.options["bm25_share"])

    def __init__(self, docids: Sequence[str], candidates: dict[str, list[str]], depth: int, share: float):
        super().__init__(docids, candidates, depth)
        self.share = share

    @classmethod
    def create(cls, config: TrainConfig, data: TrainData, run: RunDir, dist: Distributed) -> NegativeSampler:
        return cls(data.docids, cls.bm25_candidates(config, data, run, dist), config.negatives.depth,
                   config.negatives.options["bm25_share"])

    def sample(self, qid: str, exclude: Collection[str], n: int, rng: random.Random) -> list[str]:
        from_bm25 = sum(rng.random() < self.share for _ in range(n))
        pool = self.pool(qid, exclude)
        return self.random_fill(qid, rng.sample(pool, min(from_bm25, len(pool))), exclude, n, rng)


@register_negatives
class AnceNegatives(CandidateNegatives):
    """The ANN top ``negative_depth`` of the latest refreshed index, positives removed (ANCE); with
    ``denoise_with`` (a cross-encoder) and ``denoise_above``, each refresh also leaves out the negatives that model
    scores above the threshold (RocketQA's denoised hard negatives, on the same asynchronous refresh path).

    Starts empty; the trainer installs each published version with :meth:`update`.
    """

    name = "ance"
    refreshed = True
    options = {"denoise_with": None, "denoise_above": None}

    def __init__(self, docids: Sequence[str], candidates: dict[str, list[str]], depth: int):
        super().__init__(docids, candidates, depth)
        self.version: int | None = None

    @classmethod
    def check_config(cls, config: TrainConfig) -> None:
        super().check_config(config)
        options = config.negatives.options
        if (options["denoise_with"] is None) != (options["denoise_above"] is None):
            raise ConfigError("negatives.denoise_with", "RocketQA's denoising needs both a cross-encoder "
                                                        "(denoise_with) and a threshold on its scores (denoise_above)")
        check_threshold(options["denoise_above"])

    @classmethod
    def create(cls, config: TrainConfig, data: TrainData, run: RunDir, dist: Distributed) -> NegativeSampler:
        if config.negatives.options["denoise_with"] is not None:  # every refresh loads it
            from ance_ir.modeling.resolve import require_local_model

            require_local_model(config.negatives.options["denoise_with"], "negatives.denoise_with")
        return cls(data.docids, {}, config.negatives.depth)

    def update(self, version: int, candidates: dict[str, list[str]]) -> None:
        """Sample from the negatives mined from the checkpoint of step ``version`` from now on."""
        self.version, self.candidates = version, candidates

    def sample(self, qid: str, exclude: Collection[str], n: int, rng: random.Random) -> list[str]:
        if self.version is None:
            raise RuntimeError("ANCE negatives are used before any refresh was published")
        return super().sample(qid, exclude, n, rng)


@register_negatives
class StaticNegatives(CandidateNegatives):
    """Negatives read from ``negatives_file`` (see :func:`read_negatives_file`)."""

    name = "static"
    reads = frozenset({"depth", "file"})

    @classmethod
    def check_config(cls, config: TrainConfig) -> None:
        super().check_config(config)
        cls._require_file(config)

    @staticmethod
    def _require_file(config: TrainConfig) -> None:
        if not config.negatives.file:
            raise ConfigError("negatives.file", "is required by the static sampler")

    @classmethod
    def create(cls, config: TrainConfig, data: TrainData, run: RunDir, dist: Distributed) -> NegativeSampler:
        cls._require_file(config)  # also for a plugin task that does not call check_config
        candidates = read_negatives_file(config.negatives.file, frozenset(data.docids))
        return cls(data.docids, candidates, config.negatives.depth)


def check_share(option: str, share: Any) -> None:
    """ConfigError unless ``negatives.OPTION`` is a probability."""
    if isinstance(share, bool) or not isinstance(share, int | float) or not 0 <= share <= 1:
        raise ConfigError(f"negatives.{option}", f"must be a probability in [0, 1], got {share!r}")


def check_threshold(threshold: Any) -> None:
    """ConfigError unless ``negatives.denoise_above`` is None or a number."""
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, int | float)):
        raise ConfigError("negatives.denoise_above", f"must be a number (a teacher score), got {threshold!r}")


def read_negatives_file(path: str | Path, docids: Collection[str]) -> dict[str, list[str]]:
    """Read ranked negatives: JSONL ``{"qid": ..., "negatives": [docid, ...]}`` or TSV ``qid<TAB>docid``.

    TSV (``.tsv``, optionally ``.gz``) lists one negative a line, best first within a query. A malformed
    line, a docid not in the corpus or a repeated (qid, docid) raises :class:`InputError` naming the line.
    """
    out: dict[str, list[str]] = {}
    seen: set[tuple[str, str]] = set()
    tsv = is_tsv(path)
    qid_lines: dict[str, int] = {}
    for lineno, line in iter_lines(path):
        if tsv:
            qid, docid = (c.strip() for c in split_columns(path, lineno, line, "\t", (2,)))
            entries = [docid]
        else:
            qid, entries = _parse_jsonl_negatives(path, lineno, line)
            if qid in qid_lines:
                raise InputError(path, f"query {qid!r} already listed on line {qid_lines[qid]}", lineno)
            qid_lines[qid] = lineno
        if not qid:
            raise InputError(path, "empty query id", lineno)
        ranked = out.setdefault(qid, [])
        for docid in entries:
            if docid not in docids:
                raise InputError(path, f"document {docid!r} is not in the corpus", lineno)
            if (qid, docid) in seen:
                raise InputError(path, f"document {docid!r} is listed twice for query {qid!r}", lineno)
            seen.add((qid, docid))
            ranked.append(docid)
    return out


def _parse_jsonl_negatives(path: str | Path, lineno: int, line: str) -> tuple[str, list[str]]:
    obj = json_object(path, lineno, line)
    if "qid" not in obj or "negatives" not in obj:
        raise InputError(path, 'expected an object with "qid" and "negatives"', lineno)
    qid, negatives = obj["qid"], obj["negatives"]
    if not isinstance(qid, (str, int)) or isinstance(qid, bool):
        raise InputError(path, '"qid" must be a string or an integer', lineno)
    if not isinstance(negatives, list) or not all(isinstance(d, (str, int)) and not isinstance(d, bool)
                                                  for d in negatives):
        raise InputError(path, '"negatives" must be a list of document ids', lineno)
    return str(qid).strip(), [str(d) for d in negatives]


@register_negatives
class GroupNegatives(CandidateNegatives):
    """The negatives that came with the training data (``data.source: groups``, ``spider``), best first.

    ``denoise_above``: RocketQA's denoised hard negatives, leaving out every negative the teacher (the groups'
    cross-encoder scores) scores above this value, a likely unjudged positive; the count left out is printed and
    recorded (:meth:`summary`).
    ``denoised_share`` (with ``denoise_above``): RocketQAv2's hybrid instances, each negative drawn from the denoised
    list with this probability and from the undenoised one otherwise (default: denoised only).
    """

    name = "groups"
    options = {"denoise_above": None, "denoised_share": None}

    def __init__(self, docids: Sequence[str], candidates: dict[str, list[str]], depth: int,
                 undenoised: dict[str, list[str]] | None = None, denoised_share: float | None = None,
                 denoising: dict[str, Any] | None = None):
        super().__init__(docids, candidates, depth)
        self.undenoised, self.denoised_share = undenoised, denoised_share
        self.denoising = denoising or {}  # what :meth:`summary` records

    @classmethod
    def check_config(cls, config: TrainConfig) -> None:
        super().check_config(config)
        from ance_ir.train.dataset import DATA_SOURCES

        if not DATA_SOURCES[config.data.source].brings_negatives:
            sources = [name for name, source in DATA_SOURCES.items() if source.brings_negatives]
            raise ConfigError("negatives.name", f"groups needs a data source that brings negatives "
                                                f"({', '.join(sources)}), got data.source: {config.data.source}")
        threshold = config.negatives.options["denoise_above"]
        check_threshold(threshold)
        if threshold is not None and not DATA_SOURCES[config.data.source].teacher_scores:
            raise ConfigError("negatives.denoise_above", "needs teacher scores: data.source: groups scored by "
                                                         "python -m ance_ir.rerank --groups")
        share = config.negatives.options["denoised_share"]
        if share is not None:
            check_share("denoised_share", share)
            if threshold is None:
                raise ConfigError("negatives.denoised_share", "mixes denoised and undenoised negatives: it needs "
                                                              "negatives.denoise_above")

    @classmethod
    def create(cls, config: TrainConfig, data: TrainData, run: RunDir, dist: Distributed) -> NegativeSampler:
        threshold = config.negatives.options["denoise_above"]
        share = config.negatives.options["denoised_share"]
        candidates, denoising = data.negatives, {}
        if threshold is not None:
            if not any(data.scores.values()):
                raise ValueError(f"{config.data.groups_named()}: no passage has a score, and negatives.denoise_above "
                                 "leaves out the negatives a teacher scores high (score them with python -m "
                                 "ance_ir.rerank --groups)")
            candidates, dropped = denoise(data.negatives, data.scores, threshold)
            total = sum(len(docids) for docids in data.negatives.values())
            denoising = {"denoise_above": threshold, "left_out": dropped, "of": total, "denoised_share": share}
            if dist.is_main:
                print(f"denoised negatives: left out {dropped} of {total} scored above {threshold}",
                      file=sys.stderr, flush=True)
        return cls(data.docids, candidates, config.negatives.depth, data.negatives if share is not None else None,
                   share, denoising)

    def summary(self) -> dict[str, Any]:
        """The denoising threshold, the negatives it left out of how many, and the denoised share (if any)."""
        return self.denoising

    def sample(self, qid: str, exclude: Collection[str], n: int, rng: random.Random) -> list[str]:
        if self.undenoised is None:
            return super().sample(qid, exclude, n, rng)
        from_denoised = sum(rng.random() < self.denoised_share for _ in range(n))
        denoised = self.pool(qid, exclude)
        chosen = rng.sample(denoised, min(from_denoised, len(denoised)))
        rest = [d for d in self.pool(qid, exclude, self.undenoised) if d not in chosen]
        chosen += rng.sample(rest, min(n - len(chosen), len(rest)))
        return self.random_fill(qid, chosen, exclude, n, rng)


def denoise(negatives: dict[str, list[str]], scores: dict[str, dict[str, float]],
            threshold: float) -> tuple[dict[str, list[str]], int]:
    """Each query's negatives without those the teacher scores above ``threshold`` (unscored ones stay), and how
    many were left out."""
    kept = {qid: [d for d in docids if not scores.get(qid, {}).get(d, -math.inf) > threshold]
            for qid, docids in negatives.items()}
    return kept, sum(len(docids) for docids in negatives.values()) - sum(len(docids) for docids in kept.values())


@register_negatives
class SourceNegatives(CandidateNegatives):
    """Candidates from any registered candidate source (:mod:`ance_ir.negatives.sources`), retrieved once by
    rank 0 and mined like ``python -m ance_ir.negatives`` does (judged passages removed)."""

    name = "candidates"
    options = {"source": "bm25"}

    @classmethod
    def create(cls, config: TrainConfig, data: TrainData, run: RunDir, dist: Distributed) -> NegativeSampler:
        def retrieve() -> dict[str, list[str]]:
            from ance_ir.negatives.mining import mine
            from ance_ir.negatives.sources import build_source

            params = dict(config.negatives.options)
            name = params.pop("source")
            try:
                source = build_source(name, **params)
            except InputError as e:  # name the setting that gave the path
                setting = next((f"negatives.{k}" for k, v in params.items() if str(v) == e.path), None)
                if setting is None:
                    raise
                raise InputError(e.path, f"{e.reason} ({setting}: --set {setting}=PATH)", e.line) from None
            ranking = (kept_retrieval(source, name, params, data.queries, config.negatives.depth, run.candidates,
                                      config.progress) if source.computes
                       else source.retrieve(data.queries, config.negatives.depth))
            mined = mine(ranking, {}, data.exclude, config.negatives.depth)
            return {qid: [docid for docid, _ in ranked] for qid, ranked in mined.items()}

        return cls(data.docids, dist.on_main(retrieve), config.negatives.depth)


def build_sampler(config: TrainConfig, data: TrainData, run: RunDir, dist: Distributed) -> NegativeSampler:
    """The sampler named by ``config.negatives.name``; a note on stderr when some queries have fewer candidates than
    ``task.n_negatives`` (the rest are drawn from the whole corpus, and carry no teacher score)."""
    sampler = NEGATIVE_STRATEGIES[config.negatives.name].create(config, data, run, dist)
    n = config.task.n_negatives
    if dist.is_main and n and isinstance(sampler, CandidateNegatives) and not sampler.refreshed:
        short = sampler.short_pools(n, data.exclude)
        if short:
            say(f"note: {short} of {len(data.exclude)} training queries have fewer than task.n_negatives ({n}) "
                f"{sampler.name} negatives to draw from; the rest of theirs are drawn at random from the corpus")
    return sampler

