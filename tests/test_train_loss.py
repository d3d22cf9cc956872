"""The contrastive loss on hand-made vectors: pairwise (ANCE), grouped, temperature, in-batch and masking."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from ance_ir.train.collator import Group, in_batch_mask
from ance_ir.train.loss import LOSSES, ContrastiveLoss, build_loss, dense_group_scores, register_loss

_NLL = build_loss("nll")


def NLL(queries, passages, group_size, in_batch, mask=None, loss=_NLL):  # noqa: N802 - reads like the loss
    """The loss of dot-product scores of ``queries`` against grouped ``passages``."""
    return loss(dense_group_scores(queries, passages, group_size, in_batch, mask))


def test_pairwise_is_ance_logistic_loss():
    queries = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    passages = torch.tensor([[2.0, 0.0], [1.0, 0.0],  # q1: s+ = 2, s- = 1
                             [0.0, 1.0], [0.0, 3.0]])  # q2: s+ = 1, s- = 3
    expected = (math.log1p(math.exp(-1.0)) + math.log1p(math.exp(2.0))) / 2
    assert NLL(queries, passages, 2, in_batch=False).item() == pytest.approx(expected, rel=1e-6)
    margins = torch.tensor([1.0, -2.0])
    assert NLL(queries, passages, 2, in_batch=False).item() == pytest.approx(F.softplus(-margins).mean().item())


def test_grouped_softmax_with_temperature():
    queries = torch.tensor([[1.0, 2.0]])
    passages = torch.tensor([[1.0, 1.0], [0.0, 1.0], [2.0, -1.0]])  # scores 3, 2, 0
    for temperature in (1.0, 0.5):
        scores = [3 / temperature, 2 / temperature, 0 / temperature]
        expected = -scores[0] + math.log(sum(math.exp(s) for s in scores))
        loss = NLL(queries, passages, 3, in_batch=False, loss=build_loss("nll", temperature))
        assert loss.item() == pytest.approx(expected, rel=1e-6)


def test_in_batch_scores_every_passage_of_the_batch():
    queries = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    passages = torch.tensor([[3.0, 0.0], [1.0, 1.0], [0.0, 2.0], [2.0, 2.0]])
    # q1 scores: 3, 1, 0, 2 (positive col 0); q2 scores: 0, 1, 2, 2 (positive col 2)
    expected = ((-3 + math.log(math.exp(3) + math.exp(1) + 1 + math.exp(2)))
                + (-2 + math.log(1 + math.exp(1) + 2 * math.exp(2)))) / 2
    assert NLL(queries, passages, 2, in_batch=True).item() == pytest.approx(expected, rel=1e-6)
    own_groups_only = ((-3 + math.log(math.exp(3) + math.exp(1))) + (-2 + math.log(2 * math.exp(2)))) / 2
    assert NLL(queries, passages, 2, in_batch=False).item() == pytest.approx(own_groups_only, rel=1e-6)


def test_mask_removes_passages_from_the_softmax():
    queries = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    passages = torch.tensor([[3.0, 0.0], [1.0, 1.0], [0.0, 2.0], [2.0, 2.0]])
    mask = torch.zeros(2, 4, dtype=torch.bool)
    mask[0, 3] = True
    expected_q1 = -3 + math.log(math.exp(3) + math.exp(1) + 1)
    expected_q2 = -2 + math.log(1 + math.exp(1) + 2 * math.exp(2))
    loss = NLL(queries, passages, 2, in_batch=True, mask=mask)
    assert loss.item() == pytest.approx((expected_q1 + expected_q2) / 2, rel=1e-6)


def test_gradient_flows_to_queries_and_passages():
    queries = torch.randn(3, 4, requires_grad=True)
    passages = torch.randn(6, 4, requires_grad=True)
    NLL(queries, passages, 2, in_batch=True).backward()
    assert queries.grad.abs().sum() > 0 and passages.grad.abs().sum() > 0


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="expected 4 passage vectors"):
        NLL(torch.zeros(2, 3), torch.zeros(3, 3), 2, in_batch=False)


def test_in_batch_mask_hides_other_copies_of_relevant_passages():
    groups = [Group("q1", "d1", ("d5",)), Group("q1", "d2", ("d6",)), Group("q2", "d3", ("d1",))]
    exclude = {"q1": frozenset({"d1", "d2"}), "q2": frozenset({"d3"})}
    mask = in_batch_mask(groups, exclude)
    # batch passages: d1 d5 | d2 d6 | d3 d1
    assert mask.tolist() == [
        [False, False, True, False, False, True],   # q1/d1: d2 and the second d1 are relevant to q1
        [True, False, False, False, False, True],   # q1/d2: both copies of d1
        [False, False, False, False, False, False],  # q2: only d3 is relevant, and it is its own positive
    ]


def test_losses_are_chosen_by_name():
    with pytest.raises(ValueError, match="unknown loss"):
        build_loss("hinge")

    @register_loss
    class Doubled(ContrastiveLoss):
        name = "test-doubled"

        def __call__(self, batch):
            return 2 * _NLL(batch)

    try:
        q, p = torch.randn(2, 3), torch.randn(4, 3)
        doubled = NLL(q, p, 2, False, loss=build_loss("test-doubled"))
        assert doubled.item() == pytest.approx(2 * NLL(q, p, 2, False).item())
    finally:
        del LOSSES["test-doubled"]
