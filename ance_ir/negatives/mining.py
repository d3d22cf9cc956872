"""Hard-negative mining from ranked candidates, and training groups built from it (pure Python).

:func:`mine` walks each query's candidates best first and keeps a candidate unless

* it is judged for the query (a positive, or any passage of grade >= the exclude grade): never a negative;
* its rank (0-based, in the candidate list as retrieved) is outside ``[skip, max_rank)``, like
  sentence-transformers' ``range_min`` / ``range_max`` in ``mine_hard_negatives``;
* it scores too close to the positive: ``score + margin > positive_score`` (absolute margin) or
  ``score > positive_score * (1 - relative_margin)`` (relative margin), sentence-transformers' rules, with
  ``positive_score`` the lowest score of the query's positives in the same ranking. A query none of whose
  positives was retrieved has no known positive score, and no margin is applied to it;

and stops at ``depth`` negatives. Removed candidates are not replaced by deeper ones beyond the ranking:
with ``depth`` equal to the retrieval depth, no skip and no margins, the result is the ranking minus the
judged passages, which is what the trainer's ``bm25`` sampler draws from
(:func:`ance_ir.train.negatives.search_bm25_candidates`, the same as :func:`ance_ir.bm25.bm25_negatives`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ance_ir.data import GroupPassage, Passage, Qrels, Topics, TrainingGroup, iter_corpus

if TYPE_CHECKING:
    from ance_ir.negatives.sources import CandidateSource

Ranking = Sequence[tuple[str, float]]


def check_mining_params(depth: int, skip: int = 0, max_rank: int | None = None, margin: float | None = None,
                        relative_margin: float | None = None) -> None:
    """Raise ValueError for parameters :func:`mine` cannot honour."""
    if depth < 1:
        raise ValueError(f"depth must be at least 1, got {depth}")
    if skip < 0:
        raise ValueError(f"skip must not be negative, got {skip}")
    if max_rank is not None and max_rank <= skip:
        raise ValueError(f"max rank ({max_rank}) must be greater than skip ({skip})")
    if margin is not None and not (math.isfinite(margin) and margin >= 0):
        raise ValueError(f"margin must be a finite number >= 0, got {margin}")
    if relative_margin is not None and not (0 <= relative_margin <= 1):
        raise ValueError(f"relative margin must be between 0 and 1, got {relative_margin}")


def positive_score(candidates: Ranking, positives: Collection[str]) -> float | None:
    """The lowest score of a positive in ``candidates`` (the hardest positive), None when none is there."""
    scores = [score for docid, score in candidates if docid in positives]
    return min(scores) if scores else None


def mine(ranking: Mapping[str, Ranking], positives: Mapping[str, Collection[str]],
         judged: Mapping[str, Collection[str]], depth: int, skip: int = 0, max_rank: int | None = None,
         margin: float | None = None, relative_margin: float | None = None) -> dict[str, list[tuple[str, float]]]:
    """Up to ``depth`` negatives ``(docid, score)`` per query of ``ranking``, best first (rules in the module doc).

    ``positives`` and ``judged`` map a query id to passages that are never negatives; ``positives`` also
    give the score the margins are measured from.
    """
    check_mining_params(depth, skip, max_rank, margin, relative_margin)
    out: dict[str, list[tuple[str, float]]] = {}
    for qid, candidates in ranking.items():
        pos = set(positives.get(qid, ()))
        never = pos | set(judged.get(qid, ()))
        anchor = positive_score(candidates, pos) if margin is not None or relative_margin is not None else None
        stop = len(candidates) if max_rank is None else min(max_rank, len(candidates))
        kept: list[tuple[str, float]] = []
        seen: set[str] = set()
        for docid, score in candidates[skip:stop]:
            if len(kept) >= depth:
                break
            if docid in never or docid in seen:
                continue
            if anchor is not None:
                if margin is not None and score + margin > anchor:
                    continue
                if relative_margin is not None and score > anchor * (1 - relative_margin):
                    continue
            seen.add(docid)
            kept.append((docid, float(score)))
        out[qid] = kept
    return out


@dataclass
class MiningReport:
    """Counts for the summary line of ``python -m ance_ir.negatives``."""

    topics: int = 0
    groups: int = 0
    without_positive: int = 0  # topics with no judged positive in the corpus: no group
    positives_not_in_corpus: int = 0  # judged positives missing from the corpus: left out
    without_candidates: int = 0  # queries the source returned nothing for
    candidates_not_in_corpus: int = 0  # candidates whose docid the corpus lacks: never negatives
    no_positive_score: int = 0  # margins asked for, but no positive of the query was retrieved
    negatives: int = 0
    short: int = 0  # groups with fewer than ``depth`` negatives


def pseudo_qrels(ranking: Mapping[str, Ranking], count: int, min_score: float | None, docids: Collection[str],
                 grade: int = 1) -> Qrels:
    """Pseudo labels: each query's top ``count`` candidates of ``docids`` scoring at least ``min_score`` (all of
    them when None), judged ``grade``; a query with none has no judgment."""
    qrels: Qrels = {}
    for qid, candidates in ranking.items():
        top = [d for d, score in candidates if d in docids and (min_score is None or score >= min_score)][:count]
        if top:
            qrels[qid] = {d: grade for d in top}
    return qrels


def build_groups(topics: Topics, qrels: Qrels, corpus: str | Path, source: CandidateSource, hits: int,
                 depth: int, skip: int = 0, max_rank: int | None = None, margin: float | None = None,
                 relative_margin: float | None = None, min_positive_grade: int = 1, exclude_grade: int = 1,
                 with_text: bool = False, progress: Callable[[str], None] | None = None,
                 pseudo_positives: int = 0, min_pseudo_score: float | None = None, grade_scores: bool = False,
                 ) -> tuple[list[TrainingGroup], MiningReport]:
    """Training groups for the topics that have a positive (judged >= ``min_positive_grade``, in ``corpus``).

    Candidates come from ``source`` (top ``hits`` per query); negatives are mined from them (:func:`mine`)
    with every passage judged >= ``exclude_grade``, every positive and every docid the corpus lacks excluded,
    and carry the source's score.
    Positives carry the source's score when the source retrieved them. Passage texts (and titles) are
    filled from ``corpus`` only with ``with_text``. Groups follow the topics' order. ``progress`` is called
    with a line to show just before the source retrieves (after all input was read and checked) and before the
    negatives are mined.

    ``pseudo_positives`` > 0 labels topics without judgments (``qrels`` unused): each query's top
    ``pseudo_positives`` candidates scoring at least ``min_pseudo_score`` are its positives
    (:func:`pseudo_qrels`; RocketQA's augmentation, confident pseudo pairs from a teacher's ranking), and its
    negatives are mined from the rest of the same ranking.

    ``grade_scores``: every passage carries its judged grade for the query (0 when unjudged) as its score instead
    of the source's, so the qrels themselves are the teacher a distillation loss reads (``loss: kl`` over a group
    is then listwise training on graded labels: a grade-3 positive above a grade-1 negative above an unjudged one).
    """
    check_mining_params(depth, skip, max_rank, margin, relative_margin)
    passages: dict[str, Passage] = {}
    docids: set[str] = set()
    for p in iter_corpus(corpus, show_progress=progress is not None):
        if with_text:
            passages[p.docid] = p
        docids.add(p.docid)

    report = MiningReport(topics=len(topics))
    ranking = None
    if pseudo_positives:
        if progress:
            progress(f"retrieving the top {hits} {source.name} candidates for {len(topics)} queries to label")
        ranking = source.retrieve(dict(topics), hits)
        qrels = pseudo_qrels(ranking, pseudo_positives, min_pseudo_score, docids, max(min_positive_grade, 1))
    positives: dict[str, list[str]] = {}
    judged: dict[str, set[str]] = {}
    for qid in topics:
        grades = qrels.get(qid, {})
        good = [d for d, g in grades.items() if g >= min_positive_grade]
        report.positives_not_in_corpus += sum(d not in docids for d in good)
        good = [d for d in good if d in docids]
        if not good:
            report.without_positive += 1
            continue
        positives[qid] = good
        judged[qid] = {d for d, g in grades.items() if g >= exclude_grade}
    queries = {qid: topics[qid] for qid in positives}
    if not queries:
        return [], report

    if ranking is None:
        if progress:
            progress(f"retrieving the top {hits} {source.name} candidates for {len(queries)} queries")
        ranking = source.retrieve(queries, hits)
    total = 0
    for qid in queries:
        candidates = ranking.get(qid, [])
        total += len(candidates)
        report.without_candidates += not candidates
        unknown = {d for d, _ in candidates if d not in docids}
        report.candidates_not_in_corpus += len(unknown)
        judged[qid] |= unknown
        if (margin is not None or relative_margin is not None) and candidates \
                and positive_score(candidates, positives[qid]) is None:
            report.no_positive_score += 1
    if not total:
        raise ValueError(f"the {source.name} source gave no candidates for any of the {len(queries)} queries; "
                         "were they retrieved for other topics?")
    if report.candidates_not_in_corpus == total:
        raise ValueError(f"none of the {total} candidates from the {source.name} source is a passage of {corpus}; "
                         "was its index built from another corpus?")
    if progress:
        progress(f"mining up to {depth} negatives for each of {len(queries)} queries from {total} candidates")
    mined = mine({qid: ranking.get(qid, []) for qid in queries}, positives, judged, depth, skip=skip,
                 max_rank=max_rank, margin=margin, relative_margin=relative_margin)

    def passage(docid: str, score: float | None) -> GroupPassage:
        if not with_text:
            return GroupPassage(docid, score=score)
        p = passages[docid]
        return GroupPassage(docid, text=p.contents, score=score, title=p.title or None)

    groups = []
    for qid, query in queries.items():
        if grade_scores:  # the judgments score every passage, not the source
            grades = qrels[qid]
            negatives = tuple(passage(d, float(grades.get(d, 0))) for d, _ in mined[qid])
            kept = tuple(passage(d, float(grades[d])) for d in positives[qid])
        else:
            scores: dict[str, float] = {}
            for docid, score in ranking.get(qid, []):
                scores.setdefault(docid, float(score))
            negatives = tuple(passage(d, s) for d, s in mined[qid])
            kept = tuple(passage(d, scores.get(d)) for d in positives[qid])
        groups.append(TrainingGroup(qid, query, kept, negatives, "grades" if grade_scores else source.name))
        report.negatives += len(negatives)
        report.short += len(negatives) < depth
    report.groups = len(groups)
    return groups, report
