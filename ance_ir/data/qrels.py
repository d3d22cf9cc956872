"""Relevance judgments: TREC ``qid iter docid relevance``, or BEIR TSV ``query-id<TAB>corpus-id<TAB>score``.

BEIR's ``qrels/SPLIT.tsv`` starts with the header line ``query-id<TAB>corpus-id<TAB>score``;
:func:`read_qrels` tells the two apart by the first line. Qrels are always written in TREC format.
"""

from __future__ import annotations

from pathlib import Path

from ance_ir.data.atomic import atomic_write
from ance_ir.data.errors import InputError
from ance_ir.data.lines import iter_lines, split_columns

Qrels = dict[str, dict[str, int]]

BEIR_HEADER = ("query-id", "corpus-id", "score")


def _is_beir_header(path: str | Path, lineno: int, line: str) -> bool:
    """Whether the first line is BEIR's header; a header-like first line that is not exactly it is an error."""
    words = line.split()
    if tuple(words) == BEIR_HEADER:
        return True
    header = "<TAB>".join(BEIR_HEADER)
    if words and words[0] == BEIR_HEADER[0]:
        raise InputError(path, f"expected BEIR's header {header!r}, found {line.strip()!r}", lineno)
    if len(words) == 3:
        raise InputError(path, f"expected 4 columns, found 3 (TREC qrels: qid iter docid relevance; BEIR qrels "
                               f"start with the header {header!r})", lineno)
    return False


#: the largest grade read (either sign): pytrec_eval took over a minute for 100 queries at 100,000, crashes at 2^31
MAX_GRADE = 1000


def read_qrels(path: str | Path) -> Qrels:
    """Read TREC or BEIR qrels; a repeated (qid, docid) pair, a non-integer grade or one beyond ``MAX_GRADE`` is an
    error."""
    qrels: Qrels = {}
    beir: bool | None = None
    for lineno, line in iter_lines(path):
        if beir is None:
            beir = _is_beir_header(path, lineno, line)
            if beir:
                continue
        if beir:
            qid, docid, rel = (c.strip() for c in split_columns(path, lineno, line, "\t", (3,)))
            if not qid or not docid:  # BEIR ids may hold spaces, but not be empty
                raise InputError(path, f"empty {'query id' if not qid else 'docid'}", lineno)
        else:
            qid, _, docid, rel = split_columns(path, lineno, line, None, (4,))
        try:
            if "_" in rel:  # int() reads "1_0" as 10
                raise ValueError
            grade = int(rel)
        except ValueError:
            raise InputError(path, f"relevance {rel!r} is not an integer", lineno) from None
        if abs(grade) > MAX_GRADE:
            raise InputError(path, f"relevance {grade} is out of range (-{MAX_GRADE} to {MAX_GRADE}: trec_eval's "
                                   "work grows with the largest grade)", lineno)
        judged = qrels.setdefault(qid, {})
        if docid in judged:
            raise InputError(path, f"duplicate judgment for query {qid!r}, document {docid!r}", lineno)
        judged[docid] = grade
    if beir and not qrels:
        raise InputError(path, "BEIR qrels with a header and no judgments")
    return qrels


def write_qrels(qrels: Qrels, path: str | Path) -> None:
    with atomic_write(path) as f:
        for qid, judged in qrels.items():
            for docid, grade in judged.items():
                f.write(f"{qid} 0 {docid} {grade}\n")


def positives(qrels: Qrels, min_grade: int = 1) -> dict[str, list[str]]:
    """Documents judged at least ``min_grade`` for each query (queries with none are dropped)."""
    out = {qid: [d for d, g in judged.items() if g >= min_grade] for qid, judged in qrels.items()}
    return {qid: docs for qid, docs in out.items() if docs}
