"""The ME-BERT task (``task: mebert``): an :class:`~ance_ir.modeling.mebert.MeBertEncoder` trained on the
contrastive task's groups (same samplers, draws, checkpointed state, in-batch negatives, DDP gathering and ANCE
refresh), every (query, passage) score the best of the passage's ``m`` vectors (max over m of the dot products)."""

from __future__ import annotations

import functools
from typing import Any

from ance_ir.modeling.mebert import max_scores
from ance_ir.train.contrastive import ContrastiveTask
from ance_ir.train.loss import scored_groups
from ance_ir.train.settings import ConfigError
from ance_ir.train.task import register_task


@register_task
class MeBertTask(ContrastiveTask):
    """Each query's positive against its sampled (and optionally in-batch) negatives, scored max over m."""

    name = "mebert"
    model_kind = "mebert"
    score_groups = staticmethod(functools.partial(scored_groups, max_scores))

    @classmethod
    def check_config(cls, config: Any) -> None:
        if config.model.pooling not in (None, "cls"):
            raise ConfigError("model.pooling", "ME-BERT encodes a query as its CLS vector: cls only")
        super().check_config(config)
