"""Training data: the corpus, the training queries, their positives, and a resumable shuffled example order.

A *data source*, chosen by name from :data:`DATA_SOURCES`, turns the ``data`` settings into a
:class:`TrainData`: ``qrels`` reads topics + qrels, ``groups`` reads Tevatron-style JSONL groups (with their
negatives and teacher scores, see :mod:`ance_ir.data.groups`). One training example is a (query, positive)
pair. An epoch visits every pair once, in an order drawn from ``(seed, epoch)``, so the pair stream's whole
state is two integers (``epoch``, ``position``) saved with each checkpoint.
"""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ance_ir.data import load_corpus
from ance_ir.datasets import resolve_corpus, resolve_qrels, resolve_topics
from ance_ir.train.loss import LOSSES
from ance_ir.train.registry import Registry
from ance_ir.train.settings import ConfigError, DataSection

if TYPE_CHECKING:
    from ance_ir.data import Qrels, Topics
    from ance_ir.train.arguments import TrainConfig


@dataclass
class TrainData:
    """Everything the trainer reads, loaded once.

    ``negatives`` (qid -> docids, best first) and ``scores`` (qid -> docid -> teacher score) are what a data
    source brings beyond qrels (empty for ``qrels``).
    """

    corpus_path: Path
    docids: list[str]
    texts: dict[str, str]
    queries: dict[str, str]
    exclude: dict[str, frozenset[str]]
    pairs: list[tuple[str, str]]
    negatives: dict[str, list[str]] = field(default_factory=dict)
    scores: dict[str, dict[str, float]] = field(default_factory=dict)

    @classmethod
    def load(cls, config: TrainConfig, show_progress: bool = False) -> TrainData:
        """The training data of ``config``'s data source (bars on stderr over long passes with ``show_progress``)."""
        source = DATA_SOURCES.lookup(config.data.source, "data.source")
        return source(config, show_progress).load()


DATA_SOURCES = Registry("data source")
register_data_source = DATA_SOURCES.register


class DataSource(ABC):
    """Reads the training data a ``data`` section describes."""

    name: ClassVar[str]
    options: ClassVar[dict[str, Any]] = {}
    #: whether the source can bring teacher scores (``TrainData.scores``), which distillation losses need
    teacher_scores: ClassVar[bool] = False
    #: whether the source can bring negatives (``TrainData.negatives``), which the ``groups`` sampler draws from
    brings_negatives: ClassVar[bool] = False
    #: the ``data`` settings besides ``source`` and ``corpus`` the source reads; another is refused as unused
    #: where it differs from its default or a flag names it (None: all of them)
    reads: ClassVar[frozenset[str] | None] = None

    def __init__(self, config: TrainConfig, show_progress: bool = False):
        self.config, self.show_progress = config, show_progress
        self.data = config.data

    @classmethod  # noqa: B027 - optional; most sources need nothing
    def check_config(cls, config: TrainConfig) -> None:
        """Raise ConfigError when a setting this source needs is missing."""

    @abstractmethod
    def load(self) -> TrainData:
        """Read everything; ValueError when no training pair remains."""

    def _corpus(self) -> tuple[Path, list[str], dict[str, str]]:
        corpus_path = resolve_corpus(self.data.corpus)
        passages = load_corpus(corpus_path, self.show_progress)
        return corpus_path, [p.docid for p in passages], {p.docid: p.text for p in passages}


def _why_no_pairs(d: DataSection, topics: Topics, qrels: Qrels, missing: int) -> str:
    """Why the qrels ``d.qrels`` give no training pair for ``topics``: they judge none of them, their positives
    (``missing`` of them) are all outside the corpus, or no judgment reaches ``d.min_positive_grade``."""
    if not any(qid in qrels for qid in topics):
        return f"{d.qrels} judges none of the topics of {d.topics} (the qrels of other topics?)"
    if missing:
        return (f"none of the {missing} passages {d.qrels} judges >= {d.min_positive_grade} for a topic of {d.topics} "
                f"is in the corpus {d.corpus} (the qrels of another corpus?)")
    grades = sorted({g for judged in qrels.values() for g in judged.values()})
    return (f"no topic of {d.topics} has a passage of {d.corpus} judged >= {d.min_positive_grade} "
            f"(data.min_positive_grade) in {d.qrels}; its grades: {', '.join(map(str, grades)) or 'none'}")


def _note_missing(missing: int, where: str) -> None:
    if missing:
        print(f"note: {missing} positives of {where} are not in the corpus; skipped", file=sys.stderr)


@register_data_source
class QrelsSource(DataSource):
    """Training topics and graded qrels: positives are judged >= ``min_positive_grade``."""

    name = "qrels"
    reads = frozenset({"topics", "qrels", "min_positive_grade", "negative_exclude_grade"})

    @classmethod
    def check_config(cls, config: TrainConfig) -> None:
        for name in ("topics", "qrels"):
            if not getattr(config.data, name):
                raise ConfigError(f"data.{name}", "is required")

    def load(self) -> TrainData:
        """Positives not in the corpus are skipped (with a note on stderr); topics without positives are unused."""
        d = self.data
        corpus_path, docids, texts = self._corpus()
        topics, qrels = resolve_topics(d.topics), resolve_qrels(d.qrels)
        positives: dict[str, list[str]] = {}
        exclude: dict[str, frozenset[str]] = {}
        missing = 0
        for qid in topics:
            judged = qrels.get(qid, {})
            good = [doc for doc, g in judged.items() if g >= d.min_positive_grade]
            missing += sum(doc not in texts for doc in good)
            good = [doc for doc in good if doc in texts]
            if good:
                positives[qid] = good
                exclude[qid] = frozenset(doc for doc, g in judged.items() if g >= d.negative_exclude_grade)
        pairs = [(qid, docid) for qid, docs in positives.items() for docid in docs]
        if not pairs:
            raise ValueError(f"no training pairs: {_why_no_pairs(d, topics, qrels, missing)}")
        _note_missing(missing, d.qrels)
        return TrainData(corpus_path, docids, texts, {q: topics[q] for q in positives}, exclude, pairs)


@register_data_source
class CorpusSource(DataSource):
    """The corpus passages alone, no pairs: for tasks that train on passages (``task: mlm``)."""

    name = "corpus"
    reads = frozenset()

    @classmethod
    def check_config(cls, config: TrainConfig) -> None:
        from ance_ir.train.task import TASKS

        task = TASKS.get(config.task.name)
        if task is not None and task.needs_pairs:
            raise ConfigError("data.source", f"corpus brings passages and no (query, positive) pairs, which task "
                                             f"{config.task.name!r} trains on (it suits task: mlm)")

    def load(self) -> TrainData:
        corpus_path, docids, texts = self._corpus()
        if not docids:
            raise ValueError(f"no training passages: {self.data.corpus} is empty")
        return TrainData(corpus_path, docids, texts, {}, {}, [])


@register_data_source
class GroupsSource(DataSource):
    """Tevatron-style JSONL groups (``python -m ance_ir.negatives`` writes them): each group's positives are
    training pairs, its negatives the candidates of the ``groups`` sampler, its scores the teacher's. A positive
    not in the corpus is trained on with the text the group gives it (``python -m ance_ir.pretrain_data`` writes
    such made-up passages), else skipped.

    With ``qrels`` set too, every passage judged >= ``negative_exclude_grade`` is kept out of the negatives.
    """

    name = "groups"
    teacher_scores = True
    brings_negatives = True
    reads = frozenset({"groups", "qrels", "negative_exclude_grade"})

    @classmethod
    def check_config(cls, config: TrainConfig) -> None:
        d = config.data
        if not d.groups:
            raise ConfigError("data.groups", "is required by the groups data source")
        if not d.qrels and d.negative_exclude_grade != DataSection().negative_exclude_grade:
            raise ConfigError("data.negative_exclude_grade", f"is set ({d.negative_exclude_grade}) but not used: the "
                                                             "groups source excludes judged passages by data.qrels, "
                                                             "which is not set")

    def load(self) -> TrainData:
        from ance_ir.data.groups import read_groups

        d = self.data
        corpus_path, docids, texts = self._corpus()
        judged = resolve_qrels(d.qrels) if d.qrels else {}
        queries, exclude, negatives, scores = {}, {}, {}, {}
        pairs: list[tuple[str, str]] = []
        missing, by_bm25 = 0, 0
        for group in read_groups(d.groups):
            qid = group.query_id
            for p in group.positives:  # a new text (pretraining pairs: ICT's passage without its sentence)
                if p.docid not in texts and p.text is not None:
                    texts[p.docid] = p.own_text()
            good = [p.docid for p in group.positives if p.docid in texts]
            missing += len(group.positives) - len(good)
            if not good:
                continue
            queries[qid] = group.query
            relevant = {doc for doc, g in judged.get(qid, {}).items() if g >= d.negative_exclude_grade}
            exclude[qid] = frozenset({p.docid for p in group.positives} | relevant)
            negatives[qid] = [p.docid for p in group.negatives if p.docid in texts and p.docid not in exclude[qid]]
            scores[qid] = {p.docid: p.score for p in (*group.positives, *group.negatives) if p.score is not None}
            by_bm25 += bool(scores[qid]) and group.scored_by == "bm25"
            pairs.extend((qid, docid) for docid in good)
        _note_missing(missing, d.groups_named())
        if not pairs:
            raise ValueError(f"no training pairs: no group of {d.groups_named()} has a positive in {d.corpus}")
        loss = self.config.loss
        if LOSSES[loss.name].needs_teacher and not loss.teacher_index:
            if not any(scores.values()):
                raise ValueError(f"{d.groups_named()}: no passage has a score, and loss {loss.name!r} needs teacher "
                                 "scores (write them with python -m ance_ir.rerank --groups)")
            if by_bm25:
                print(f"note: {d.groups_named()}: the scores of {by_bm25} groups are BM25's (python -m "
                      f"ance_ir.negatives --source bm25), which loss {loss.name!r} distils as the teacher's; a "
                      "cross-encoder's come from python -m ance_ir.rerank --groups", file=sys.stderr)
        return TrainData(corpus_path, docids, texts, queries, exclude, pairs, negatives, scores)


class PairStream:
    """An endless stream of pair indexes: epoch after epoch, each a fresh permutation from (seed, epoch)."""

    def __init__(self, size: int, seed: int):
        if size < 1:
            raise ValueError("cannot stream an empty set of pairs")
        self.size, self.seed = size, seed
        self.epoch, self.position = 0, 0
        self._order = self._permutation(0)

    def _permutation(self, epoch: int) -> np.ndarray:
        return np.random.default_rng([self.seed, epoch]).permutation(self.size)

    def take(self, count: int) -> list[int]:
        """The next ``count`` pair indexes, crossing into the next epoch when this one runs out."""
        out: list[int] = []
        while len(out) < count:
            if self.position == self.size:
                self.epoch, self.position = self.epoch + 1, 0
                self._order = self._permutation(self.epoch)
            step = min(count - len(out), self.size - self.position)
            out.extend(int(i) for i in self._order[self.position:self.position + step])
            self.position += step
        return out

    @property
    def epochs_done(self) -> float:
        """Fractional number of epochs consumed."""
        return self.epoch + self.position / self.size

    def state_dict(self) -> dict[str, Any]:
        return {"size": self.size, "seed": self.seed, "epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if (state["size"], state["seed"]) != (self.size, self.seed):
            raise ValueError(f"checkpoint's pair order is for {state['size']} pairs with seed {state['seed']}, "
                             f"this run has {self.size} pairs with seed {self.seed}")
        self.epoch, self.position = state["epoch"], state["position"]
        self._order = self._permutation(self.epoch)
