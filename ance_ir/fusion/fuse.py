"""Fusing rankings: score interpolation and averaging with minimum-score fill, and reciprocal rank fusion.

Interpolation follows Pyserini's ``HybridSearcher``: a document missing from one list takes that list's
lowest score for the query; averaging (CombSUM over the number of runs) fills the same way. RRF scores as Pyserini's
``pyserini.fusion.reciprocal_rank_fusion`` does. All work on :class:`RunTable` columns (vectorised: runs of millions
of hits fuse in seconds, ``docs/bench.md``); ``interpolate``, ``average`` and ``reciprocal_rank_fusion`` take and give
:data:`Run` dictionaries.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ance_ir.data.runs import Run, RunTable, first_appearance, ranks_in_groups

# ``--alpha`` means this in every CLI (``ance_ir.search``, ``ance_ir.fusion``): like Pyserini's hybrid alpha
# it weights the sparse side, which goes first.
ALPHA_MEANING = "fused score = alpha * first (sparse) run + (1 - alpha) * second (dense) run"


def interpolate(first: Run, second: Run, weight_first: float, weight_second: float,
                depth: int | None = 1000, k: int | None = 1000, normalize: bool = False) -> Run:
    """:func:`interpolate_tables` on dictionaries; a query without hits in either run keeps an empty list."""
    fused = interpolate_tables(_table(first), _table(second), weight_first, weight_second,
                               depth, k, normalize)
    return _every_query(fused, [first, second])


def average(runs: Sequence[Run], depth: int | None = 1000, k: int | None = 1000, normalize: bool = False) -> Run:
    """:func:`average_tables` on dictionaries; a query without hits in any run keeps an empty list."""
    return _every_query(average_tables([_table(run) for run in runs], depth, k, normalize), runs)


def reciprocal_rank_fusion(runs: list[Run], rrf_k: int = 60, depth: int | None = 1000,
                           k: int | None = 1000) -> Run:
    """:func:`reciprocal_rank_fusion_tables` on dictionaries; a query without hits keeps an empty list."""
    return _every_query(reciprocal_rank_fusion_tables([_table(run) for run in runs], rrf_k, depth, k), runs)


def _table(run: Run) -> RunTable:
    """``run`` as a table; ValueError naming the first hit whose score is NaN or infinite (it has no order)."""
    table = RunTable.from_run(run)
    bad = np.flatnonzero(~np.isfinite(table.scores))
    if len(bad):
        row = int(bad[0])
        raise ValueError(f"query {table.qids[row].as_py()!r}: document {table.docids[row].as_py()!r} has the score "
                         f"{table.scores[row]}; fusion needs finite scores")
    return table


def _every_query(fused: RunTable, runs: Sequence[Run]) -> Run:
    """``fused`` as a dictionary holding every query of ``runs`` (in order of first appearance), those without
    hits with an empty list."""
    ranked = fused.to_run()
    return {qid: ranked.get(qid, []) for qid in dict.fromkeys(q for run in runs for q in run)}


def interpolate_tables(first: RunTable, second: RunTable, weight_first: float, weight_second: float,
                       depth: int | None = 1000, k: int | None = 1000, normalize: bool = False) -> RunTable:
    """``weight_first * s1 + weight_second * s2``: :func:`weighted_sum_tables` of two runs."""
    return weighted_sum_tables([first, second], [weight_first, weight_second], depth, k, normalize)


def average_tables(runs: Sequence[RunTable], depth: int | None = 1000, k: int | None = 1000,
                   normalize: bool = False) -> RunTable:
    """The mean of the runs' scores (CombSUM over the number of runs): :func:`weighted_sum_tables` with equal
    weights. With ``normalize`` it ranks as ``pyserini.fusion``'s ``normalize`` method (its scores are these times
    the number of runs) where no run lists more than ``depth`` hits for a query (Pyserini takes each list's range
    over the whole run, this over its top ``depth``); without, as its ``average`` where every run lists the same
    documents (Pyserini gives a missing document 0, not the run's lowest score)."""
    if not runs:
        raise ValueError("averaging needs at least one run")
    return weighted_sum_tables(runs, [1 / len(runs)] * len(runs), depth, k, normalize)


def weighted_sum_tables(runs: Sequence[RunTable], weights: Sequence[float], depth: int | None = 1000,
                        k: int | None = 1000, normalize: bool = False) -> RunTable:
    """``sum_i weights[i] * s_i`` over the union of each query's top-``depth`` documents of ``runs``.

    A document absent from one list gets that list's minimum score for the query (0 if the query has no hits
    there). ``normalize``: each list's scores first mapped to [0, 1] per query, ``(s - min) / (max - min)``, which
    ranks as Pyserini's hybrid ``--normalization`` does (it centres on the midrange: a shift per query); a list of
    one score (a single hit, or ties only) maps its documents to 1 and the absent ones to 0, as Pyserini's
    ``normalize`` fusion does. Output is sorted by fused score, ties by docid, and cut to ``k``; queries in order of
    first appearance.
    """
    heads = [run.head(depth) for run in runs]
    pairs = _Pairs(heads)
    fused = None
    for head, rows, weight in zip(heads, pairs.rows, weights, strict=True):
        fill, span = np.zeros(pairs.queries), np.ones(pairs.queries)  # a query the run lacks fills with 0
        scale = np.ones(pairs.queries)
        starts = head.starts()
        if len(head):
            listed = pairs.query[rows[starts[:-1]]]
            fill[listed] = np.minimum.reduceat(head.scores, starts[:-1])
            if normalize:
                high = np.maximum.reduceat(head.scores, starts[:-1])
                with np.errstate(over="ignore"):  # halves where max - min overflows (scores near the float limits)
                    scale[listed] = np.where(np.isfinite(high - fill[listed]), 1.0, 0.5)
                span[listed] = high * scale[listed] - fill[listed] * scale[listed]
        side = fill[pairs.query]
        side[rows] = head.scores
        if normalize:
            query = pairs.query
            flat = (span == 0)[query]  # the pairs of queries whose list has one score
            side = np.where(flat, 0.0, (side * scale[query] - fill[query] * scale[query])
                            / np.where(span > 0, span, 1.0)[query])
            side[rows[flat[rows]]] = 1.0
        fused = weight * side if fused is None else fused + weight * side  # as w1 * s1 + w2 * s2 sums (-0.0 kept)
    return pairs.ranked(fused if fused is not None else np.zeros(pairs.count), k)


def reciprocal_rank_fusion_tables(runs: list[RunTable], rrf_k: int = 60, depth: int | None = 1000,
                                  k: int | None = 1000) -> RunTable:
    """Reciprocal rank fusion (Cormack et al., 2009) as Pyserini's ``pyserini.fusion.reciprocal_rank_fusion``
    computes it (``tests/test_fusion.py`` checks the two agree): each document scores ``sum 1 / (rrf_k + rank)``
    over the runs' top-``depth`` lists, added run by run; ties ordered by docid, cut to ``k``. A rank is the hit's
    place by score (Pyserini reads the file's rank column: the same for a run written in score order)."""
    heads = [run.head(depth) for run in runs]
    pairs = _Pairs(heads)
    scores = np.zeros(pairs.count)
    for head, rows in zip(heads, pairs.rows, strict=True):
        scores[rows] += 1.0 / (rrf_k + head.ranks())
    return pairs.ranked(scores, k)


class _Pairs:
    """The distinct (query, document) pairs of several runs.

    ``rows[i][j]``: the number of the pair in row ``j`` of run ``i``; ``query[p]``: pair ``p``'s query, numbered in
    order of first appearance. Pairs are numbered by (query, document), so ``query`` is sorted.
    """

    def __init__(self, runs: list[RunTable]) -> None:
        query, self._qids = first_appearance(pa.chunked_array([run.qids for run in runs], pa.string()))
        docids = pa.chunked_array([_encoded(run.docids) for run in runs], pa.dictionary(pa.int32(), pa.string()))
        docids = docids.unify_dictionaries().combine_chunks()  # hashes each run's distinct docids, not every hit
        docid, self._docids = docids.indices.to_numpy().astype(np.int64), docids.dictionary
        width = max(len(self._docids), 1)
        keys, numbers = _distinct(query * width + docid, len(self._qids) * width)
        self.queries, self.count = len(self._qids), len(keys)
        self.query, self.docid = np.divmod(keys, width)
        self.rows = np.split(numbers, np.cumsum([len(run) for run in runs])[:-1])
        for i, rows in enumerate(self.rows):  # a pair twice would be scored once, silently
            seen = np.bincount(rows, minlength=self.count)
            if len(seen) and seen.max() > 1:
                pair = int(seen.argmax())
                raise ValueError(f"run {i + 1} lists document {self._docids[int(self.docid[pair])]} twice for query "
                                 f"{self._qids[int(self.query[pair])]}")

    def ranked(self, scores: np.ndarray, k: int | None) -> RunTable:
        """The pairs as a run: queries in order of first appearance, best score first, ties by docid, cut to ``k``."""
        query, docid = self.query, self.docid
        if k is not None and k > 0:  # sort only pairs that can make a query's top k: about half of two runs' union
            keep = _at_least_kth(query, scores, k, self.queries)
            query, docid, scores = query[keep], docid[keep], scores[keep]
        docids = self._docids.take(docid)
        order = _ranked_order(pa.table({"query": query, "score": scores, "docid": docids}), query)
        if k is not None:
            ordered = query[order]
            order = order[ranks_in_groups(np.flatnonzero(np.diff(ordered)) + 1, len(ordered)) <= k]
        return RunTable(self._qids.take(query[order]), docids.take(order), scores[order])


def _at_least_kth(query: np.ndarray, scores: np.ndarray, k: int, queries: int) -> np.ndarray:
    """The rows whose score is at least their query's ``k``-th best (all rows of a query with ``k`` or fewer);
    ``query`` is sorted."""
    starts = np.searchsorted(query, np.arange(queries + 1))
    kth = np.full(queries, -np.inf)
    for q in np.flatnonzero(np.diff(starts) > k):
        part = scores[starts[q]:starts[q + 1]]
        kth[q] = np.partition(part, len(part) - k)[len(part) - k]
    return np.flatnonzero(scores >= kth[query])


def _ranked_order(table: pa.Table, query: np.ndarray) -> np.ndarray:
    """The rows of ``table`` by query, best score first, ties by docid; ``query``, its query column, is sorted.

    Each thread sorts a contiguous part of the queries (pyarrow releases the GIL).
    """
    workers = os.cpu_count() or 1
    if len(query) == 0:
        return np.zeros(0, np.int64)
    cuts = np.searchsorted(query, query[np.arange(1, workers) * len(query) // workers])
    bounds = sorted({0, *cuts.tolist(), len(query)})
    keys = [("query", "ascending"), ("score", "descending"), ("docid", "ascending")]

    def part(a: int, b: int) -> np.ndarray:
        return pc.sort_indices(table.slice(a, b - a), sort_keys=keys).to_numpy().astype(np.int64) + a

    with ThreadPoolExecutor(workers) as pool:
        return np.concatenate(list(pool.map(part, bounds[:-1], bounds[1:])))


def _encoded(docids: pa.Array) -> pa.DictionaryArray:
    return docids if pa.types.is_dictionary(docids.type) else pc.dictionary_encode(docids)


def _distinct(keys: np.ndarray, span: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(keys, return_inverse=True)`` for keys in [0, span): each thread takes one range of values."""
    workers = os.cpu_count() or 1
    if workers == 1:
        return _sorted_distinct(keys)
    part = keys * workers // max(span, 1)
    rows = [np.flatnonzero(part == p) for p in range(workers)]
    with ThreadPoolExecutor(workers) as pool:  # numpy's sort and gathers release the GIL
        parts = list(pool.map(lambda r: _sorted_distinct(keys[r]), rows))
    numbers = np.empty(len(keys), np.int64)
    offset = 0
    for r, (values, local) in zip(rows, parts, strict=True):
        numbers[r] = local + offset
        offset += len(values)
    return np.concatenate([values for values, _ in parts]), numbers


def _sorted_distinct(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(keys, return_inverse=True)`` without its stable sort (twice as fast on millions of keys)."""
    order = np.argsort(keys)
    ordered = keys[order]
    new = np.empty(len(keys), bool)
    new[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    numbers = np.empty(len(keys), np.int64)
    numbers[order] = np.cumsum(new) - 1
    return ordered[new], numbers
