"""QGen (Ma et al., 2021; the survey's "QGen"): queries a generator wrote for the corpus's passages, each paired with
its passage; trained with the other passages of the batch as negatives (MNRL, InfoNCE over the batch).

The queries come from ``queries`` (``data.queries``), the side file ``python -m ance_ir.expand --generator G``
writes beside an expanded corpus (``OUTPUT.queries.jsonl``): one JSON object per line, ``{"docid": ...,
"queries": [...]}``. ``per_passage`` keeps each passage's first N queries (0: all); empty queries are skipped.
A passage's queries are one family: they are never each other's in-batch negatives.
"""

from __future__ import annotations

import random
from pathlib import Path

from ance_ir.data import InputError
from ance_ir.data.corpus import Passage
from ance_ir.data.lines import iter_lines, json_object
from ance_ir.pretrain_data.base import Pair, PretrainSource
from ance_ir.train.dataset import register_data_source
from ance_ir.train.settings import ConfigError


def read_generated_queries(path: str | Path) -> dict[str, list[str]]:
    """``{docid: [query, ...]}`` of a generated-queries file; InputError naming the line of a bad or repeated one."""
    out: dict[str, list[str]] = {}
    for lineno, line in iter_lines(path):
        obj = json_object(path, lineno, line)
        if not isinstance(obj.get("docid"), str) or not obj["docid"].strip():
            raise InputError(path, 'expected an object with a non-empty "docid" string', lineno)
        queries = obj.get("queries")
        if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
            raise InputError(path, '"queries" must be a list of strings', lineno)
        if obj["docid"] in out:
            raise InputError(path, f"passage {obj['docid']!r} is listed twice", lineno)
        out[obj["docid"]] = queries
    return out


@register_data_source
class QGenSource(PretrainSource):
    name = "qgen"
    options = {"queries": None, "per_passage": 0}
    limits = {"per_passage": (0, None)}
    no_pairs = "no passage has a generated query"

    @classmethod
    def check_config(cls, config) -> None:
        options = config.data.options
        if not options["queries"]:
            raise ConfigError("data.queries", "QGen trains on generated queries: the OUTPUT.queries.jsonl file of "
                                              "python -m ance_ir.expand --generator G")
        super().check_config(config)

    def generate(self, path: Path, passages: list[Passage], rng: random.Random) -> list[Pair]:
        source = self.data.options["queries"]
        generated = read_generated_queries(source)
        corpus = {p.docid for p in passages}
        unknown = next((d for d in generated if d not in corpus), None)
        if unknown is not None:
            raise InputError(source, f"passage {unknown!r} is not in the corpus {path}")
        per = self.data.options["per_passage"]
        return [Pair(" ".join(query.split()), docid, docid, related=frozenset({docid}))
                for docid, queries in generated.items() for query in (queries[:per] if per else queries)
                if query.strip()]
