"""MoCo (``task: moco``, Contriever's momentum encoder): the key encoder's moving average after each step, the FIFO
queue of the newest keys, the loss against the queue by hand (masked entries left out), training on Contriever's
crops, exact resume with the key encoder and the queue in the trainer state, and the refused settings."""

from __future__ import annotations

import contextlib
import math
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from test_train_run import toy_config, training_records

from ance_ir.modeling.kinds import load_model
from ance_ir.train import list_checkpoints, train
from ance_ir.train.checkpoint import load_trainer_state
from ance_ir.train.dataset import PairStream, TrainData
from ance_ir.train.layout import RunDir
from ance_ir.train.moco import info_nce, queue_mask
from ance_ir.train.trainer import Trainer

PREFIX = "towers.query.backbone."


def settings(toy: Path, **changes) -> dict:
    """MoCo on the toy qrels (6 pairs): own key + queue only, 2 pairs a step."""
    return {"task.name": "moco", "model": str(toy / "bert-nodrop"), "negatives": "random", "n_negatives": 0,
            "in_batch": False, "eval_topics": None, "eval_qrels": None, "refresh_every": 0, "max_steps": 5,
            "batch_size": 2, "task.queue_size": 5, "task.momentum": 0.9, "temperature": 0.5, "normalize": True,
            **changes}


def key_weights(checkpoint: Path) -> dict[str, torch.Tensor]:
    """The key encoder's backbone weights in a checkpoint's trainer state, named as in ``model.safetensors``."""
    state = load_trainer_state(checkpoint)["moco_key"]
    return {k[len(PREFIX):]: v for k, v in state.items() if k.startswith(PREFIX)}


def test_the_key_encoder_is_the_moving_average_of_the_query_encoder_after_each_step(toy, tmp_path):
    run = tmp_path / "run"
    train(toy_config(toy, run, **settings(toy, max_steps=3, save_every=1)))
    start = load_model(toy / "bert-nodrop").query_tower.backbone.state_dict()
    checkpoints = list_checkpoints(RunDir(run))
    assert [c.name for c in checkpoints] == [f"step-{s:08d}" for s in (1, 2, 3)]
    previous = {k: v for k, v in start.items()}
    for checkpoint in checkpoints:
        query, key = load_file(checkpoint / "model.safetensors"), key_weights(checkpoint)
        assert key.keys() >= query.keys()
        for name, q in query.items():
            assert torch.equal(key[name], previous[name] * 0.9 + q * (1 - 0.9)), (checkpoint.name, name)
        assert not torch.equal(key["encoder.layer.0.attention.self.query.weight"],
                               query["encoder.layer.0.attention.self.query.weight"])
        previous = key


def test_the_queue_holds_the_newest_positive_keys_first_in_first_out(toy, tmp_path):
    run = tmp_path / "run"
    config = toy_config(toy, run, **settings(toy, max_steps=4, save_every=1))
    train(config)
    data = TrainData.load(config)
    pairs = data.pairs
    order = PairStream(len(pairs), config.seed).take(8)
    drawn = [pairs[i][1] for i in order]
    checkpoints = list_checkpoints(RunDir(run))
    for step, checkpoint in enumerate(checkpoints, 1):
        state = load_trainer_state(checkpoint)
        assert state["moco_queue_ids"] == drawn[:2 * step][-5:]
        assert state["moco_queue"].shape == (min(2 * step, 5), 32)
    # the last step's keys (newest, at the end): its positives by the key encoder as it was before that step's update
    model = load_model(checkpoints[2])  # the run's model settings, the key encoder's weights
    model.query_tower.backbone.load_state_dict(key_weights(checkpoints[2]))
    with torch.no_grad():
        expected = model.embed_passages(model.tokenize_passages([data.texts[d] for d in drawn[6:8]]))
    queue = load_trainer_state(checkpoints[3])["moco_queue"]
    assert torch.allclose(queue[-2:], expected, atol=1e-6)


def test_the_loss_is_infonce_of_the_key_against_the_queue_by_hand(toy, tmp_path):
    trainer = Trainer(toy_config(toy, tmp_path / "run", **settings(toy)))
    task = trainer.task
    dim = task.model.dim
    generator = torch.Generator().manual_seed(0)
    task.queue = F.normalize(torch.randn(4, dim, generator=generator), dim=-1)
    task.queue_ids = ["x1", "x2", "x3", "x4"]
    batch = task.next_batch()
    first = batch.mine[0]
    task.queue_ids[2] = first.positive  # the first query's own passage: never its negative
    queue, ids = task.queue.clone(), list(task.queue_ids)
    loss = task.loss(task.module, batch, contextlib.nullcontext).loss

    model, texts = task.model, trainer.data.texts
    with torch.no_grad():
        q = model.embed_queries(model.tokenize_queries([trainer.data.queries[g.qid] for g in batch.mine]))
        k = task.key.embed_passages(task.key.tokenize_passages([texts[g.positive] for g in batch.mine]))
    expected = 0.0
    for i, group in enumerate(batch.mine):
        negatives = [queue[j] for j in range(4) if ids[j] not in trainer.data.exclude[group.qid]]
        logits = torch.stack([q[i] @ k[i], *(q[i] @ n for n in negatives)]) / 0.5
        expected += -torch.log_softmax(logits, 0)[0].item() / len(batch.mine)
        if i == 0:
            assert len(negatives) == 3
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    # the batch's positive keys were enqueued after the loss: the newest two, the oldest two dropped (size 5)
    assert task.queue_ids == [*ids[1:], *(g.positive for g in batch.mine)][-5:]
    assert torch.allclose(task.queue[-2:], k, atol=1e-6)


def test_queue_mask_and_info_nce():
    mask = queue_mask(["q1", "q2"], ["a", "b", "a"], {"q1": frozenset({"a"}), "q2": frozenset()})
    assert mask.tolist() == [[True, False, True], [False, False, False]]
    batch, queue = torch.tensor([[2.0], [1.0]]), torch.tensor([[1.0, 0.0], [float("-inf"), 3.0]])
    loss = info_nce(batch, torch.zeros(2, dtype=torch.long), queue, 1.0)
    first = -math.log(math.exp(2) / (math.exp(2) + math.exp(1) + 1))
    second = -math.log(math.exp(1) / (math.exp(1) + math.exp(3)))
    assert loss.item() == pytest.approx((first + second) / 2, rel=1e-6)


def test_contriever_crops_train_with_in_batch_keys_and_resume_exactly(toy, tmp_path):
    changes = {"data_source": "contriever", "train_topics": None, "train_qrels": None, "data.min_words": 4,
               "negatives": "inbatch", "max_steps": 6, "task.queue_size": 3}
    straight, paused = tmp_path / "straight", tmp_path / "paused"
    train(toy_config(toy, straight, **settings(toy, **changes)))
    losses = [r["loss"] for r in training_records(straight)]
    assert len(losses) == 6 and all(map(math.isfinite, losses)) and losses[0] > 0  # in-batch keys from step 1
    train(toy_config(toy, paused, stop_at=2, **settings(toy, **changes)))
    train(toy_config(toy, paused, **settings(toy, **changes)))
    assert [r["loss"] for r in training_records(paused)] == losses
    mine, theirs = list_checkpoints(RunDir(paused))[-1], list_checkpoints(RunDir(straight))[-1]
    for name, tensor in load_file(theirs / "model.safetensors").items():
        assert torch.equal(load_file(mine / "model.safetensors")[name], tensor), name
    a, b = load_trainer_state(mine), load_trainer_state(theirs)
    assert torch.equal(a["moco_queue"], b["moco_queue"]) and a["moco_queue_ids"] == b["moco_queue_ids"]
    for name, tensor in b["moco_key"].items():
        assert torch.equal(a["moco_key"][name], tensor), name


@pytest.mark.parametrize(("changes", "message"), [
    ({"task.momentum": 1.0}, "task.momentum: must be in [0, 1), got 1.0"),
    ({"task.momentum": -0.1}, "task.momentum: must be in [0, 1), got -0.1"),
    ({"task.queue_size": 0}, "task.queue_size: must be at least 1, got 0"),
    ({"loss": "bce"}, "loss.name: MoCo's loss is InfoNCE"),
    ({"negatives": "ance"}, "negatives.name: ance mines from an ANN index"),
    ({"model.shared": False}, "model.shared: MoCo's key encoder is a moving average"),
])
def test_settings_it_cannot_train_with(toy, tmp_path, changes, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        toy_config(toy, tmp_path / "run", **settings(toy, **changes))


def test_two_processes_train_as_one_with_the_same_queue(toy, tmp_path):
    """torchrun, 2 CPU processes: each gathers the other's keys (in-batch and for the queue), so losses, weights,
    key encoder and queue match one process with the same global batch."""

    from test_train_distributed import train_two
    from test_train_run import toy_settings

    from ance_ir.train import build_config

    changes = {"negatives": "inbatch", "batch_size": 4, "max_steps": 4, "task.queue_size": 6}
    ddp = toy_settings(toy, tmp_path / "ddp", **settings(toy, **changes))
    train_two(ddp, tmp_path / "ddp.yaml")
    single = tmp_path / "single"
    train(build_config(None, {**ddp, "output": str(single)}))
    for mine, theirs in zip(training_records(tmp_path / "ddp"), training_records(single), strict=True):
        assert mine["loss"] == pytest.approx(theirs["loss"], rel=1e-4, abs=1e-7), mine["step"]
    a = load_trainer_state(list_checkpoints(RunDir(tmp_path / "ddp"))[-1])
    b = load_trainer_state(list_checkpoints(RunDir(single))[-1])
    assert a["moco_queue_ids"] == b["moco_queue_ids"] and len(b["moco_queue_ids"]) == 6
    torch.testing.assert_close(a["moco_queue"], b["moco_queue"], rtol=1e-4, atol=1e-5)
    for name, tensor in b["moco_key"].items():
        torch.testing.assert_close(a["moco_key"][name], tensor, rtol=1e-4, atol=1e-5)
