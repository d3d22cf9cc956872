"""Topics (queries): TSV ``qid\\tquery``, or JSONL with BEIR's or Tevatron's fields.

* TSV (MS MARCO, Pyserini): ``qid<TAB>query``
* BEIR ``queries.jsonl``: ``{"_id", "text"[, "metadata"]}``
* Tevatron query JSONL: ``{"query_id", "query"}`` (other fields, such as training passages, are ignored)

:func:`read_topics` tells them apart by the first line (a JSON object or not).
"""

from __future__ import annotations

from pathlib import Path

from ance_ir.data.atomic import atomic_write
from ance_ir.data.errors import InputError
from ance_ir.data.lines import check_id, iter_lines, json_object, split_columns

Topics = dict[str, str]

# layout name -> (id field, text field)
QUERY_FIELDS = {"BEIR": ("_id", "text"), "Tevatron": ("query_id", "query")}


def _add(topics: Topics, path: str | Path, lineno: int, qid: str, query: str) -> None:
    check_id(path, lineno, "query id", qid)
    if not query.strip():
        raise InputError(path, f"query {qid!r} has no text", lineno)
    if qid in topics:
        raise InputError(path, f"duplicate query id {qid!r}", lineno)
    topics[qid] = query.strip()


def read_topics_tsv(path: str | Path) -> Topics:
    """Read ``qid\\tquery`` lines into an ordered dict; duplicate ids are errors."""
    topics: Topics = {}
    for lineno, line in iter_lines(path):
        qid, query = split_columns(path, lineno, line, "\t", (2,))
        _add(topics, path, lineno, qid.strip(), query)
    return topics


def read_topics_jsonl(path: str | Path) -> Topics:
    """Read BEIR (``_id``, ``text``) or Tevatron (``query_id``, ``query``) query lines; the first line decides."""
    topics: Topics = {}
    layout: str | None = None
    for lineno, line in iter_lines(path):
        obj = json_object(path, lineno, line)
        if layout is None:
            layout = next((name for name, (key, _) in QUERY_FIELDS.items() if key in obj), None)
            if layout is None:
                raise InputError(path, 'expected BEIR query fields ("_id", "text") or Tevatron ones '
                                       '("query_id", "query")', lineno)
        id_key, text_key = QUERY_FIELDS[layout]
        qid, query = obj.get(id_key), obj.get(text_key)
        if not isinstance(qid, (str, int)) or isinstance(qid, bool) or str(qid).strip() == "":
            raise InputError(path, f'missing or empty "{id_key}" ({layout} queries, as line 1 says)', lineno)
        if not isinstance(query, str):
            raise InputError(path, f'missing or non-string "{text_key}" ({layout} queries, as line 1 says)',
                             lineno)
        _add(topics, path, lineno, str(qid).strip(), query)
    return topics


def _first_line(path: str | Path) -> str:
    for _, line in iter_lines(path):
        return line
    return ""


def read_topics(path: str | Path) -> Topics:
    """Read topics in any supported layout: JSONL when the first line is a JSON object, else TSV."""
    if _first_line(path).lstrip().startswith("{"):
        return read_topics_jsonl(path)
    return read_topics_tsv(path)


def write_topics_tsv(topics: Topics, path: str | Path) -> None:
    with atomic_write(path) as f:
        for qid, query in topics.items():
            f.write(f"{qid}\t{query}\n")
