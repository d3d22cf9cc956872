"""What every pretraining data source shares: pairs made from the corpus itself, the documents its passages belong
to, and the :class:`~ance_ir.train.dataset.TrainData` the trainer reads.

A source draws its pairs once, when the data is loaded, from ``random.Random("NAME/SEED")`` (``seed``: the run's
``seed``), so one seed always gives the same pairs and every epoch visits the same pairs in a new order. A pair's
positive is a corpus passage or a new text (ICT's passage without its sentence, a crop); a new text gets the id
``QID/positive``. Pairs of one *family* (one passage, one document, one linked page) never count each other's
passages as in-batch negatives, and a pair's ``related`` corpus passages are never its negatives (both through
``TrainData.exclude``).
"""

from __future__ import annotations

import json
import random
from abc import abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TypeVar

from ance_ir.data import InputError, load_corpus
from ance_ir.data.corpus import Passage, corpus_fields, is_tsv
from ance_ir.data.groups import GroupPassage, TrainingGroup
from ance_ir.data.lines import iter_lines
from ance_ir.data.resume import slow_bar
from ance_ir.datasets import resolve_corpus
from ance_ir.documents.segments import DEFAULT_DELIMITER, document_id, segment_number
from ance_ir.train.dataset import DataSource, TrainData
from ance_ir.train.settings import ConfigError, DataSection

UNNUMBERED = 1 << 62
T = TypeVar("T")


@dataclass(frozen=True)
class Pair:
    """One generated training example: a query and its positive, optionally negatives (corpus docids)."""

    query: str
    positive: str  # a corpus docid, or a label of the new text (ignored: the pair's id names it)
    family: str
    text: str | None = None  # the positive's text when it is not a corpus passage
    negatives: tuple[str, ...] = ()
    related: frozenset[str] = frozenset()


@dataclass
class Document:
    """A document's passages in document order; ``first`` is its opening passage, None when the corpus lacks it."""

    id: str
    passages: list[Passage]
    first: Passage | None


class PretrainSource(DataSource):
    """A data source whose pairs are drawn from the corpus (:meth:`generate`)."""

    reads = frozenset()
    #: why a corpus gave no pair (ends the one-line error)
    no_pairs: str = "no pair"
    #: numeric options' allowed ranges, (lowest, highest) with None for no bound (checked by ``check_config``)
    limits: dict[str, tuple[float | None, float | None]] = {}

    @classmethod
    def check_config(cls, config) -> None:
        """ConfigError on ``data.KEY`` for an option outside its range in :attr:`limits`."""
        for key, (low, high) in cls.limits.items():
            value = config.data.options[key]
            if not ((low is None or value >= low) and (high is None or value <= high)):  # NaN is neither
                bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
                raise ConfigError(f"data.{key}", f"must be {bounds}, got {value!r}")

    @classmethod
    def from_settings(cls, corpus: str, options: dict[str, Any], seed: int,
                      show_progress: bool = False) -> PretrainSource:
        """The source outside a training config (``python -m ance_ir.pretrain_data``)."""
        from ance_ir.train.registry import check_options

        data = DataSection(source=cls.name, corpus=corpus, options=check_options(cls.options, options, "data", []))
        config = SimpleNamespace(data=data, seed=seed)
        cls.check_config(config)
        return cls(config, show_progress)

    @abstractmethod
    def generate(self, path: Path, passages: list[Passage], rng: random.Random) -> list[Pair]:
        """The pairs of the corpus at ``path``; InputError for a corpus this source cannot use."""

    def counted(self, items: Sequence[T], unit: str) -> Iterable[T]:
        """``items``, counted on stderr as :meth:`generate` draws pairs from them (with ``show_progress``) once that
        takes more than ``BAR_DELAY_S``."""
        return slow_bar(items, desc=f"{self.name} pairs", unit=unit, show=self.show_progress, total=len(items))

    def pairs(self) -> tuple[Path, list[Passage], list[Pair]]:
        """The corpus file, its passages and the pairs drawn from them with the run's seed."""
        path = resolve_corpus(self.data.corpus)
        passages = load_corpus(path, self.show_progress)
        pairs = self.generate(path, passages, random.Random(f"{self.name}/{self.config.seed}"))
        if not pairs:
            raise InputError(path, f"no {self.name} training pairs: {self.no_pairs}")
        return path, passages, pairs

    def load(self) -> TrainData:
        path, passages, pairs = self.pairs()
        texts = {p.docid: p.text for p in passages}
        queries, negatives, positives = {}, {}, []
        families: dict[str, set[str]] = {}
        for i, pair in enumerate(pairs):
            qid = f"{self.name}-{i}"
            positive = pair.positive if pair.text is None else f"{qid}/positive"
            if pair.text is not None:
                texts[positive] = pair.text
            queries[qid] = pair.query
            positives.append((qid, positive))
            if pair.negatives:
                negatives[qid] = list(pair.negatives)
            families.setdefault(pair.family, set()).add(positive)
        exclude = {qid: frozenset(families[pair.family] | pair.related)
                   for (qid, _), pair in zip(positives, pairs, strict=True)}
        return TrainData(path, [p.docid for p in passages], texts, queries, exclude, positives, negatives)

    def groups(self, data: TrainData) -> list[TrainingGroup]:
        """``data`` (this source's) as training groups (:mod:`ance_ir.data.groups`): new texts inline, corpus
        passages by id."""
        corpus = frozenset(data.docids)
        return [TrainingGroup(qid, data.queries[qid],
                              (GroupPassage(docid, None if docid in corpus else data.texts[docid]),),
                              tuple(GroupPassage(d) for d in data.negatives.get(qid, ())))
                for qid, docid in data.pairs]


def _field_values(path: Path, field: str) -> dict[str, str]:
    """Passage id -> the value of ``field`` on its line of a JSONL corpus."""
    if is_tsv(path):
        raise InputError(path, f"a TSV corpus has no fields; data.doc_field ({field!r}) needs a JSONL corpus")
    values, fields = {}, None
    for lineno, line in iter_lines(path):
        obj = json.loads(line)
        fields = fields or corpus_fields(obj)
        value = obj.get(field)
        if not isinstance(value, (str, int)) or isinstance(value, bool) or str(value).strip() == "":
            raise InputError(path, f"no document id: missing or empty {field!r} (data.doc_field)", lineno)
        values[str(obj[fields.id])] = str(value)
    return values


def group_documents(path: Path, passages: list[Passage], doc_field: str = "") -> list[Document]:
    """The corpus's documents, in order of first appearance.

    Without ``doc_field``, passage ids are segment ids ``DOC#N_...`` (:mod:`ance_ir.documents.segments`):
    segments are ordered by ``N`` and ``#0`` is the opening one (a document without ``#0`` in the corpus has no
    first passage); an id without ``#`` is a one-passage document, its own first passage. With ``doc_field``,
    that JSONL field names each passage's document and file order is document order.
    """
    field = _field_values(path, doc_field) if doc_field else None
    grouped: dict[str, list[tuple[int, int, Passage]]] = {}
    for position, passage in enumerate(passages):
        if field is not None:
            doc, number = field[passage.docid], position
        else:
            doc, number = document_id(passage.docid), segment_number(passage.docid)
            if number is None:  # a whole passage is its own first; an unnumbered segment comes after numbered ones
                number = 0 if DEFAULT_DELIMITER not in passage.docid else UNNUMBERED
        grouped.setdefault(doc, []).append((number, position, passage))
    documents = []
    for doc, parts in grouped.items():
        parts.sort(key=lambda part: part[:2])
        ordered = [p for _, _, p in parts]
        first = ordered[0] if field is not None or parts[0][0] == 0 else None
        documents.append(Document(doc, ordered, first))
    return documents


def check_documents(path: Path, documents: list[Document], doc_field: str) -> None:
    """InputError when no document has two passages (the corpus names no documents)."""
    if not any(len(d.passages) > 1 for d in documents):
        how = f"field {doc_field!r}" if doc_field else "ids DOC#N_... (or set data.doc_field)"
        raise InputError(path, f"no document has two passages: the corpus names no documents ({how})")
