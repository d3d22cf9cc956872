"""WLP, the Wiki Link Prediction task (Chang et al., 2020): a random sentence of page A's first passage is the
query, a random passage of a page B that links to A the positive; one pair per link B -> A.

Pages are the corpus's documents (:func:`~ance_ir.pretrain_data.base.group_documents`). Links come from
``links``, a TSV file ``PAGE<TAB>LINKED PAGE`` (document ids; links naming a page not in the corpus are skipped
with a note), or else from exact title mentions: B links to A when A's title occurs in B's text as whole words
(case-sensitive). A page's title is its first passage's ``title`` field (``titles: field``) or the first line of
its first passage (``titles: first-line``, e.g. MS MARCO v2.1 segments, whose ``#0`` starts with the page title);
titles shorter than ``min_title_chars`` are not matched."""

from __future__ import annotations

import random
import re
import sys
from pathlib import Path

from ance_ir.data import InputError
from ance_ir.data.corpus import Passage
from ance_ir.data.lines import iter_lines, split_columns
from ance_ir.pretrain_data.base import Document, Pair, PretrainSource, group_documents
from ance_ir.pretrain_data.sentences import split_sentences
from ance_ir.train.dataset import register_data_source
from ance_ir.train.settings import ConfigError

TITLE_KINDS = ("field", "first-line")
_CHUNK = 500  # titles per regular expression


def read_links(path: str | Path, pages: set[str]) -> list[tuple[str, str]]:
    """``(page, linked page)`` pairs of a links TSV, both pages in ``pages``, in file order, without repeats."""
    links, seen, unknown = [], set(), 0
    for lineno, line in iter_lines(path):
        source, target = (c.strip() for c in split_columns(path, lineno, line, "\t", (2,)))
        if not source or not target:
            raise InputError(path, "empty page id", lineno)
        if source not in pages or target not in pages:
            unknown += 1
        elif source != target and (source, target) not in seen:
            seen.add((source, target))
            links.append((source, target))
    if unknown:
        print(f"note: {unknown} links of {path} name a page not in the corpus; skipped", file=sys.stderr)
    return links


def title_links(documents: list[Document], titles: str, min_chars: int) -> list[tuple[str, str]]:
    """``(page, linked page)`` for every page whose text mentions another page's title, in page order."""
    by_title: dict[str, list[str]] = {}
    for doc in documents:
        if doc.first is None:
            continue
        title = doc.first.title if titles == "field" else doc.first.contents.strip().split("\n", 1)[0].strip()
        if len(title) >= min_chars:
            by_title.setdefault(title, []).append(doc.id)
    names = sorted(by_title, key=len, reverse=True)
    patterns = [re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, names[i:i + _CHUNK])) + r")(?!\w)")
                for i in range(0, len(names), _CHUNK)]
    links: list[tuple[str, str]] = []
    for doc in documents:
        mentioned: dict[str, None] = {}
        for passage in doc.passages:
            start = 1 if titles == "first-line" and passage is doc.first else 0  # a page's own title line
            text = "\n".join(passage.contents.split("\n")[start:])
            for pattern in patterns:
                mentioned.update(dict.fromkeys(pattern.findall(text)))
        targets = dict.fromkeys(t for title in mentioned for t in by_title[title] if t != doc.id)
        links.extend((doc.id, target) for target in targets)
    return links


@register_data_source
class WLPSource(PretrainSource):
    name = "wlp"
    options = {"links": "", "titles": "field", "min_title_chars": 4, "doc_field": ""}
    limits = {"min_title_chars": (1, None)}
    no_pairs = "no link from a page to another page with a first passage that has a sentence"

    @classmethod
    def check_config(cls, config) -> None:
        if config.data.options["titles"] not in TITLE_KINDS:
            raise ConfigError("data.titles", f"must be one of {', '.join(TITLE_KINDS)}, "
                                             f"got {config.data.options['titles']!r}")
        super().check_config(config)

    def generate(self, path: Path, passages: list[Passage], rng: random.Random) -> list[Pair]:
        o = self.data.options
        documents = group_documents(path, passages, o["doc_field"])
        pages = {doc.id: doc for doc in documents}
        if o["links"]:
            links = read_links(o["links"], set(pages))
            if not links:
                raise InputError(o["links"], f"no link between two pages of {path}")
        else:
            links = title_links(documents, o["titles"], o["min_title_chars"])
            if not links:
                raise InputError(path, f"no page mentions another page's title (titles: {o['titles']}); "
                                       "give a links file (data.links)")
        pairs = []
        for source, target in self.counted(links, "link"):
            first = pages[target].first
            sentences = split_sentences(first.contents) if first else []
            if sentences:
                related = frozenset(p.docid for p in pages[target].passages)
                pairs.append(Pair(rng.choice(sentences), rng.choice(pages[source].passages).docid, target,
                                  related=related))
        return pairs
