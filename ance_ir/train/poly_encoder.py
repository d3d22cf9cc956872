"""The poly-encoder task (``task: poly-encoder``): a :class:`~ance_ir.modeling.poly_encoder.PolyEncoder` trained
on the contrastive task's groups (same samplers, draws and checkpointed state, in-batch negatives gathered under
DDP), each (query, passage) pair scored by the passage vector's attention over the query's ``m`` code vectors.

A poly-encoder indexes no corpus, so there is no ANN refresh: no ``ance`` negatives, no ``refresh.eval_topics``
(evaluate the ``final/`` model by reranking a run with ``python -m ance_ir.rerank``).
"""

from __future__ import annotations

import functools
from typing import Any

from ance_ir.modeling.poly_encoder import poly_scores
from ance_ir.train.contrastive import ContrastiveTask
from ance_ir.train.loss import scored_groups
from ance_ir.train.settings import ConfigError
from ance_ir.train.task import register_task


@register_task
class PolyEncoderTask(ContrastiveTask):
    """Each query's positive against its sampled (and optionally in-batch) negatives, scored by the poly-encoder."""

    name = "poly-encoder"
    model_kind = "poly-encoder"
    no_refresh = "a poly-encoder builds no index during training"
    static_negatives = "bm25, dpr, inbatch, groups, candidates, static or random"
    evaluate_with = "python -m ance_ir.rerank"
    score_groups = staticmethod(functools.partial(scored_groups, poly_scores))

    @classmethod
    def check_config(cls, config: Any) -> None:
        if config.model.pooling not in (None, "cls"):
            raise ConfigError("model.pooling", "a poly-encoder encodes a passage as its CLS vector: cls only")
        if config.model.normalize:
            raise ConfigError("model.normalize", "a poly-encoder attends with dot products of unnormalised vectors")
        cls.check_mlm_weight(config)
        super(ContrastiveTask, cls).check_config(config)  # GroupTask's: ContrastiveTask's refuses index None
