"""BM25 through Pyserini: Lucene indexing, batch search and warm-up negatives."""

from ance_ir.bm25.index import build_lucene_index
from ance_ir.bm25.searcher import BM25Searcher, bm25_negatives

__all__ = ["BM25Searcher", "bm25_negatives", "build_lucene_index"]
