"""The contrastive loss on hand-made vectors: pairwise (ANCE), grouped, temperature, in-batch and masking."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from ance_ir.train.collator import Group, in_batch_mask
from ance_ir.train.loss import LOSSES, ContrastiveLoss, GroupScores, build_loss, dense_group_scores, register_loss

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


def _distil(name: str, student: list[list[float]], teacher: list[list[float]], **options) -> float:
    scores = GroupScores(torch.tensor(student), torch.zeros(len(student), dtype=torch.long), len(student[0]), False,
                         torch.tensor(teacher))
    return build_loss(name, **options)(scores).item()


def test_mse_is_the_mean_squared_error_over_scored_passages():
    student, teacher = [[3.0, 1.0, 0.0], [2.0, 2.0, 1.0]], [[4.0, 1.0, 2.0], [0.0, math.nan, 1.0]]
    expected = (1 + 0 + 4 + 4 + 0) / 5  # the NaN entry is not scored by the teacher: left out
    assert _distil("mse", student, teacher) == pytest.approx(expected)
    halved = (((6 - 4) ** 2 + (2 - 1) ** 2 + (0 - 2) ** 2) + ((4 - 0) ** 2 + (2 - 1) ** 2)) / 5
    assert _distil("mse", student, teacher, temperature=0.5) == pytest.approx(halved)


def test_margin_mse_compares_positive_minus_negative_margins():
    student, teacher = [[3.0, 1.0, 0.0], [2.0, 2.0, 1.0]], [[4.0, 1.0, 2.0], [0.0, math.nan, 1.0]]
    # query 1: student margins 2, 3; teacher margins 3, 2. query 2: only (positive, third) is scored: 1 against -1
    expected = ((2 - 3) ** 2 + (3 - 2) ** 2 + (1 - (-1)) ** 2) / 3
    assert _distil("margin-mse", student, teacher) == pytest.approx(expected)


def test_kl_is_teacher_to_student_over_each_group():
    student, teacher = [[3.0, 1.0, 0.0], [2.0, 2.0, 1.0]], [[4.0, 1.0, 2.0], [0.0, math.nan, 1.0]]

    def softmax(values):
        exps = [math.exp(v) for v in values]
        return [e / sum(exps) for e in exps]

    def kl(p, q):
        return sum(a * math.log(a / b) for a, b in zip(p, q, strict=True))

    first = kl(softmax([4.0, 1.0, 2.0]), softmax([3.0, 1.0, 0.0]))
    second = kl(softmax([0.0, 1.0]), softmax([2.0, 1.0]))  # over the passages the teacher scored
    assert _distil("kl", student, teacher) == pytest.approx((first + second) / 2, rel=1e-6)
    sharper = kl(softmax([8.0, 2.0, 4.0]), softmax([3.0, 1.0, 0.0]))
    assert _distil("kl", [student[0]], [teacher[0]], teacher_temperature=0.5) == pytest.approx(sharper, rel=1e-6)
    assert _distil("kl", teacher[:1], teacher[:1]) == pytest.approx(0.0, abs=1e-7)


@pytest.mark.parametrize("name", ["mse", "margin-mse", "kl"])
def test_distillation_without_teacher_scores_is_an_error(name):
    scores = GroupScores(torch.zeros(2, 3), torch.zeros(2, dtype=torch.long), 3, False)
    with pytest.raises(ValueError, match="needs teacher scores"):
        build_loss(name)(scores)


def test_distillation_reads_own_groups_from_in_batch_scores():
    queries = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    passages = torch.tensor([[3.0, 0.0], [1.0, 1.0], [0.0, 2.0], [2.0, 2.0]])
    teacher = torch.tensor([[2.0, 0.0], [1.0, 1.0]])
    in_batch = build_loss("margin-mse")(dense_group_scores(queries, passages, 2, True, teacher=teacher))
    own = build_loss("margin-mse")(dense_group_scores(queries, passages, 2, False, teacher=teacher))
    assert in_batch.item() == pytest.approx(own.item()) and own.item() == pytest.approx(((2 - 2) ** 2 + 0 ** 2) / 2)


def _whole_batch() -> tuple[GroupScores, list[list[float]], list[list[float]]]:
    """Two queries in groups of 2, every passage scored by student and teacher; query 0's column 3 masked."""
    student = [[3.0, 1.0, 2.0, float("-inf")], [0.5, 0.0, 1.0, 2.5]]
    teacher = [[4.0, 2.0, 1.0, 9.0], [1.0, 0.0, 3.0, 1.0]]
    return GroupScores(torch.tensor(student), torch.tensor([0, 2]), 2, True, torch.tensor(teacher)), student, teacher


def test_a_whole_batch_teacher_distils_every_passage_the_student_scores():
    batch, student, teacher = _whole_batch()
    # query 0: positive column 0, masked column 3 left out; query 1: positive column 2
    margins = [(3 - 1, 4 - 2), (3 - 2, 4 - 1), (1 - 0.5, 3 - 1), (1 - 0, 3 - 0), (1 - 2.5, 3 - 1)]
    assert build_loss("margin-mse")(batch).item() == pytest.approx(sum((s - t) ** 2 for s, t in margins) / 5)
    errors = [(3 - 4) ** 2, (1 - 2) ** 2, (2 - 1) ** 2, (0.5 - 1) ** 2, 0.0, (1 - 3) ** 2, (2.5 - 1) ** 2]
    assert build_loss("mse")(batch).item() == pytest.approx(sum(errors) / 7)

    def log_softmax(values):
        total = math.log(sum(math.exp(v) for v in values))
        return [v - total for v in values]

    def kl(t, s):
        return sum(math.exp(a) * (a - b) for a, b in zip(log_softmax(t), log_softmax(s), strict=True))

    expected = (kl(teacher[0][:3], student[0][:3]) + kl(teacher[1], student[1])) / 2
    assert build_loss("kl")(batch).item() == pytest.approx(expected, rel=1e-6)


def test_a_whole_batch_teacher_gives_masked_passages_no_gradient():
    batch, _, _ = _whole_batch()
    scores = batch.scores.masked_fill(torch.isinf(batch.scores), 0.0).requires_grad_(True)
    for name in ("mse", "margin-mse", "kl"):
        masked = GroupScores(scores.masked_fill(torch.isinf(batch.scores), float("-inf")), batch.targets, 2, True,
                             batch.teacher)
        scores.grad = None
        build_loss(name)(masked).backward()
        assert torch.isfinite(scores.grad).all() and scores.grad[0, 3] == 0 and scores.grad[0, 2] != 0


def test_label_weight_adds_the_nll_of_the_positive_over_the_batch():
    queries = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    passages = torch.tensor([[3.0, 0.0], [1.0, 1.0], [0.0, 2.0], [2.0, 2.0]])
    teacher = torch.tensor([[2.0, 0.0], [1.0, 1.0]])
    for name in ("mse", "margin-mse", "kl"):
        scores = dense_group_scores(queries, passages, 2, True, teacher=teacher)
        plain = build_loss(name)(scores)
        both = build_loss(name, label_weight=0.5)(scores)
        assert both.item() == pytest.approx(plain.item() + 0.5 * NLL(queries, passages, 2, in_batch=True).item())


@pytest.mark.parametrize("name", ["mse", "margin-mse", "kl"])
def test_unscored_passages_get_no_gradient_and_no_nan(name):
    student = torch.tensor([[3.0, 1.0, 0.0], [2.0, 2.0, 1.0]], requires_grad=True)
    teacher = torch.tensor([[4.0, 1.0, 2.0], [0.0, math.nan, 1.0]])
    build_loss(name)(GroupScores(student, torch.zeros(2, dtype=torch.long), 3, False, teacher)).backward()
    assert torch.isfinite(student.grad).all() and student.grad[1, 1] == 0


def test_ranknet_weights_hard_pairs_one_and_in_batch_pairs_alpha():
    # two queries, groups of 2 (positive, hard negative); query 0's column 3 is masked (a judged passage)
    scores = torch.tensor([[3.0, 1.0, 2.0, float("-inf")],
                           [0.5, 0.0, 1.0, 2.5]])
    batch = GroupScores(scores, torch.tensor([0, 2]), 2, True)
    pair = lambda pos, neg: math.log1p(math.exp(neg - pos))  # noqa: E731
    hard = (pair(3.0, 1.0) + pair(1.0, 2.5)) / 2
    random = (pair(3.0, 2.0) + pair(1.0, 0.5) + pair(1.0, 0.0)) / 3
    assert build_loss("ranknet", random_weight=0.25)(batch).item() == pytest.approx(hard + 0.25 * random)
    assert build_loss("ranknet", random_weight=0.0)(batch).item() == pytest.approx(hard)
    own = GroupScores(torch.tensor([[3.0, 1.0], [1.0, 2.5]]), torch.tensor([0, 0]), 2, False)
    assert build_loss("ranknet")(own).item() == pytest.approx(hard)


def test_ranknet_gives_masked_passages_no_gradient():
    scores = torch.tensor([[3.0, 1.0, 2.0, 0.0], [0.5, 0.0, 1.0, 2.5]], requires_grad=True)
    mask = torch.tensor([[False, False, False, True], [False, False, False, False]])
    build_loss("ranknet")(GroupScores(scores.masked_fill(mask, float("-inf")), torch.tensor([0, 2]), 2,
                                      True)).backward()
    assert scores.grad[0, 3] == 0 and torch.isfinite(scores.grad).all() and scores.grad[0, 2] != 0


def test_hardest_is_the_pairwise_loss_against_the_top_scored_negative():
    scores = torch.tensor([[3.0, 1.0, 2.5, float("-inf")], [0.5, 0.0, 1.0, 4.0]])
    batch = GroupScores(scores, torch.tensor([0, 2]), 2, True)
    expected = (math.log1p(math.exp(2.5 - 3.0)) + math.log1p(math.exp(4.0 - 1.0))) / 2
    assert build_loss("hardest")(batch).item() == pytest.approx(expected)
    own = GroupScores(torch.tensor([[1.0, 3.0, -2.0]]), torch.tensor([0]), 3, False)
    assert build_loss("hardest", temperature=0.5)(own).item() == pytest.approx(math.log1p(math.exp(4.0)))
