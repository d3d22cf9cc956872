"""TREC run files: ``qid Q0 docid rank score tag``, written exactly as Pyserini writes them.

A run is held two ways: :data:`Run`, a dictionary of ranked lists, and :class:`RunTable`, the same hits as
columns (pyarrow strings, numpy scores) for runs of millions of hits, which are read, fused and written without a
Python object per hit. A plain run file (ASCII, single spaces between columns: what Pyserini and ance-ir write) is
parsed by pyarrow's CSV reader; any other file, and any file that breaks a rule, goes through the line reader,
which accepts the same files and names the line of the first error.
"""

from __future__ import annotations

import gzip
import math
import os
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pv

from ance_ir.data.atomic import atomic_write
from ance_ir.data.errors import InputError
from ance_ir.data.lines import iter_lines, split_columns

Ranking = list[tuple[str, float]]
Run = dict[str, Ranking]

_COLUMNS = {"qid": pa.string(), "q0": pa.string(), "docid": pa.string(), "rank": pa.int64(),
            "score": pa.float64(), "tag": pa.string()}
# ASCII bytes that str.split() takes for whitespace besides space and line feed: a file holding one goes to the
# line reader, which splits exactly as str.split() does.
_OTHER_WHITESPACE = (b"\t", b"\r", b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e", b"\x1f")
_WRITE_ROWS = 1 << 18


@dataclass(frozen=True)
class RunTable:
    """Hits as rows ``(qids[i], docids[i], scores[i])``; the rows of a query are adjacent, best first."""

    qids: pa.Array
    docids: pa.Array  # strings, or dictionary-encoded strings
    scores: np.ndarray

    def __len__(self) -> int:
        return len(self.scores)

    @classmethod
    def from_run(cls, run: Run) -> RunTable:
        """The hits of ``run`` in its order (a query without hits has no rows)."""
        return cls(pa.array([qid for qid, ranking in run.items() for _ in ranking], pa.string()),
                   pa.array([docid for ranking in run.values() for docid, _ in ranking], pa.string()),
                   np.fromiter((score for ranking in run.values() for _, score in ranking), np.float64))

    def to_run(self) -> Run:
        starts = self.starts().tolist()
        qids, docids, scores = self.qids.to_pylist(), self.plain_docids().to_pylist(), self.scores.tolist()
        return {qids[a]: list(zip(docids[a:b], scores[a:b], strict=True))
                for a, b in zip(starts[:-1], starts[1:], strict=True)}

    def plain_docids(self) -> pa.Array:
        """The docids as plain strings (a dictionary-encoded column decoded)."""
        return self.docids.cast(pa.string())

    def starts(self) -> np.ndarray:
        """The first row of each query, then ``len(self)``."""
        return self._starts

    @cached_property
    def _starts(self) -> np.ndarray:  # computed once: ranks, heads, counts and writes all need it
        return np.append(stretch_starts(self.qids), len(self))

    def queries(self) -> int:
        return len(self.starts()) - 1

    def ranks(self) -> np.ndarray:
        """Each row's rank within its query, from 1."""
        return ranks_in_groups(self.starts()[1:-1], len(self))

    def head(self, depth: int | None) -> RunTable:
        """The top ``depth`` hits of every query (all of them for ``None``)."""
        if depth is None or len(self) == 0 or np.diff(self.starts()).max() <= depth:
            return self
        return self.take(np.flatnonzero(self.ranks() <= depth))

    def take(self, rows: np.ndarray) -> RunTable:
        return RunTable(self.qids.take(rows), self.docids.take(rows), self.scores[rows])


def read_run(path: str | Path) -> Run:
    """Read a TREC run; each query's list is sorted by descending score (file order breaks ties)."""
    table = read_plain_run(Path(path))
    return read_run_lines(path) if table is None else table.to_run()


def read_run_table(path: str | Path) -> RunTable:
    """:func:`read_run` as a :class:`RunTable`, queries in order of first appearance."""
    table = read_plain_run(Path(path))
    return RunTable.from_run(read_run_lines(path)) if table is None else table


def read_run_lines(path: str | Path) -> Run:
    """:func:`read_run` line by line: any layout ``str.split()`` reads, the line of the first error named."""
    run: Run = {}
    seen: set[tuple[str, str]] = set()
    for lineno, line in iter_lines(path):
        qid, _, docid, rank, score, _tag = split_columns(path, lineno, line, None, (6,))
        try:
            if "_" in rank + score:  # int() and float() read "1_0" as 10
                raise ValueError
            int(rank)
            value = float(score)
        except ValueError:
            raise InputError(path, f"rank {rank!r} or score {score!r} is not a number", lineno) from None
        if not math.isfinite(value):
            raise InputError(path, f"score {score!r} is not a finite number", lineno)
        if (qid, docid) in seen:
            raise InputError(path, f"document {docid!r} appears twice for query {qid!r}", lineno)
        seen.add((qid, docid))
        run.setdefault(qid, []).append((docid, value))
    for ranking in run.values():
        ranking.sort(key=lambda hit: -hit[1])
    return run


def read_plain_run(path: Path) -> RunTable | None:
    """The run in ``path`` when it is plain and :func:`read_run_lines` would accept it as it is, else ``None``.

    Plain: ASCII, six columns split by single spaces, integer ranks, finite scores, no document twice for a query.
    """
    try:
        raw = path.read_bytes()
        if path.suffix == ".gz":
            raw = gzip.decompress(raw)
    except (OSError, EOFError, zlib.error):
        return None
    if not raw.isascii() or any(byte in raw for byte in _OTHER_WHITESPACE) or _empty_column(raw):
        return None
    try:
        table = pv.read_csv(
            pa.BufferReader(raw), read_options=pv.ReadOptions(column_names=list(_COLUMNS)),
            parse_options=pv.ParseOptions(delimiter=" ", quote_char=False, double_quote=False, escape_char=False),
            convert_options=pv.ConvertOptions(column_types=_COLUMNS, null_values=[], strings_can_be_null=False,
                                              include_columns=["qid", "docid", "rank", "score"]))  # ranks checked
    except pa.ArrowInvalid:
        return None
    scores = table["score"].to_numpy()
    if table.num_rows == 0 or not np.isfinite(scores).all():
        return None
    qids = table["qid"].combine_chunks()
    first_seen, distinct_qids = first_appearance(qids)
    docids = pc.dictionary_encode(table["docid"]).combine_chunks()
    span = len(distinct_qids) * len(docids.dictionary)  # pair numbers lie in [0, span)
    pairs = first_seen * len(docids.dictionary) + docids.indices.to_numpy()
    pairs = np.sort(pairs.astype(np.uint32) if span <= 1 << 32 else pairs)  # 32 bits sort twice as fast
    if (pairs[1:] == pairs[:-1]).any():
        return None
    if _in_order(first_seen, scores):  # as Pyserini and ance-ir write runs: no sort needed
        return RunTable(qids, docids, scores)
    order = np.lexsort((-scores, first_seen))
    return RunTable(qids.take(order), docids.take(order), scores[order])


def _empty_column(raw: bytes) -> bool:
    """Whether a line of ``raw`` has an empty column (a doubled, leading or trailing space), which the line reader
    refuses and a split on single spaces would read as an empty id."""
    return b"  " in raw or b"\n " in raw or b" \n" in raw or raw.startswith(b" ") or raw.endswith(b" ")


def _in_order(query: np.ndarray, scores: np.ndarray) -> bool:
    """Whether each query's rows are adjacent and by descending score (the order :func:`read_run` sorts into)."""
    same_query = query[1:] == query[:-1]
    return bool((query[1:] >= query[:-1]).all() and not (same_query & (scores[1:] > scores[:-1])).any())


def check_run_tag(tag: str) -> str:
    """``tag``, a run file's last column; ValueError when it is empty or holds whitespace (a CLI checks its tag
    before any work, as :func:`write_run_table` does before writing)."""
    if not tag or any(c.isspace() for c in tag):
        raise ValueError(f"run tag {tag!r} must be non-empty and contain no whitespace")
    return tag


def default_run_tag(output: str | Path, given: str | None = None) -> str:
    """``given`` (checked by :func:`check_run_tag`), else the tag a command gives the run it writes to ``output`` by
    default: the file's name without its compression and run-file suffixes (``runs/bm25.dl19.trec.gz`` ->
    ``bm25.dl19``)."""
    if given:
        return check_run_tag(given)
    name = Path(output).name.removesuffix(".gz")
    stem = next((name.removesuffix(s) for s in (".trec", ".txt", ".run") if name.endswith(s)), name)
    return check_run_tag(stem or name)


def write_run(run: Run, path: str | Path, tag: str = "ance-ir") -> None:
    """Write ``run`` atomically; each ranking is written in the order given (best first)."""
    write_run_table(RunTable.from_run(run), path, tag)


def write_run_table(table: RunTable, path: str | Path, tag: str = "ance-ir") -> None:
    """Write ``table`` atomically as Pyserini's ``TrecWriter`` does: ranks from 1, scores with six decimals."""
    check_run_tag(tag)
    docids, ranks = table.plain_docids(), pc.cast(pa.array(table.ranks()), pa.string())
    # each distinct score formatted once (ties are common: RRF, BM25); by bit pattern, which keeps -0.0
    values = pc.dictionary_encode(pa.array(table.scores.view(np.int64)))
    texts = pa.array([f"{value:.6f}" for value in values.dictionary.to_numpy().view(np.float64).tolist()],
                     pa.string())

    def lines(start: int) -> pa.Array:
        rows = slice(start, start + _WRITE_ROWS)
        return pc.binary_join_element_wise(table.qids[rows], "Q0", docids[rows], ranks[rows],
                                           texts.take(values.indices[rows]), f"{tag}\n", " ")

    starts = range(0, len(table), _WRITE_ROWS)
    workers = os.cpu_count() or 1
    with atomic_write(path, "wb") as f, ThreadPoolExecutor(workers) as pool:  # pyarrow releases the GIL
        for window in range(0, len(starts), workers):  # a window at a time: memory stays a few blocks
            for block in pool.map(lines, starts[window:window + workers]):
                f.write(_bytes_of(block))


def ranks_in_groups(starts: np.ndarray, n: int) -> np.ndarray:
    """The rank from 1 of each of ``n`` rows within its group of adjacent rows; ``starts``: every group's first row
    but the first group's."""
    firsts = np.concatenate(([0], starts))
    return np.arange(1, n + 1) - np.repeat(firsts, np.diff(np.append(firsts, n)))


def first_appearance(values: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, pa.Array]:
    """Each value's number (int64) counting distinct values in order of first appearance, and those values.

    Only the first of each stretch of equal neighbours is hashed: the qids of a run come in long stretches.
    """
    values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    starts = stretch_starts(values)
    encoded = pc.dictionary_encode(values.take(starts))
    codes = encoded.indices.to_numpy().astype(np.int64)
    return np.repeat(codes, np.diff(np.append(starts, len(values)))), encoded.dictionary


def stretch_starts(values: pa.Array) -> np.ndarray:
    """The index of the first value of each stretch of equal neighbours (none for no values)."""
    if len(values) == 0:
        return np.zeros(0, np.int64)
    changed = pc.not_equal(values.slice(1), values.slice(0, len(values) - 1)).to_numpy(zero_copy_only=False)
    return np.concatenate(([0], np.flatnonzero(changed) + 1))


def _bytes_of(strings: pa.Array) -> memoryview:
    """The text of a string array without nulls, all its strings one after another."""
    offsets = np.frombuffer(strings.buffers()[1], np.int32, len(strings) + 1, strings.offset * 4)
    return memoryview(strings.buffers()[2])[offsets[0]:offsets[-1]]


def truncate(run: Run, depth: int) -> Run:
    """The top ``depth`` hits of every query."""
    return {qid: ranking[:depth] for qid, ranking in run.items()}


def min_max_scores(run: Run, depth: int | None = None) -> dict[str, dict[str, float]]:
    """Each query's scores of its top ``depth`` hits (all with None) mapped to [0, 1], ``(s - min) / (max - min)``;
    a list of one score (one hit, or ties only) maps to 1, as Pyserini's fusion ``normalize`` maps it."""
    out = {}
    for qid, ranking in run.items():
        hits = ranking[:depth]
        if not hits:
            continue
        low, high = min(s for _, s in hits), max(s for _, s in hits)
        scale = 1.0 if math.isfinite(high - low) else 0.5  # halves where max - min overflows (near the float limits)
        out[qid] = {docid: (s * scale - low * scale) / (high * scale - low * scale) if high > low else 1.0
                    for docid, s in hits}
    return out
