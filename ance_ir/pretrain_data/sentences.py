"""A small rule-based sentence splitter (no model, no dependency), for the pretraining data sources.

Rules, in order: a line break ends a sentence; otherwise a sentence ends after ``.``, ``!`` or ``?`` (and any
closing quotes or brackets right after it) followed by white space and a capital letter, a digit or an opening
quote/bracket, unless the word ending in ``.`` is a known abbreviation (``Mr.``, ``e.g.``, ``U.S.``) or a single
letter (an initial). Pieces without a letter or digit are dropped. It errs on the side of keeping a sentence
whole: "in 1990. the" (lower case after the period) is one sentence.
"""

from __future__ import annotations

import re

ABBREVIATIONS = frozenset("mr mrs ms dr prof sr jr st vs etc fig no vol inc ltd co corp jan feb mar apr jun jul aug "
                          "sep sept oct nov dec e.g i.e u.s a.m p.m approx dept est".split())
_END = re.compile(r"""[.!?]+["'”’)\]]*\s+(?=["'“‘(\[]?[A-Z0-9])""")
_WORD_BEFORE = re.compile(r"(\S+)$")
_CONTENT = re.compile(r"\w")


def _ends_abbreviation(text: str) -> bool:
    match = _WORD_BEFORE.search(text)
    if not match:
        return False
    word = match.group(1).lower().rstrip(".").lstrip("(\"'")
    return word in ABBREVIATIONS or (len(word) == 1 and word.isalpha())


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text``, stripped, in order."""
    sentences: list[str] = []
    for line in text.splitlines():
        start = 0
        for match in _END.finditer(line):
            if line[match.start()] == "." and _ends_abbreviation(line[start:match.start()]):
                continue
            sentences.append(line[start:match.end()].strip())
            start = match.end()
        sentences.append(line[start:].strip())
    return [s for s in sentences if _CONTENT.search(s)]
