"""A model kind from outside the package: a dense encoder that max-pools its token states."""

import torch

from ance_ir.modeling import DenseEncoder
from ance_ir.modeling.kinds import register_model_kind


@register_model_kind
class MaxPoolEncoder(DenseEncoder):
    kind = "test-maxpool"
    sentence_transformers = False  # sentence-transformers' files would pool with CLS

    def _embed(self, tower, batch):
        batch = {k: v.to(self.device) for k, v in batch.items()}
        hidden = tower.backbone(**batch).last_hidden_state
        padding = batch["attention_mask"].unsqueeze(-1) == 0
        return hidden.masked_fill(padding, torch.finfo(hidden.dtype).min).max(dim=1).values
