"""Training data: the corpus, the training queries, their positives, and a resumable shuffled pair order.

One training example is a (query, positive) pair: every passage judged at least ``min_positive_grade``
for a training topic. An epoch visits every pair once, in an order drawn from ``(seed, epoch)``, so the
pair stream's whole state is two integers (``epoch``, ``position``) saved with each checkpoint.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ance_ir.data import load_corpus
from ance_ir.datasets import resolve_corpus, resolve_qrels, resolve_topics

if TYPE_CHECKING:
    from ance_ir.train.arguments import TrainConfig


@dataclass
class TrainData:
    """Everything the trainer reads, loaded once."""

    corpus_path: Path
    docids: list[str]
    texts: dict[str, str]
    queries: dict[str, str]
    exclude: dict[str, frozenset[str]]
    pairs: list[tuple[str, str]]

    @classmethod
    def load(cls, config: TrainConfig) -> TrainData:
        """Read corpus, topics and qrels named in ``config``; ValueError when no training pair remains.

        Positives not in the corpus are skipped (with a note on stderr); topics without positives are unused.
        """
        corpus_path = resolve_corpus(config.corpus)
        passages = load_corpus(corpus_path)
        texts = {p.docid: p.text for p in passages}
        topics = resolve_topics(config.train_topics)
        qrels = resolve_qrels(config.train_qrels)
        positives: dict[str, list[str]] = {}
        exclude: dict[str, frozenset[str]] = {}
        missing = 0
        for qid in topics:
            judged = qrels.get(qid, {})
            good = [d for d, g in judged.items() if g >= config.min_positive_grade]
            missing += sum(d not in texts for d in good)
            good = [d for d in good if d in texts]
            if good:
                positives[qid] = good
                exclude[qid] = frozenset(d for d, g in judged.items() if g >= config.negative_exclude_grade)
        if missing:
            print(f"note: {missing} positives of {config.train_qrels} are not in the corpus; skipped",
                  file=sys.stderr)
        pairs = [(qid, docid) for qid, docs in positives.items() for docid in docs]
        if not pairs:
            raise ValueError(f"no training pairs: no topic of {config.train_topics} has a passage of "
                             f"{config.corpus} judged >= {config.min_positive_grade} in {config.train_qrels}")
        return cls(corpus_path, [p.docid for p in passages], texts, {q: topics[q] for q in positives}, exclude,
                   pairs)


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
