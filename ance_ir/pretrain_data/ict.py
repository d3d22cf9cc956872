"""ICT, the Inverse Cloze Task (Lee et al., 2019; Chang et al., 2020): a random sentence of a passage is the
query, the rest of the passage the positive; the sentence stays in the passage with probability ``keep`` (Lee et
al. keep 10%, so that the model still learns word matching). A passage with a title becomes ``TITLE [SEP] REST``.
Passages with fewer than two sentences (:func:`~ance_ir.pretrain_data.sentences.split_sentences`) give no pair."""

from __future__ import annotations

import random
from pathlib import Path

from ance_ir.data.corpus import Passage
from ance_ir.pretrain_data.base import Pair, PretrainSource
from ance_ir.pretrain_data.sentences import split_sentences
from ance_ir.train.dataset import register_data_source


@register_data_source
class ICTSource(PretrainSource):
    name = "ict"
    options = {"keep": 0.1, "per_passage": 1, "title_separator": "[SEP]"}
    limits = {"keep": (0, 1), "per_passage": (1, None)}
    no_pairs = "no passage has two sentences"

    def generate(self, path: Path, passages: list[Passage], rng: random.Random) -> list[Pair]:
        o = self.data.options
        pairs = []
        for passage in self.counted(passages, "passage"):
            sentences = split_sentences(passage.contents)
            if len(sentences) < 2:
                continue
            for _ in range(o["per_passage"]):
                i = rng.randrange(len(sentences))
                kept = rng.random() < o["keep"]
                rest = " ".join(s for j, s in enumerate(sentences) if kept or j != i)
                text = f"{passage.title} {o['title_separator']} {rest}" if passage.title else rest
                pairs.append(Pair(sentences[i], passage.docid, passage.docid, text, related=frozenset({passage.docid})))
        return pairs
