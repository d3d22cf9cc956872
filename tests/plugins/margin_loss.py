"""A loss from outside the package: hinge on the margin between the positive and each negative."""

import torch

from ance_ir.train.loss import ContrastiveLoss, register_loss


@register_loss
class MarginRankingLoss(ContrastiveLoss):
    name = "test-margin"
    options = {"margin": 1.0}

    def __call__(self, batch):
        own = batch.own
        return torch.relu(self.settings["margin"] - own[:, :1] + own[:, 1:]).mean()
