"""Cross-encoder scores as teacher scores: every passage of a set of training groups scored by the model (or the
mean of several models' scores, :class:`MeanScorer`), the ``score`` that ``data.source: groups`` hands to a
distillation loss (``GroupScores.teacher``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ance_ir.data import InputError, TrainingGroup, corpus_texts

if TYPE_CHECKING:
    import numpy as np
    import torch

    from ance_ir.modeling.colbert import ColBERT
    from ance_ir.modeling.cross_encoder import CrossEncoder


def group_passages(groups: Sequence[TrainingGroup], corpus: str | Path, groups_path: str | Path,
                   show_progress: bool = False) -> dict[str, str]:
    """The texts of every passage of ``groups``: the corpus's (a count on stderr with ``show_progress``, past
    ``BAR_DELAY_S``), else the group's own (``title``, ``text``: pretraining pairs carry new texts under new ids, as
    ``data.source: groups`` reads them); InputError naming the groups file for a passage with neither."""
    needed = {p.docid for g in groups for p in (*g.positives, *g.negatives)}
    texts = corpus_texts(corpus, needed, show_progress)
    for group in groups:
        for passage in (*group.positives, *group.negatives):
            if passage.docid in texts:
                continue
            own = passage.own_text()
            if own is None:
                raise InputError(groups_path, f"document {passage.docid!r} of query {group.query_id!r} is not in "
                                              f"the corpus {corpus} and has no text of its own")
            texts[passage.docid] = own
    return texts


class MeanScorer:
    """Several rerankers as one teacher: a pair's score is the mean of the models' scores of it (the Margin-MSE
    teacher of Hofstätter et al. averages three cross-encoders' scores). The models share one device, and the
    first model's precision describes the others' (each runs at the precision ``score_pairs`` is given)."""

    def __init__(self, models: Sequence[CrossEncoder | ColBERT]):
        if len(models) < 2:
            raise ValueError(f"a mean of scores needs at least two models, got {len(models)}")
        self.models = list(models)

    @property
    def device(self) -> torch.device:
        return self.models[0].device

    @property
    def inference_precision(self) -> str:
        return self.models[0].inference_precision

    def score_pairs(self, queries: Sequence[str], passages: Sequence[str], batch_size: int = 32,
                    precision: str | None = None, show_progress: bool = False) -> np.ndarray:
        """The mean of the models' scores of the pairs ``(queries[i], passages[i])``, float32 ``[N]``."""
        import numpy as np

        scores = [m.score_pairs(queries, passages, batch_size=batch_size, precision=precision,
                                show_progress=show_progress) for m in self.models]
        return np.mean(np.stack(scores).astype(np.float64), axis=0).astype(np.float32)


def score_groups(groups: Sequence[TrainingGroup], passages: Mapping[str, str],
                 model: CrossEncoder | ColBERT | MeanScorer, batch_size: int = 32, precision: str | None = None,
                 show_progress: bool = False, scored_by: str | None = None) -> list[TrainingGroup]:
    """``groups`` with each passage's ``score`` replaced by ``model``'s score of (query, passage), and
    ``scored_by`` (the model's name) recorded; the passages keep their order, ids, titles and texts. All pairs run
    in one :meth:`~CrossEncoder.score_pairs` call."""
    pairs = [(g.query, passages[p.docid]) for g in groups for p in (*g.positives, *g.negatives)]
    scores = iter(model.score_pairs([q for q, _ in pairs], [p for _, p in pairs], batch_size=batch_size,
                                    precision=precision, show_progress=show_progress).tolist())
    out = []
    for group in groups:
        positives = tuple(dataclasses.replace(p, score=next(scores)) for p in group.positives)
        negatives = tuple(dataclasses.replace(p, score=next(scores)) for p in group.negatives)
        out.append(dataclasses.replace(group, positives=positives, negatives=negatives, scored_by=scored_by))
    return out
