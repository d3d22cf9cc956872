"""Spider's recurring span retrieval (Ram et al., 2022): a span of ``min_span``-``max_span`` words, none of them a
stopword, that occurs in two passages A and B of one document; a window of ``window`` words of A around the span
is the query, with the span removed from it with probability ``remove`` (0.5), B the positive, and a passage of
the same document without the span the negative (none when every other passage has it: the sampler then draws a
random one). One pair per passage A that shares a span.

Words are compared lower-cased without surrounding punctuation. A span only counts in a sentence of A that B does
not also hold, i.e. that shares no run of 6 words with B (MS MARCO v2.1's segments overlap, and a copied sentence is
no recurring span)."""

from __future__ import annotations

import random
import re
from pathlib import Path

from ance_ir.data.corpus import Passage
from ance_ir.pretrain_data.base import Pair, PretrainSource, check_documents, group_documents
from ance_ir.pretrain_data.sentences import split_sentences
from ance_ir.train.dataset import register_data_source
from ance_ir.train.settings import ConfigError

STOPWORDS = frozenset("""a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further had has have having he
her here hers herself him himself his how i if in into is it its itself just me more most my myself no nor not now
of off on once only or other our ours ourselves out over own same she should so some such than that the their
theirs them themselves then there these they this those through to too under until up very was we were what when
where which while who whom why will with would you your yours yourself yourselves also may might must shall""".split())
_EDGE = re.compile(r"^\W+|\W+$")


def _norm(word: str) -> str:
    return _EDGE.sub("", word.lower())


COPY_WORDS = 6


class SpanPassage:
    """A passage's words (sentence by sentence) and, for each span, where it starts and in which sentence."""

    def __init__(self, passage: Passage, low: int, high: int):
        self.passage = passage
        self.words: list[str] = []
        self.sentences: list[tuple[str, ...]] = []  # each sentence's normalised words
        self.spans: dict[tuple[str, ...], list[tuple[int, int]]] = {}  # span -> (first word, sentence index)
        for index, sentence in enumerate(split_sentences(passage.contents)):
            words = sentence.split()
            norms = tuple(_norm(w) for w in words)
            run = [0] * (len(norms) + 1)  # run[i]: how many words from i on are content words (not stopwords)
            for i in range(len(norms) - 1, -1, -1):
                run[i] = run[i + 1] + 1 if norms[i] and norms[i] not in STOPWORDS else 0
            for i in range(len(words)):
                for n in range(low, min(high, run[i]) + 1):
                    self.spans.setdefault(norms[i:i + n], []).append((len(self.words) + i, index))
            self.words.extend(words)
            self.sentences.append(norms)
        flat = tuple(w for norms in self.sentences for w in norms)
        self._flat = " ".join(flat)
        self._grams = {flat[i:i + COPY_WORDS] for i in range(len(flat) - COPY_WORDS + 1)}

    def copied_from(self, other: SpanPassage) -> set[int]:
        """The sentences of this passage that ``other`` also holds: one with a run of 6 words ``other`` has (or,
        shorter, all of it), so that a sentence copied with small differences counts too."""
        copied = set()
        for index, norms in enumerate(self.sentences):
            if len(norms) >= COPY_WORDS:
                if any(norms[i:i + COPY_WORDS] in other._grams for i in range(len(norms) - COPY_WORDS + 1)):
                    copied.add(index)
            elif f" {' '.join(norms)} " in f" {other._flat} ":
                copied.add(index)
        return copied

    def places(self, span: tuple[str, ...], other: SpanPassage) -> list[int]:
        """Where ``span`` starts in this passage's sentences that ``other`` does not also hold."""
        copied = self.copied_from(other)
        return [start for start, index in self.spans.get(span, ()) if index not in copied]

    def shared(self, other: SpanPassage) -> list[tuple[str, ...]]:
        """Spans of this passage, in sentences ``other`` does not also hold, that ``other`` holds too."""
        copied = self.copied_from(other)
        return [span for span, places in self.spans.items()
                if span in other.spans and any(index not in copied for _, index in places)]


def spider_query(a: SpanPassage, span: tuple[str, ...], other: SpanPassage, window: int, remove: bool) -> str:
    """The ``window`` words of ``a`` centred on ``span``'s first place outside the sentences ``other`` holds."""
    start = a.places(span, other)[0]
    end = start + len(span)
    left = max(0, min(start - (window - len(span)) // 2, len(a.words) - window))
    words = a.words[left:max(end, left + window)]
    if remove:
        words = words[:start - left] + words[end - left:]
    return " ".join(words)


@register_data_source
class SpiderSource(PretrainSource):
    name = "spider"
    brings_negatives = True
    options = {"min_span": 2, "max_span": 5, "window": 32, "remove": 0.5, "doc_field": ""}
    limits = {"min_span": (1, None), "remove": (0, 1)}
    no_pairs = "no two passages of one document share a span of words that are not stopwords"

    @classmethod
    def check_config(cls, config) -> None:
        super().check_config(config)
        o = config.data.options
        if not o["min_span"] <= o["max_span"] <= o["window"]:
            raise ConfigError("data.max_span", f"need min_span <= max_span <= window, got {o['min_span']}, "
                                               f"{o['max_span']} and {o['window']}")

    def generate(self, path: Path, passages: list[Passage], rng: random.Random) -> list[Pair]:
        o = self.data.options
        documents = group_documents(path, passages, o["doc_field"])
        check_documents(path, documents, o["doc_field"])
        pairs = []
        for doc in self.counted(documents, "document"):
            if len(doc.passages) < 2:
                continue
            parsed = [SpanPassage(p, o["min_span"], o["max_span"]) for p in doc.passages]
            for a in parsed:
                choices = [(span, b) for b in parsed if b is not a for span in a.shared(b)]
                if not choices:
                    continue
                span, b = rng.choice(choices)
                query = spider_query(a, span, b, o["window"], rng.random() < o["remove"])
                holders = frozenset(p.passage.docid for p in parsed if span in p.spans)
                lacking = [p.passage.docid for p in parsed if span not in p.spans]
                negatives = (rng.choice(lacking),) if lacking else ()
                pairs.append(Pair(query, b.passage.docid, doc.id, negatives=negatives, related=holders))
        return pairs
