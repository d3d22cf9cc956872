"""Late-interaction search over a token index: candidate passages from the centroids nearest to each query token
(faiss), then exact MaxSim over the candidates' stored (or decompressed) token vectors; or exhaustive MaxSim over
every passage (the reference the candidate generation is measured against).

With ``ndocs``, PLAID's centroid interaction prunes the candidates first: each is scored by MaxSim with every token
replaced by its centroid (the query tokens' similarities to every centroid, computed once, looked up by the tokens'
centroid ids; no token vector is read or decompressed), and only the best ``ndocs`` are scored exactly."""

from __future__ import annotations

import sys

import numpy as np
from tqdm import tqdm

from ance_ir.data import Run, Topics
from ance_ir.index.token_index import TokenIndex
from ance_ir.modeling.colbert import ColBERT, maxsim_one

DEFAULT_NPROBE = 4
SCAN_TOKENS = 65_536  # token vectors per block of an exhaustive scan


def model_for_index(index: TokenIndex, encoder: str | None = None) -> ColBERT:
    """The late-interaction model that encoded ``index``: ``encoder`` (a model dir, run folder, alias or HF id) or the
    one its ``meta.json`` names, with the settings it recorded; ValueError for a model without a trained
    projection (a plain backbone would project with new random weights)."""
    from ance_ir.index.records import recorded_model
    from ance_ir.modeling.kinds import load_index_model

    def load() -> ColBERT:
        return load_index_model(encoder or index.meta["encoder"], index.meta.get("kind", "colbert"), "projection",
                                **index.meta.get("encoder_config", {}))

    return load() if encoder else recorded_model(index.folder, load)


class TokenSearcher:
    """Search a token index with the colbert model that encoded it."""

    def __init__(self, index: TokenIndex, model: ColBERT):
        if model.dim != index.dim:
            raise ValueError(f"the model produces {model.dim}-dimensional token vectors, index {index.folder} "
                             f"holds {index.dim}")
        self.index, self.model = index, model

    def rank(self, query: np.ndarray, hits: int, nprobe: int = DEFAULT_NPROBE,
             ndocs: int = 0) -> list[tuple[str, float]]:
        """The top ``hits`` passages for one query's token vectors ``[Lq, D]`` among the candidates of ``nprobe``
        centroids per query token (``nprobe = 0``: every passage, exhaustive MaxSim), of which only the ``ndocs``
        best by centroid interaction are scored exactly (``ndocs = 0``: all of them)."""
        if nprobe:
            passages = self.index.candidates(query, nprobe)
            if 0 < ndocs < len(passages):
                passages = np.sort(passages[np.argsort(-self.centroid_scores(query, passages),
                                                       kind="stable")[:ndocs]])
            scores = maxsim_one(query, self.index.token_vectors(self.index.passage_rows(passages)),
                                self.index.doclens[passages])
        else:
            passages, scores = np.arange(len(self.index)), self.exhaustive(query)
        top = np.argsort(-scores, kind="stable")[:hits]
        return [(self.index.docids[passages[i]], float(scores[i])) for i in top]

    def centroid_scores(self, query: np.ndarray, passages: np.ndarray) -> np.ndarray:
        """PLAID's centroid interaction ``[len(passages)]``: MaxSim with each token replaced by its centroid, taken
        over blocks of about ``SCAN_TOKENS`` token slots (the gathered scores are passages x tokens x query
        tokens)."""
        by_centroid = np.full((len(self.index.centroids) + 1, len(query)), -np.inf, dtype=np.float32)
        by_centroid[:-1] = self.index.centroids @ query.T  # the last row: padding, never a passage's best
        codes = self.index.padded_codes()
        block = max(1, SCAN_TOKENS // codes.shape[1])
        out = np.empty(len(passages), dtype=np.float32)
        for start in range(0, len(passages), block):
            part = codes[passages[start:start + block]]
            out[start:start + block] = np.take(by_centroid, part, axis=0).max(axis=1).sum(axis=1)
        return out

    def exhaustive(self, query: np.ndarray) -> np.ndarray:
        """MaxSim of one query against every passage ``[N]``, scanning the index in blocks of passages."""
        out = np.empty(len(self.index), dtype=np.float32)
        offsets, start = self.index.offsets, 0
        while start < len(self.index):
            stop = max(start + 1, int(np.searchsorted(offsets, offsets[start] + SCAN_TOKENS, side="right")) - 1)
            stop = min(stop, len(self.index))
            vectors = self.index.token_vectors(slice(int(offsets[start]), int(offsets[stop])))
            out[start:stop] = maxsim_one(query, vectors, self.index.doclens[start:stop])
            start = stop
        return out

    def search(self, topics: Topics, hits: int = 1000, nprobe: int = DEFAULT_NPROBE, batch_size: int = 64,
               ndocs: int = 0, progress: bool = False) -> Run:
        """Top ``hits`` passages for every query, best first, a batch of queries encoded at a time; ``progress`` shows
        a bar on stderr (a query at a time) when there is more than one batch of queries."""
        if hits < 1:
            raise ValueError(f"hits must be at least 1, got {hits}")
        qids = list(topics)
        run: Run = {}
        with tqdm(total=len(qids), desc="search", unit="query", disable=not progress or len(qids) <= batch_size,
                  file=sys.stderr) as bar:
            for start in range(0, len(qids), batch_size):
                part = qids[start:start + batch_size]
                vectors = self.model.encode_queries([topics[q] for q in part], batch_size=batch_size)
                for qid, vector in zip(part, vectors, strict=True):
                    run[qid] = self.rank(vector, hits, nprobe, ndocs)
                    bar.update()
        return run
