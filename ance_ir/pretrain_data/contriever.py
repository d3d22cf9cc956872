"""Contriever's independent cropping (Izacard et al., 2022), in-batch (SimCLR-style) variant: two random spans of
one passage are the query and the positive. Each span is ``ratio`` of the passage's words, ``ratio`` drawn
uniformly from [``min_ratio``, ``max_ratio``] (Contriever: 0.1-0.5), at a uniform start; the spans may overlap.
Passages shorter than ``min_words`` give no pair. The MoCo variant (a momentum key encoder and a queue of negatives)
is ``task: moco`` (:mod:`ance_ir.train.moco`) on these pairs."""

from __future__ import annotations

import random
from pathlib import Path

from ance_ir.data.corpus import Passage
from ance_ir.pretrain_data.base import Pair, PretrainSource
from ance_ir.train.dataset import register_data_source
from ance_ir.train.settings import ConfigError


def crop(words: list[str], low: float, high: float, rng: random.Random) -> str:
    """A random span of ``words``: ``round(ratio * len)`` of them (at least one), ``ratio ~ U[low, high]``."""
    length = max(1, round(rng.uniform(low, high) * len(words)))
    start = rng.randrange(len(words) - length + 1)
    return " ".join(words[start:start + length])


@register_data_source
class ContrieverSource(PretrainSource):
    name = "contriever"
    options = {"min_ratio": 0.1, "max_ratio": 0.5, "min_words": 8, "per_passage": 1}
    limits = {"min_words": (1, None), "per_passage": (1, None)}

    @property
    def no_pairs(self) -> str:
        return f"no passage has {self.data.options['min_words']} words (data.min_words)"

    @classmethod
    def check_config(cls, config) -> None:
        low, high = config.data.options["min_ratio"], config.data.options["max_ratio"]
        if not 0 < low <= high <= 1:
            raise ConfigError("data.min_ratio", f"need 0 < min_ratio <= max_ratio <= 1, got {low} and {high}")
        super().check_config(config)

    def generate(self, path: Path, passages: list[Passage], rng: random.Random) -> list[Pair]:
        o = self.data.options
        pairs = []
        for passage in self.counted(passages, "passage"):
            words = passage.text.split()
            if len(words) < o["min_words"]:
                continue
            for _ in range(o["per_passage"]):
                query = crop(words, o["min_ratio"], o["max_ratio"], rng)
                positive = crop(words, o["min_ratio"], o["max_ratio"], rng)
                pairs.append(Pair(query, passage.docid, passage.docid, positive, related=frozenset({passage.docid})))
        return pairs
