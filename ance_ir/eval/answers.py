"""QA answer coverage: top-k retrieval accuracy against answer strings, as DPR reports it.

A question counts as answered at k when one of its answer strings occurs in the text (``contents``, without
the title, as DPR matches) of one of the top k passages; in the DPR Wikipedia layout Pyserini ships, whose
``contents`` is ``"Title"`` on a first line and then the text, that first line is left out as Pyserini's
``evaluate_dpr_retrieval`` leaves it. Two ways to match:

* ``dpr`` (default; DPR's ``has_answer`` with ``match_type="string"``, which Pyserini's
  ``evaluate_dpr_retrieval`` also uses): text and answer are Unicode NFD-normalised and split into tokens,
  each a run of letters, digits and combining marks, or any other single character that is neither space nor
  control, lower-cased; the answer must occur as a contiguous token sequence (``"1"`` does not match ``"10"``);
* ``kilt`` (DPR's ``has_answer_kilt`` and its answer normalisation): lower-case, drop ASCII punctuation,
  drop the articles a/an/the, collapse white space; the answer must be a substring of the text.

Answers files: JSONL ``{"qid": "...", "answers": ["...", ...]}`` (other keys ignored) or TSV
``qid<TAB>answer1<TAB>answer2 ...``; ``.json``/``.jsonl`` and ``.tsv``/``.txt`` names (optionally ``.gz``)
decide, otherwise a first line starting with ``{`` means JSONL.
"""

from __future__ import annotations

import re
import string
import sys
import unicodedata
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from ance_ir.data import InputError, Run, iter_corpus
from ance_ir.data.lines import iter_lines, json_object

MATCHES = ("dpr", "kilt")
DEFAULT_K = (1, 5, 20, 100)

Answers = dict[str, list[str]]


@cache
def _token_pattern() -> re.Pattern[str]:
    """DPR's SimpleTokenizer: ``[\\p{L}\\p{N}\\p{M}]+`` or one character outside ``\\p{Z}`` and ``\\p{C}``."""
    # one letter per code point: the major class of its Unicode category (surrogates are C)
    classes = "".join([unicodedata.category(chr(cp))[0] for cp in range(sys.maxunicode + 1)])

    def ranges(major: str) -> str:
        return "".join(f"{re.escape(chr(m.start()))}-{re.escape(chr(m.end() - 1))}"
                       for m in re.finditer(f"[{major}]+", classes))

    return re.compile(f"[{ranges('LNM')}]+|[{ranges('LNMPS')}]")


def dpr_tokens(text: str) -> list[str]:
    """DPR's answer-matching tokens of ``text``: NFD, SimpleTokenizer, lower case."""
    return [t.lower() for t in _token_pattern().findall(unicodedata.normalize("NFD", text))]


_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """DPR's (and SQuAD's, KILT's) answer normalisation: lower case, no punctuation or articles, single spaces."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCTUATION)).split())


def normalize(text: str, match: str = "dpr") -> str:
    """The form that matching compares: for ``dpr`` the tokens joined by spaces, framed by one space each side
    (so substring search is token-sequence search); for ``kilt`` :func:`normalize_answer`."""
    if match == "dpr":
        return " " + " ".join(dpr_tokens(text)) + " "
    if match == "kilt":
        return normalize_answer(text)
    raise ValueError(f"unknown answer matching {match!r} (known: {', '.join(MATCHES)})")


def has_answer(answers: Iterable[str], text: str, match: str = "dpr") -> bool:
    """Whether one of ``answers`` occurs in ``text`` (both raw strings)."""
    body = normalize(text, match)
    return any(normalize(a, match) in body for a in answers)


def _is_jsonl(path: Path, first_line: str) -> bool:
    suffix = Path(path.name.removesuffix(".gz")).suffix
    if suffix in (".json", ".jsonl"):
        return True
    if suffix in (".tsv", ".txt"):
        return False
    return first_line.lstrip().startswith("{")


def _parse_jsonl(path: Path, lineno: int, line: str) -> tuple[str, list]:
    obj = json_object(path, lineno, line)
    qid, answers = obj.get("qid"), obj.get("answers")
    if isinstance(qid, bool) or not isinstance(qid, (str, int)) or not str(qid).strip():
        raise InputError(path, 'missing or empty "qid" (a string or an integer)', lineno)
    if not isinstance(answers, list):
        raise InputError(path, '"answers" must be a list of strings', lineno)
    if not all(isinstance(a, str) for a in answers):
        raise InputError(path, '"answers" must hold strings only', lineno)
    return str(qid).strip(), answers


def read_answers(path: str | Path, match: str = "dpr") -> Answers:
    """Read an answers file (JSONL or TSV, see the module docstring) into ``{qid: [answer, ...]}``.

    Every bad line raises :class:`InputError` naming it: malformed JSON, a missing or empty qid, a repeated
    qid, no answers, an answer that is empty once normalised for ``match``.
    """
    path = Path(path)
    answers: Answers = {}
    first_line: dict[str, int] = {}
    jsonl: bool | None = None
    for lineno, line in iter_lines(path):
        if jsonl is None:
            jsonl = _is_jsonl(path, line)
        if jsonl:
            qid, found = _parse_jsonl(path, lineno, line)
        else:
            qid, *found = line.split("\t")
            qid = qid.strip()
            if not qid:
                raise InputError(path, "empty query id", lineno)
        if qid in first_line:
            raise InputError(path, f"query id {qid!r} repeated (first on line {first_line[qid]})", lineno)
        if not found:
            raise InputError(path, f"query {qid!r} has no answers", lineno)
        for i, a in enumerate(found, start=1):
            if not normalize(a, match).strip():
                raise InputError(path, f"query {qid!r}: answer {i} ({a!r}) is empty once normalised", lineno)
        first_line[qid] = lineno
        answers[qid] = found
    return answers


def passage_texts(corpus: str | Path, docids: set[str], match: str = "dpr",
                  show_progress: bool = False) -> dict[str, str]:
    """The normalised text (``contents``, no title) of the passages ``docids`` of a corpus file, streamed (a count on
    stderr with ``show_progress``, past ``BAR_DELAY_S``)."""
    texts: dict[str, str] = {}
    for passage in iter_corpus(corpus, show_progress):
        if passage.docid in docids:
            texts[passage.docid] = normalize(without_title_line(passage.contents), match)
    return texts


def without_title_line(contents: str) -> str:
    """``contents`` less a first line that is a quoted title (the DPR Wikipedia layout: ``"Title"\ntext``)."""
    first, newline, rest = contents.partition("\n")
    quoted = len(first) >= 2 and first.startswith('"') and first.endswith('"')
    return rest if newline and quoted else contents


def first_hits(answers: Answers, run: Run, texts: dict[str, str], depth: int, match: str = "dpr",
               run_name: str = "run", corpus_name: str = "corpus") -> dict[str, int | None]:
    """The rank (from 1) of each question's first passage, among its top ``depth``, holding an answer; None if
    none does or the run has no ranking for it. A passage missing from ``texts`` is an error naming both files.
    """
    out: dict[str, int | None] = {}
    for qid, strings in answers.items():
        wanted = [normalize(a, match) for a in strings]
        top = run.get(qid, [])[:depth]
        for docid, _ in top:
            if docid not in texts:
                raise InputError(run_name, f"document {docid!r} (query {qid!r}) is not in {corpus_name}")
        out[qid] = next((rank for rank, (docid, _) in enumerate(top, start=1)
                         if any(a in texts[docid] for a in wanted)), None)
    return out


def accuracy_per_query(answers: Answers, run: Run, texts: dict[str, str], ks: Iterable[int] = DEFAULT_K,
                       match: str = "dpr", run_name: str = "run",
                       corpus_name: str = "corpus") -> dict[str, dict[str, float]]:
    """``{qid: {"accuracy@k": 1.0 or 0.0}}`` for every question of ``answers`` (missing from the run: 0)."""
    ks = list(dict.fromkeys(ks))
    hits = first_hits(answers, run, texts, max(ks), match, run_name, corpus_name)
    return {q: {f"accuracy@{k}": float(r is not None and r <= k) for k in ks} for q, r in hits.items()}


def needed_docids(answers: Answers, runs: Iterable[Run], depth: int) -> set[str]:
    """The passages that top-``depth`` accuracy over these questions reads."""
    return {d for run in runs for q in answers for d, _ in run.get(q, [])[:depth]}
