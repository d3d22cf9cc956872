"""Learned-sparse search of an impact index (:mod:`ance_ir.index.impact`) with Pyserini's ``LuceneImpactSearcher``:
the queries are encoded by the index's own model to ``{term: weight}``, quantised with the index's scale, and handed
to Pyserini as its query encoder's output, so a hit's score is ``sum_t q_t d_t`` over integer impacts."""

from __future__ import annotations

from pathlib import Path

from ance_ir.bm25.searcher import open_lucene, search_in_slices
from ance_ir.data import Run, Topics
from ance_ir.index.impact import LUCENE, read_meta
from ance_ir.modeling.splade import Splade, quantize


class _EncodedQueries:
    """A Pyserini query encoder that answers from queries encoded beforehand (text -> integer weights)."""

    def __init__(self, encoded: dict[str, dict[str, int]]):
        self.encoded = encoded

    def encode(self, text: str) -> dict[str, int]:
        return self.encoded[text]


class ImpactSearcher:
    """Search an impact index with the splade model that encoded it (Pyserini ``LuceneImpactSearcher``)."""

    def __init__(self, index: str | Path, model: Splade):
        from pyserini.search.lucene import LuceneImpactSearcher

        self.meta = read_meta(index)
        self.model, self.scale = model, self.meta["scale"]
        self.queries = _EncodedQueries({})
        # min_idf -1: keep terms that occur in every passage (idf 0), which Pyserini's default of 0 would drop
        lucene = Path(index) / LUCENE
        self.searcher = open_lucene(lucene, lambda: LuceneImpactSearcher(str(lucene), self.queries, min_idf=-1))

    def encode_queries(self, texts: list[str], batch_size: int = 64) -> list[dict[str, int]]:
        """The quantised term weights of ``texts``, as the index scores them."""
        return [quantize(w, self.scale) for w in self.model.encode_queries(texts, batch_size=batch_size)]

    def search(self, topics: Topics, hits: int = 1000, batch_size: int = 64, threads: int = 1,
               progress: bool = False) -> Run:
        """Top ``hits`` passages for every query, best first (a query with no term left finds nothing);
        ``progress`` shows a bar on stderr when the search takes more than one slice of queries."""
        if hits < 1:
            raise ValueError(f"hits must be at least 1, got {hits}")
        texts = list(topics.values())
        self.queries.encoded = dict(zip(texts, self.encode_queries(texts, batch_size), strict=True))
        return search_in_slices(self.searcher, topics, hits, threads, progress, "impact search")
