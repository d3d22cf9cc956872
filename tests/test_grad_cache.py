"""The gradient cache (``task.grad_cache_chunk``): the loss and every parameter's gradient equal the big batch's
(dropout on: the chunks' dropout masks are replayed), with and without in-batch negatives; a run trains with it;
the tasks without one refuse it."""

from __future__ import annotations

import contextlib

import pytest
import torch
from test_cross_encoder import task_context
from test_train_run import toy_config, training_records

from ance_ir.modeling import DenseEncoder
from ance_ir.train import train
from ance_ir.train.contrastive import ContrastiveTask, GroupBatch

SETTINGS = {"negatives": "random", "n_negatives": 2, "batch_size": 6, "refresh_every": 0, "eval_topics": None,
            "eval_qrels": None, "passage_buckets": 2}


def tasks(toy, tmp_path, model: str, chunk: int, in_batch: bool) -> tuple[ContrastiveTask, ContrastiveTask]:
    """The plain task and the cached one, on one model."""
    encoder = DenseEncoder.from_pretrained(toy / model)
    encoder.train()
    made = []
    for name, size in (("plain", 0), ("cached", chunk)):
        config = toy_config(toy, tmp_path / name, **SETTINGS, in_batch=in_batch, grad_cache_chunk=size)
        made.append(ContrastiveTask(task_context(config, tmp_path / name), encoder))
    return made[0], made[1]


def step(task: ContrastiveTask, batch: GroupBatch, seed: int) -> tuple[float, dict[str, torch.Tensor]]:
    """The loss and gradients of one backward (scaled by 2.5, as the trainer scales by factor / accumulation)."""
    task.model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    out = task.loss(task.module, batch, contextlib.nullcontext)
    (out.loss * 2.5).backward()
    grads = {n: p.grad.clone() for n, p in task.model.named_parameters() if p.grad is not None}
    return float(out.loss.detach()), grads


def assert_same(mine: tuple[float, dict], theirs: tuple[float, dict], tolerance: float = 1e-5) -> None:
    """Same loss; every gradient within ``tolerance`` of the norm of all gradients together (fp32 sums in
    another order; some gradients are zero in exact arithmetic, e.g. attention key biases)."""
    assert mine[0] == pytest.approx(theirs[0], rel=1e-6)
    assert mine[1].keys() == theirs[1].keys() and len(mine[1]) > 10
    scale = float(torch.cat([g.flatten() for g in theirs[1].values()]).norm())
    for name, grad in theirs[1].items():
        assert float((mine[1][name] - grad).norm()) <= tolerance * scale, name


@pytest.mark.parametrize("in_batch", [False, True])
def test_one_chunk_replays_the_big_batchs_dropout(toy, tmp_path, in_batch):
    plain, cached = tasks(toy, tmp_path, "bert", 6, in_batch)
    batch = plain.next_batch()
    big = step(plain, batch, seed=7)
    after_big = torch.rand(1)
    assert_same(step(cached, GroupBatch(batch.groups, batch.mine, cached.collate(batch.mine)), seed=7), big)
    assert torch.equal(torch.rand(1), after_big)  # the RNG goes on as after the big batch


@pytest.mark.parametrize("in_batch", [False, True])
def test_small_chunks_give_the_big_batchs_gradients(toy, tmp_path, in_batch):
    plain, cached = tasks(toy, tmp_path, "bert-nodrop", 2, in_batch)
    batch = plain.next_batch()
    chunks = cached.collate(batch.mine)
    assert len(chunks) == 3
    mine, big = step(cached, GroupBatch(batch.groups, batch.mine, chunks), seed=7), step(plain, batch, seed=7)
    # 7e-5 of the gradients' norm: the encoder alone, encoding the batch in pieces rather than whole, differs as much
    assert_same(mine, big, tolerance=5e-4)


@pytest.mark.parametrize("in_batch", [False, True])
def test_small_chunks_with_dropout_equal_the_batch_encoded_chunk_after_chunk(toy, tmp_path, in_batch):
    """With dropout, the reference is the big batch's loss over the chunks encoded in turn with a graph: the
    re-encoding must draw the same masks as the first pass."""
    plain, cached = tasks(toy, tmp_path, "bert", 2, in_batch)
    batch = plain.next_batch()
    chunks = cached.collate(batch.mine)
    mine = step(cached, GroupBatch(batch.groups, batch.mine, chunks), seed=7)
    plain.model.zero_grad(set_to_none=True)
    torch.manual_seed(7)
    encoded = [plain.encode_inputs(plain.module, c, contextlib.nullcontext) for c in chunks]
    out = plain.group_loss(torch.cat([q for q, _ in encoded]), torch.cat([p for _, p in encoded]), batch)
    (out.loss * 2.5).backward()
    assert_same(mine, (out.loss.item(), {n: p.grad.clone() for n, p in plain.model.named_parameters()
                                         if p.grad is not None}))
    other = step(cached, GroupBatch(batch.groups, batch.mine, chunks), seed=8)  # other masks, other gradients
    assert any(not torch.equal(other[1][name], grad) for name, grad in mine[1].items())

def test_a_run_trains_with_the_cache_and_other_tasks_refuse_it(toy, tmp_path):
    run = tmp_path / "run"
    train(toy_config(toy, run, **SETTINGS, in_batch=True, grad_cache_chunk=2, max_steps=4))
    assert len(training_records(run)) == 4
    with pytest.raises(ValueError, match="task 'cross-encoder' has no gradient cache"):
        toy_config(toy, tmp_path / "ce", **SETTINGS, grad_cache_chunk=2, **{"task.name": "cross-encoder"})
