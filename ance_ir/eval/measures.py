"""Measure names: trec_eval's (``ndcg_cut.10``), pytrec_eval's output keys (``ndcg_cut_10``) and short aliases.

Every spelling resolves to one or more :class:`Measure` s, each one value per query under one output key:

* trec_eval names with parameters, as ``trec_eval -m`` takes them: ``P.5``, ``recall.20,100``, ``ndcg_cut.10``,
  ``map_cut.100``, ``success.1``, ``relative_P.5``, ``iprec_at_recall.0.10``, ``Rprec_mult.0.5``; without
  parameters a cut-off family gives trec_eval's default cut-offs (``P`` = ``P_5`` ... ``P_1000``);
* pytrec_eval's output keys: ``ndcg_cut_10``, ``recall_100``, ``P_5``, ``iprec_at_recall_0.10``;
* the parameterless measures by name: ``map``, ``ndcg``, ``bpref``, ``Rprec``, ``infAP``, ``gm_map``,
  ``num_rel_ret``, ``set_F`` ... (every name in ``pytrec_eval.supported_measures`` except the non-numeric
  ``runid`` and ``relstring``);
* short aliases, case-insensitive: ``ndcg@10``, ``r@20``/``recall@20``, ``p@5``/``precision@5``, ``map@100``,
  ``success@5``, ``mrr@10``;
* ``judged@K`` (``judged.K``), computed here (pytrec_eval lacks it): the share of each query's top K hits judged at
  any grade (out of its hits where it has fewer than K), as ir_measures' ``Judged@K`` but with trec_eval's order
  of tied scores (ir_measures puts ties in docid order); how much of a run's score rests on judged passages.
  (Pyserini's ``trec_eval -m judged.K`` pools every query's top K and divides by the hits there, run queries
  without judgments included: the same mean when each query has K hits and judgments.)

Reciprocal rank is always taken over the top K hits (trec_eval ``-M K``): ``mrr@K``; ``recip_rank`` is
``mrr@10``, this project's MRR since the start, and keeps the output key ``recip_rank``; any other K has the
key ``recip_rank_cut_K``. For trec_eval's uncut ``recip_rank`` ask ``mrr@K`` with K at least the run's depth.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

import pytrec_eval

MRR = "recip_rank"
MRR_DEPTH = 10  # what ``recip_rank`` and the legacy ``mrr@10`` mean
JUDGED = "judged"  # the one measure computed here, not by pytrec_eval

# families whose parameters are rank cut-offs, with trec_eval's default cut-offs
_CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
CUTOFF_FAMILIES: dict[str, tuple[int, ...]] = {
    "P": _CUTOFFS, "recall": _CUTOFFS, "ndcg_cut": _CUTOFFS, "map_cut": _CUTOFFS, "relative_P": _CUTOFFS,
    "success": (1, 5, 10),
}
# families whose parameters are levels written with two decimals, with trec_eval's defaults
LEVEL_FAMILIES: dict[str, tuple[str, ...]] = {
    "iprec_at_recall": tuple(f"{i / 10:.2f}" for i in range(11)),
    "Rprec_mult": tuple(f"{i / 5:.2f}" for i in range(1, 11)),
}
# pytrec_eval returns these as 0.0 placeholders: they are not measures of effectiveness
NOT_NUMERIC = ("runid", "relstring")

# short aliases (lower case) -> family taking ``@K``
AT_ALIASES: dict[str, str] = {
    "ndcg": "ndcg_cut", "ndcg_cut": "ndcg_cut", "r": "recall", "recall": "recall", "p": "P", "precision": "P",
    "map": "map_cut", "map_cut": "map_cut", "success": "success", "relative_p": "relative_P",
    "mrr": MRR, "recip_rank": MRR,
}

_FAMILIES = sorted(set(pytrec_eval.supported_measures) - set(NOT_NUMERIC), key=len, reverse=True)
_BY_LOWER = {f.lower(): f for f in _FAMILIES}
_INT = re.compile(r"\d+")
_LEVEL = re.compile(r"\d+(\.\d{1,2})?")
_MRR_CUT = re.compile(r"(?:recip_rank|mrr)_cut[._](\S+)", re.IGNORECASE)
_JUDGED = re.compile(r"judged[@._](\S+)", re.IGNORECASE)


@dataclass(frozen=True)
class Measure:
    """One value per query: pytrec_eval ``family`` with ``param`` (None: none), over the top ``depth`` hits."""

    family: str
    param: str | None = None
    depth: int | None = None

    @property
    def pytrec_key(self) -> str:
        """The key pytrec_eval returns the value under."""
        return f"{self.family}_{self.param}" if self.param is not None else self.family

    @property
    def key(self) -> str:
        """The output key: pytrec_eval's, except ``recip_rank_cut_K`` for reciprocal rank over K != 10 hits."""
        if self.family == MRR and self.depth != MRR_DEPTH:
            return f"{MRR}_cut_{self.depth}"
        return self.pytrec_key


def _cutoff(text: str, spelling: str) -> str:
    if not _INT.fullmatch(text) or int(text) < 1:
        raise ValueError(f"metric {spelling!r}: cut-off {text!r} is not a positive integer")
    return str(int(text))


def _level(text: str, spelling: str, family: str) -> str:
    if not _LEVEL.fullmatch(text):
        raise ValueError(f"metric {spelling!r}: level {text!r} is not a number with at most two decimals")
    value = float(text)
    if family == "iprec_at_recall" and value > 1:
        raise ValueError(f"metric {spelling!r}: recall level {text!r} is above 1")
    if family == "Rprec_mult" and value <= 0:
        raise ValueError(f"metric {spelling!r}: multiplier {text!r} is not positive")
    return f"{value:.2f}"


def _with_params(family: str, params: list[str] | None, spelling: str) -> list[Measure]:
    """Measures of ``family`` for ``params`` (None: the family's defaults), parameters checked."""
    if family in CUTOFF_FAMILIES:
        values = [_cutoff(p, spelling) for p in params] if params else [str(c) for c in CUTOFF_FAMILIES[family]]
    elif family in LEVEL_FAMILIES:
        values = [_level(p, spelling, family) for p in params] if params else list(LEVEL_FAMILIES[family])
    elif params:
        raise ValueError(f"metric {spelling!r}: {family} takes no parameters here (ask for {family!r})")
    else:
        return [Measure(MRR, None, MRR_DEPTH) if family == MRR else Measure(family)]
    return [Measure(family, v) for v in dict.fromkeys(values)]


def _family(name: str) -> str | None:
    return name if name in _FAMILIES else _BY_LOWER.get(name.lower())


def suggestions(spelling: str) -> list[str]:
    """Close matches for an unknown spelling (aliases with typical cut-offs, trec_eval names)."""
    vocabulary = ["ndcg@10", "r@100", "recall@100", "p@10", "precision@10", "mrr@10", "map@100", "success@10",
                  "judged@10", "ndcg_cut.10", "recall.100", "P.10", "map_cut.100", "success.10", *_FAMILIES]
    lower = {v.lower(): v for v in vocabulary}
    return [lower[m] for m in difflib.get_close_matches(spelling.lower(), list(lower), n=5, cutoff=0.6)]


def _unknown(spelling: str) -> ValueError:
    close = suggestions(spelling)
    hint = f"close matches: {', '.join(close)}" if close else "see python -m ance_ir.eval --help for the names"
    return ValueError(f"unknown metric {spelling!r}; {hint}")


def parse_measure(spelling: str) -> list[Measure]:
    """The measures a spelling stands for (several for a cut-off family without cut-offs, e.g. ``P``).

    Raises ValueError, naming close matches, for an unknown name, and for a bad parameter.
    """
    text = spelling.strip()
    if not text:
        raise ValueError("empty metric name")
    if m := _JUDGED.fullmatch(text):
        return [Measure(JUDGED, _cutoff(m.group(1), spelling))]
    if "@" in text:
        name, _, k = text.partition("@")
        family = AT_ALIASES.get(name.lower()) or _family(name)
        if family is None or (family not in CUTOFF_FAMILIES and family != MRR):
            raise _unknown(spelling)
        depth = _cutoff(k, spelling)
        return [Measure(MRR, None, int(depth))] if family == MRR else [Measure(family, depth)]
    if m := _MRR_CUT.fullmatch(text):
        return [Measure(MRR, None, int(_cutoff(m.group(1), spelling)))]
    if family := _family(text):
        return _with_params(family, None, spelling)
    if text.lower() in NOT_NUMERIC:
        raise ValueError(f"metric {spelling!r} is not a numeric measure")
    for family in _FAMILIES:  # longest names first: ``map_cut_100`` is map_cut, not map
        head, rest = text[:len(family)], text[len(family):]
        if head.lower() != family.lower() or rest[:1] not in (".", "_") or not rest[1:2].isdigit():
            continue
        return _with_params(family, rest[1:].split(",") if rest[0] == "." else [rest[1:]], spelling)
    raise _unknown(spelling)


def parse_measures(spellings: list[str]) -> list[Measure]:
    """All measures of several spellings, in order, each output key once."""
    measures: dict[str, Measure] = {}
    for spelling in spellings:
        for measure in parse_measure(spelling):
            measures.setdefault(measure.key, measure)
    return list(measures.values())


def trec_eval_spec(measures: list[Measure]) -> set[str]:
    """pytrec_eval measure strings (``P.5,10``) for measures that share a depth."""
    params: dict[str, list[str]] = {}
    for m in measures:
        params.setdefault(m.family, [])
        if m.param is not None:
            params[m.family].append(m.param)
    return {f"{family}.{','.join(dict.fromkeys(ps))}" if ps else family for family, ps in params.items()}


def label(key: str) -> str:
    """A short display name for an output key (``ndcg_cut_10`` -> ``ndcg@10``); the key itself otherwise."""
    if key == MRR:
        return f"mrr@{MRR_DEPTH}"
    for prefix, short in ((f"{MRR}_cut_", "mrr"), ("ndcg_cut_", "ndcg"), ("recall_", "r"), ("map_cut_", "map"),
                          ("P_", "p"), ("success_", "success"), (f"{JUDGED}_", JUDGED)):
        if key.startswith(prefix) and key[len(prefix):].isdigit():
            return f"{short}@{key[len(prefix):]}"
    return key
