"""A training task from outside the package: the contrastive loss plus its passage-to-query direction."""

import torch
import torch.nn.functional as F

from ance_ir.train.contrastive import ContrastiveTask
from ance_ir.train.task import StepLoss, register_task


@register_task
class SymmetricTask(ContrastiveTask):
    name = "test-symmetric"
    options = {"reverse_weight": 0.5}
    grad_cache = False  # its loss takes the batch whole

    def loss(self, module, batch, autocast):
        queries, passages = self.encode(module, batch, autocast)
        forward = self.group_loss(queries, passages, batch)
        positives = passages[::batch.inputs.group_size]
        reverse = F.cross_entropy(positives @ queries.T, torch.arange(len(queries), device=queries.device))
        weight = self.ctx.config.task.options["reverse_weight"]
        return StepLoss(forward.loss + weight * reverse, forward.factor, forward.whole_batch)
