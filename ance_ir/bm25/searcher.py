"""BM25 retrieval with Pyserini's ``LuceneSearcher``, and BM25 negatives for training."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from tqdm import tqdm

from ance_ir.data import InputError, Run, Topics

#: queries handed to Lucene at a time, so that a progress bar can move during a long search
SEARCH_SLICE = 128

T = TypeVar("T")


def open_lucene(index: str | Path, open_searcher: Callable[[], T]) -> T:
    """``open_searcher()``, a Pyserini searcher over the Lucene index at ``index``; InputError naming the folder when
    Lucene cannot read it (a broken or foreign index) instead of Java's stack trace."""
    from jnius import JavaException

    try:
        return open_searcher()
    except JavaException as e:
        reason = str(e).removeprefix("JVM exception occurred: ").splitlines()[0].split(" (resource ")[0]
        raise InputError(index, f"not a readable Lucene index ({reason[:300]})") from None


def search_in_slices(searcher: Any, queries: Topics, hits: int, threads: int, progress: bool, desc: str) -> Run:
    """``searcher.batch_search`` (a Pyserini Lucene searcher) over ``queries`` (id -> text), ``SEARCH_SLICE`` of them
    at a time, with a bar on stderr (``desc``) when ``progress`` and there is more than one slice; hits best first."""
    qids = list(queries)
    run: Run = {}
    with tqdm(total=len(qids), unit="query", desc=desc, file=sys.stderr,
              disable=not progress or len(qids) <= SEARCH_SLICE) as bar:
        for start in range(0, len(qids), SEARCH_SLICE):
            part = qids[start:start + SEARCH_SLICE]
            results = searcher.batch_search([queries[q] for q in part], part, k=hits, threads=threads)
            run.update({qid: [(h.docid, float(h.score)) for h in results.get(qid, [])] for qid in part})
            bar.update(len(part))
    return run


class BM25Searcher:
    """Batch BM25 search over a Lucene index (Pyserini's defaults: k1=0.9, b=0.4).

    With ``query_weights`` (a DeepCT-Query model, ``task.target: query``), each query is its words weighted by the
    model: a Lucene query of one term per analysed word, boosted by the word's weight (words weighted 0, and those past
    the model's ``max_length`` word pieces, left out; a query left with no word is searched as written). Those
    queries are searched one at a time, in one thread.
    """

    def __init__(self, index: str | Path, k1: float = 0.9, b: float = 0.4, query_weights: str | Path | None = None):
        from pyserini.search.lucene import LuceneSearcher

        if not Path(index).is_dir():
            raise InputError(index, "no such index folder")
        if not (Path(index) / "segments_1").exists() and not any(Path(index).glob("segments*")):
            raise InputError(index, "not a Lucene index (no segments file)")
        self.weigher = None
        if query_weights is not None:
            from ance_ir.modeling.kinds import load_model

            self.weigher = load_model(str(query_weights), "deepct")
            if self.weigher.target != "query":
                raise InputError(query_weights, "a DeepCT model of passage words (target: passage); query weights "
                                                "come from one trained with task.target: query (DeepCT-Query)")
        self.searcher = open_lucene(index, lambda: LuceneSearcher(str(index)))
        self.searcher.set_bm25(k1, b)

    def search(self, topics: Topics, hits: int = 1000, threads: int = 2, progress: bool = False) -> Run:
        """Top ``hits`` documents per query, best first; ``progress`` shows a bar on stderr when the search takes
        more than one slice of queries."""
        if self.weigher is not None:
            return self._weighted_search(topics, hits, progress)
        return search_in_slices(self.searcher, topics, hits, threads, progress, "BM25 search")

    def _weighted_search(self, topics: Topics, hits: int, progress: bool) -> Run:
        from pyserini.analysis import Analyzer, get_lucene_analyzer
        from pyserini.search.lucene import querybuilder

        analyzer, should = Analyzer(get_lucene_analyzer()), querybuilder.JBooleanClauseOccur["should"].value
        run: Run = {}
        weighted = zip(topics, self.weigher.encode_queries(list(topics.values())), strict=True)
        for qid, weights in tqdm(weighted, total=len(topics), unit="query", desc="BM25 search", file=sys.stderr,
                                 disable=not progress or len(topics) <= SEARCH_SLICE):
            terms: dict[str, float] = {}
            for word, weight in weights.items():
                for term in analyzer.analyze(word):  # a stop word has no term
                    terms[term] = terms.get(term, 0.0) + weight
            query = topics[qid]
            if terms:
                builder = querybuilder.get_boolean_query_builder()
                for term, weight in terms.items():
                    term_query = querybuilder.JTermQuery(querybuilder.JTerm("contents", term))
                    builder.add(querybuilder.get_boost_query(term_query, weight), should)
                query = builder.build()
            run[qid] = [(h.docid, float(h.score)) for h in self.searcher.search(query, k=hits)]
        return run


def bm25_negatives(index: str | Path, topics: Topics, positives: dict[str, list[str]], depth: int = 200,
                   k1: float = 0.9, b: float = 0.4, threads: int = 2,
                   progress: bool = False) -> dict[str, list[str]]:
    """BM25 top-``depth`` documents for each query with that query's positives removed, best first: the list the
    trainer's ``bm25`` sampler draws ANCE's warm-up negatives from (the tests check they agree)."""
    run = BM25Searcher(index, k1, b).search(topics, hits=depth, threads=threads, progress=progress)
    return {qid: [d for d, _ in ranking if d not in set(positives.get(qid, ()))] for qid, ranking in run.items()}
