"""Unsupervised SimCSE (Gao et al., 2021): the same text is the query and the positive; the two encodings differ
only by dropout (train with the model's dropout on), the other passages of the batch are the negatives.

The text is a passage's first ``max_words`` words (0: all of it), so that query and positive are the same
tokens when the query and passage length limits allow that many."""

from __future__ import annotations

import random
from pathlib import Path

from ance_ir.data.corpus import Passage
from ance_ir.pretrain_data.base import Pair, PretrainSource
from ance_ir.train.dataset import register_data_source


@register_data_source
class SimCSESource(PretrainSource):
    name = "simcse"
    options = {"max_words": 32}
    limits = {"max_words": (0, None)}
    no_pairs = "every passage is empty"

    def generate(self, path: Path, passages: list[Passage], rng: random.Random) -> list[Pair]:
        limit = self.data.options["max_words"]
        pairs = []
        for passage in self.counted(passages, "passage"):
            words = passage.text.split()
            if not words:
                continue
            text = " ".join(words[:limit] if limit else words)
            pairs.append(Pair(text, passage.docid, passage.docid, text, related=frozenset({passage.docid})))
        return pairs
