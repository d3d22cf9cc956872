"""The training collator: passages in length-sorted sub-batches give the same vectors, in group order."""

from __future__ import annotations

import pytest
import torch
from conftest import TOY_PASSAGES, TOY_TOPICS

from ance_ir.modeling import DenseEncoder
from ance_ir.train.collator import Collator, Group
from ance_ir.train.modeling import DualEncoderModule

GROUPS = [Group("q1", "d1", ("d8", "d3")), Group("q2", "d3", ("d7", "d5")), Group("q3", "d5", ("d2", "d4"))]


@pytest.fixture(scope="module")
def module(tiny_bert_dir) -> DualEncoderModule:
    return DualEncoderModule(DenseEncoder.from_pretrained(tiny_bert_dir, pooling="mean")).eval()


@pytest.mark.parametrize("buckets", [2, 3, 9, 20])
def test_buckets_give_the_vectors_of_one_batch_in_group_order(module, buckets):
    one = Collator(module.encoder, TOY_TOPICS, TOY_PASSAGES)(GROUPS)
    split = Collator(module.encoder, TOY_TOPICS, TOY_PASSAGES, passage_buckets=buckets)(GROUPS)
    assert len(one.passages) == 1 and one.restore is None
    assert len(split.passages) == min(buckets, 9)
    with torch.no_grad():
        q1, p1 = module(dict(one.queries), [dict(b) for b in one.passages], one.restore)
        q2, p2 = module(dict(split.queries), [dict(b) for b in split.passages], split.restore)
    torch.testing.assert_close(q2, q1)
    torch.testing.assert_close(p2, p1, atol=1e-5, rtol=1e-5)


def test_buckets_pad_less_than_one_batch(module):
    one = Collator(module.encoder, TOY_TOPICS, TOY_PASSAGES)(GROUPS)
    split = Collator(module.encoder, TOY_TOPICS, TOY_PASSAGES, passage_buckets=3)(GROUPS)
    widths = [b["input_ids"].shape[1] for b in split.passages]
    assert widths == sorted(widths) and widths[-1] == one.passages[0]["input_ids"].shape[1]
    assert sum(b["input_ids"].numel() for b in split.passages) < one.passages[0]["input_ids"].numel()
    assert sorted(split.restore.tolist()) == list(range(9))


def test_bucket_count_must_be_positive(module):
    with pytest.raises(ValueError, match="passage_buckets must be at least 1"):
        Collator(module.encoder, TOY_TOPICS, TOY_PASSAGES, passage_buckets=0)
