"""Documents and document qrels from a corpus of segments (MS MARCO v2.1 segmented documents, TREC RAG 24).

A segment id is ``DOC<delimiter>REST``; a segment number, when ``REST`` starts with one (``#3_1234``), orders a
document's segments, else file order does. A document's text is its segments' texts joined with a space, in that
order; it holds only the segments the corpus has (rag24-mini keeps a few segments of each web document), and
MS MARCO v2.1's segments overlap, so a joined document repeats the overlapping sentences.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ance_ir.data.corpus import Passage
from ance_ir.data.qrels import Qrels

DEFAULT_DELIMITER = "#"
_NUMBER = re.compile(r"\d+")


def document_id(segment_id: str, delimiter: str = DEFAULT_DELIMITER) -> str:
    """The document a segment belongs to: its id up to the first ``delimiter`` (the whole id if none)."""
    return segment_id.split(delimiter, 1)[0]


def segment_number(segment_id: str, delimiter: str = DEFAULT_DELIMITER) -> int | None:
    """The number a segment id gives its segment (`DOC#3_...` -> 3), None when it gives none."""
    _, _, rest = segment_id.partition(delimiter)
    match = _NUMBER.match(rest)
    return int(match.group()) if match else None


def documents_from_segments(segments: Iterable[Passage], delimiter: str = DEFAULT_DELIMITER) -> list[Passage]:
    """One passage per document, in order of first appearance: its segments joined in segment order.

    A document keeps the title of its first segment.
    """
    grouped: dict[str, list[tuple[int, int, Passage]]] = {}
    for position, segment in enumerate(segments):
        number = segment_number(segment.docid, delimiter)
        grouped.setdefault(document_id(segment.docid, delimiter), []).append(
            (position if number is None else number, position, segment))
    documents = []
    for docid, parts in grouped.items():
        parts.sort(key=lambda part: part[:2])
        documents.append(Passage(docid, " ".join(p.contents for _, _, p in parts), parts[0][2].title))
    return documents


def document_qrels(qrels: Qrels, delimiter: str = DEFAULT_DELIMITER) -> Qrels:
    """Segment judgements turned into document judgements: a document is as relevant as its best judged segment."""
    documents: Qrels = {}
    for qid, judged in qrels.items():
        grades = documents.setdefault(qid, {})
        for segment_id, grade in judged.items():
            docid = document_id(segment_id, delimiter)
            grades[docid] = max(grade, grades.get(docid, grade))
    return documents
