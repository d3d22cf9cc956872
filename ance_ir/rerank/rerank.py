"""Reranking a first-stage run with a model that scores pairs (a cross-encoder, a poly-encoder, or ColBERT by
MaxSim): the top ``depth`` hits of each query by the model's score, the hits below ``depth`` after them in their
first-stage order."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ance_ir.data import InputError, Run, corpus_texts, min_max_scores

if TYPE_CHECKING:
    from ance_ir.modeling.colbert import ColBERT
    from ance_ir.modeling.cross_encoder import CrossEncoder


def load_reranker(name: str | Path, **overrides: Any) -> Any:
    """A model of a kind that scores (query, passage) pairs (``score_pairs``: the cross-encoder, the poly-encoder,
    ColBERT), with a trained head; ValueError for another kind or a bare backbone. A folder that records no kind
    (a Hugging Face checkpoint) is a cross-encoder."""
    from ance_ir.modeling.kinds import kind_class, load_model, saved_kind
    from ance_ir.modeling.resolve import resolve_model_path

    path = resolve_model_path(name)
    kind = (saved_kind(path) if Path(path).is_dir() else None) or "cross-encoder"
    if not hasattr(kind_class(kind), "score_pairs"):
        raise ValueError(f"{name}: is a {kind!r} model, which scores no (query, passage) pairs; rerank with a "
                         "cross-encoder, poly-encoder or colbert model")
    if "max_length" in overrides and kind != "cross-encoder":
        raise ValueError(f"--max-length is a cross-encoder setting; {name} is a {kind!r} model")
    model = load_model(path, kind, **overrides)
    if getattr(model, "fresh_head", False):
        raise ValueError(f"{name}: has no trained {kind} head (a plain backbone); train one with task: {kind}"
                         + (", or give a sequence-classification checkpoint" if kind == "cross-encoder" else ""))
    return model


def check_standalone(model: Any, name: str | Path) -> None:
    """ValueError for a cross-encoder trained as a residual over a first stage: its own scores rank only with that
    stage's added, so they cannot be the scores of training groups, of denoising or of a RocketQAv2 ranker."""
    if weight := getattr(model, "first_stage_weight", 0.0):
        raise ValueError(f"{name}: is a residual over a first stage (first_stage_weight {weight:g}): its own scores "
                         "rank only with that stage's added (python -m ance_ir.rerank --run); use a cross-encoder "
                         "trained without task.first_stage")


def check_run(run: Run, topics: Mapping[str, str], run_path: str | Path, topics_name: str) -> None:
    """InputError naming the run file when it has a query the topics do not have."""
    unknown = [qid for qid in run if qid not in topics]
    if unknown:
        more = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
        raise InputError(run_path, f"query {unknown[0]!r}{more} is not in the topics {topics_name}")


def passages_for(run: Run, depth: int, corpus: str | Path, run_path: str | Path,
                 show_progress: bool = False) -> dict[str, str]:
    """The texts of the documents within ``depth`` of ``run``, read from ``corpus`` (a count on stderr with
    ``show_progress``, past ``BAR_DELAY_S``); InputError for a missing one."""
    needed = {docid for ranking in run.values() for docid, _ in ranking[:depth]}
    texts = corpus_texts(corpus, needed, show_progress)
    for qid, ranking in run.items():
        for docid, _ in ranking[:depth]:
            if docid not in texts:
                raise InputError(run_path, f"document {docid!r} of query {qid!r} is not in the corpus {corpus}")
    return texts


def rerank(run: Run, topics: Mapping[str, str], passages: Mapping[str, str], model: CrossEncoder | ColBERT, depth: int,
           batch_size: int = 32, precision: str | None = None, show_progress: bool = False,
           first_stage_weight: float | None = None, first_stage_depth: int | None = None) -> Run:
    """``run`` with each query's top ``depth`` hits reordered by ``model``; tied scores (mostly passages of identical
    text) keep the first-stage order in the run, and trec_eval and pytrec_eval, which break score ties by docid,
    may score them in another.

    Each distinct (query, passage) text pair is scored once, so passages of identical text tie exactly (scored
    apart, their scores would differ by the rounding of their batches), all in one :meth:`~CrossEncoder.score_pairs`
    call (length-sorted batches across queries).
    The hits below ``depth`` follow in their first-stage order with scores ``lowest - 1``, ``lowest - 2``, ...
    (``lowest``: the query's lowest reranked score), so that every tool sorts them the same way.
    ``first_stage_weight`` > 0 (default: the model's, 0 for a model without one) adds that times the run's scores,
    min-max normalised over the query's top ``first_stage_depth`` hits (default: the model's, else ``depth``), to the
    model's: a cross-encoder trained as a residual over a first stage (``task.first_stage``) ranks so.
    """
    if depth < 1:
        raise ValueError(f"depth must be at least 1, got {depth}")
    if first_stage_weight is None:
        first_stage_weight = getattr(model, "first_stage_weight", 0.0)
    if not 0 <= first_stage_weight < float("inf"):
        raise ValueError(f"first_stage_weight must be a finite number >= 0, got {first_stage_weight}")
    pairs = [(qid, docid) for qid, ranking in run.items() for docid, _ in ranking[:depth]]
    texts = [(topics[qid], passages[docid]) for qid, docid in pairs]
    distinct = list(dict.fromkeys(texts))
    scores = model.score_pairs([q for q, _ in distinct], [p for _, p in distinct], batch_size=batch_size,
                               precision=precision, show_progress=show_progress)
    score_of = dict(zip(distinct, scores.tolist(), strict=True))
    prior = min_max_scores(run, first_stage_depth or getattr(model, "first_stage_depth", depth)) \
        if first_stage_weight else {}
    by_query: dict[str, list[tuple[str, float]]] = {}
    for (qid, docid), text in zip(pairs, texts, strict=True):
        score = score_of[text] + first_stage_weight * prior[qid].get(docid, 0.0) if prior else score_of[text]
        by_query.setdefault(qid, []).append((docid, score))
    out: Run = {}
    for qid, ranking in run.items():
        top = sorted(by_query.get(qid, []), key=lambda hit: -hit[1])  # stable: ties keep the run's order
        lowest = top[-1][1] if top else 0.0
        out[qid] = top + _below(ranking[depth:], lowest)
    return out


def _below(hits: Iterable[tuple[str, float]], lowest: float) -> list[tuple[str, float]]:
    return [(docid, lowest - i) for i, (docid, _) in enumerate(hits, start=1)]
