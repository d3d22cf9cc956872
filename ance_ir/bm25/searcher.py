"""BM25 retrieval with Pyserini's ``LuceneSearcher``, and BM25 negatives for training."""

from __future__ import annotations

from pathlib import Path

from ance_ir.data import InputError, Run, Topics


class BM25Searcher:
    """Batch BM25 search over a Lucene index (Pyserini's defaults: k1=0.9, b=0.4)."""

    def __init__(self, index: str | Path, k1: float = 0.9, b: float = 0.4):
        from pyserini.search.lucene import LuceneSearcher

        if not (Path(index) / "segments_1").exists() and not any(Path(index).glob("segments*")):
            raise InputError(index, "not a Lucene index (no segments file)")
        self.searcher = LuceneSearcher(str(index))
        self.searcher.set_bm25(k1, b)

    def search(self, topics: Topics, hits: int = 1000, threads: int = 2) -> Run:
        """Top ``hits`` documents per query, best first."""
        qids = list(topics)
        results = self.searcher.batch_search([topics[q] for q in qids], qids, k=hits, threads=threads)
        return {qid: [(h.docid, float(h.score)) for h in results.get(qid, [])] for qid in qids}


def bm25_negatives(index: str | Path, topics: Topics, positives: dict[str, list[str]], depth: int = 200,
                   k1: float = 0.9, b: float = 0.4, threads: int = 2) -> dict[str, list[str]]:
    """BM25 top-``depth`` documents for each query with that query's positives removed, best first.

    These are the warm-up negatives of ANCE and the BM25/DPR baselines.
    """
    run = BM25Searcher(index, k1, b).search(topics, hits=depth, threads=threads)
    return {qid: [d for d, _ in ranking if d not in set(positives.get(qid, ()))] for qid, ranking in run.items()}
