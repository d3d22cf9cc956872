"""Masked-LM pretraining (``task: mlm``, model kind ``mlm``): BERT's masking rule (rate, 80/10/10, special tokens,
seeded and independent of padding), the loss going down on the toy corpus, exact resume, the result loading as the
backbone of a dense model, the corpus data source and the refused settings."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TOY_PASSAGES
from safetensors.torch import load_file
from test_train_run import toy_config, training_records

from ance_ir.modeling import DenseEncoder
from ance_ir.modeling.kinds import load_model, saved_kind
from ance_ir.modeling.mlm import MaskedLM
from ance_ir.train import list_checkpoints, train
from ance_ir.train.arguments import build_config
from ance_ir.train.checkpoint import load_trainer_state
from ance_ir.train.layout import RunDir
from ance_ir.train.mlm import IGNORE, Masking, TokenMasker

MASK_ID = 4


def settings(toy: Path, **changes) -> dict:
    return {"ance": False, "task.name": "mlm", "model": str(toy / "bert-nodrop"), "data_source": "corpus",
            "train_topics": None, "train_qrels": None, "pooling": None, "query_max_length": None,
            "passage_max_length": None, "batch_size": 4, "max_steps": 10, "lr": 1e-2, **changes}


def masked(seed: int, rows: int = 400, length: int = 100) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random ids 10..999 with special ids 2 and 3 at each row's ends; (original, masked, labels)."""
    ids = torch.from_numpy(np.random.default_rng(0).integers(10, 1000, size=(rows, length)))
    ids[:, 0], ids[:, -1] = 2, 3
    maskable = ids >= 10
    rngs = [np.random.default_rng([seed, row]) for row in range(rows)]
    inputs, labels = Masking().apply(ids, maskable, [length] * rows, rngs, MASK_ID, torch.arange(10, 1000))
    return ids, inputs, labels


def test_the_masking_rule_is_berts_15_percent_then_80_10_10():
    ids, inputs, labels = masked(seed=1)
    chosen = labels != IGNORE
    assert torch.equal(labels[chosen], ids[chosen]) and torch.equal(inputs[~chosen], ids[~chosen])
    assert not chosen[:, 0].any() and not chosen[:, -1].any()  # special tokens are never chosen
    rate = chosen.sum().item() / (ids >= 10).sum().item()
    assert rate == pytest.approx(0.15, abs=0.005)  # 39,200 maskable tokens: the standard error is 0.0018
    n = chosen.sum().item()
    as_mask = (inputs[chosen] == MASK_ID).sum().item() / n
    kept = (inputs[chosen] == ids[chosen]).sum().item() / n
    replaced = 1 - as_mask - kept
    assert as_mask == pytest.approx(0.8, abs=0.015)
    assert kept == pytest.approx(0.1, abs=0.01)
    assert replaced == pytest.approx(0.1, abs=0.01)
    assert ((inputs[chosen] >= 10) | (inputs[chosen] == MASK_ID)).all()  # random tokens are never special


def test_the_masks_are_drawn_from_the_seed():
    _, first, labels = masked(seed=1)
    _, again, labels_again = masked(seed=1)
    _, other, _ = masked(seed=2)
    assert torch.equal(first, again) and torch.equal(labels, labels_again)
    assert not torch.equal(first, other)


def test_a_passage_is_masked_alike_whatever_its_batch_pads_it_to(toy):
    tokenizer = load_model(toy / "bert-nodrop", "mlm").tokenizer
    masker = TokenMasker(tokenizer, Masking(probability=0.5), max_length=64, seed=3)
    short, long = TOY_PASSAGES["d1"], TOY_PASSAGES["d6"] + " " + TOY_PASSAGES["d3"]
    alone, alone_labels = masker([short], batch=7, first_row=1)
    padded, padded_labels = masker([long, short], batch=7, first_row=0)  # row 1 of the same batch, padded
    n = alone["input_ids"].shape[1]
    assert padded["input_ids"].shape[1] > n
    assert torch.equal(padded["input_ids"][1, :n], alone["input_ids"][0])
    assert torch.equal(padded_labels[1, :n], alone_labels[0]) and (padded_labels[1, n:] == IGNORE).all()
    special = torch.isin(padded["input_ids"], torch.tensor(tokenizer.all_special_ids))
    original = tokenizer([long, short], padding="longest", return_tensors="pt")["input_ids"]
    assert (padded_labels[torch.isin(original, torch.tensor(tokenizer.all_special_ids))] == IGNORE).all()
    assert special.any()  # [CLS], [SEP], [PAD] and [MASK] are there


def test_a_bare_encoder_gets_a_new_head_and_a_masked_lm_keeps_its_own(toy, tmp_path, capsys):
    model = load_model(toy / "bert-nodrop", "mlm")
    assert isinstance(model, MaskedLM) and model.head_initialised
    assert "has no MLM head weights" in capsys.readouterr().err
    model.save_pretrained(tmp_path / "mlm")
    assert saved_kind(tmp_path / "mlm") is None
    again = load_model(tmp_path / "mlm", "mlm")
    assert not again.head_initialised and "no MLM head" not in capsys.readouterr().err
    for name, tensor in model.state_dict().items():
        assert torch.equal(again.state_dict()[name], tensor), name


def test_the_loss_goes_down_and_the_result_is_a_dense_backbone(toy, tmp_path):
    run = tmp_path / "run"
    train(toy_config(toy, run, **settings(toy, max_steps=40, batch_size=8, **{"task.mlm_probability": 0.3})))
    losses = [r["loss"] for r in training_records(run)]
    assert len(losses) == 40 and all(map(math.isfinite, losses))
    assert sum(losses[-5:]) < 0.8 * sum(losses[:5])
    final = RunDir(run).final
    assert saved_kind(final) is None and "cls.predictions.transform.dense.weight" in load_file(
        final / "model.safetensors")
    card = (final / "README.md").read_text()
    assert "A `mlm` model trained" in card and "a backbone to train from" in card
    dense = load_model(final)  # what model.name: RUN/final gives the contrastive configs
    assert isinstance(dense, DenseEncoder)
    trained = load_file(final / "model.safetensors")
    for name, tensor in dense.query_tower.backbone.state_dict().items():
        key = f"bert.{name}" if f"bert.{name}" in trained else name
        assert torch.equal(trained[key], tensor), name
    contrastive = tmp_path / "contrastive"
    train(toy_config(toy, contrastive, model=str(final), negatives="random", n_negatives=1, eval_topics=None,
                     eval_qrels=None, refresh_every=0, max_steps=2))
    assert len(training_records(contrastive)) == 2


def test_a_stopped_run_resumes_exactly(toy, tmp_path, capsys):
    straight, paused = tmp_path / "straight", tmp_path / "paused"
    train(toy_config(toy, straight, **settings(toy)))
    train(toy_config(toy, paused, stop_at=4, **settings(toy)))
    capsys.readouterr()
    train(toy_config(toy, paused, **settings(toy)))
    assert "resuming with new stop_at\n" in capsys.readouterr().err  # not passage_buckets, which it does not read
    mine, theirs = load_file(RunDir(paused).final / "model.safetensors"), load_file(
        RunDir(straight).final / "model.safetensors")
    assert mine.keys() == theirs.keys()
    for name, tensor in theirs.items():
        assert torch.equal(mine[name], tensor), name
    assert [r["loss"] for r in training_records(paused)] == [r["loss"] for r in training_records(straight)]
    # the run's config.json trains again as a config file: nothing it records is a setting the task ignores
    assert build_config(RunDir(paused).config, {}).task.passage_buckets is None


@pytest.mark.parametrize(("changes", "message"), [
    ({"task.mlm_probability": 0.0}, "task.mlm_probability: must be in (0, 1), got 0.0"),
    ({"task.mlm_probability": 1.5}, "task.mlm_probability: must be in (0, 1)"),
    ({"task.mask_share": -0.1}, "task.mask_share: must be in [0, 1]"),
    ({"task.mask_share": 0.8, "task.random_share": 0.3}, "task.random_share: mask_share + random_share"),
    ({"task.max_length": 2}, "task.max_length: must be at least 3"),
    ({"task.head_warmup_steps": -1}, "task.head_warmup_steps: must not be negative, got -1"),
    ({"eval_topics": "TOPICS"}, "(its checkpoints: save_every); evaluate its final/ model with python -m "
                                "ance_ir.encode --encoder RUN"),
    ({"task.name": "contrastive"}, "data.source: corpus brings passages and no (query, positive) pairs"),
    ({"loss": "bce"}, "loss.name: task 'mlm' trains with its own loss"),
])
def test_settings_it_cannot_train_with(toy, tmp_path, changes, message):
    if changes.get("eval_topics"):
        changes = {**changes, "eval_topics": str(toy / "topics.tsv")}
    with pytest.raises(ValueError, match=re.escape(message)):
        toy_config(toy, tmp_path / "run", **settings(toy, **changes))


def test_the_contrastive_task_adds_the_mlm_loss_of_its_passages_and_resumes_exactly(toy, tmp_path):
    base = {"model": str(toy / "bert-nodrop"), "negatives": "random", "n_negatives": 1, "in_batch": True,
            "eval_topics": None, "eval_qrels": None, "refresh_every": 0, "max_steps": 4}
    joint = {**base, "task.mlm_weight": 0.5}
    plain_run, joint_run, paused = tmp_path / "plain", tmp_path / "joint", tmp_path / "paused"
    train(toy_config(toy, plain_run, **base))
    train(toy_config(toy, joint_run, **joint))
    plain, records = training_records(plain_run), training_records(joint_run)
    assert all(r["mlm_loss"] > 0 for r in records) and not any("mlm_loss" in r for r in plain)
    # the first step's model is the same: its loss is the contrastive loss plus half the MLM loss
    assert records[0]["loss"] == pytest.approx(plain[0]["loss"] + 0.5 * records[0]["mlm_loss"], rel=1e-5)
    final = RunDir(joint_run).final
    assert saved_kind(final) == "dense"
    trained, without = load_file(final / "model.safetensors"), load_file(RunDir(plain_run).final / "model.safetensors")
    assert not torch.equal(trained["embeddings.word_embeddings.weight"], without["embeddings.word_embeddings.weight"])

    train(toy_config(toy, paused, stop_at=2, **joint))
    train(toy_config(toy, paused, **joint))
    assert [(r["loss"], r["mlm_loss"]) for r in training_records(paused)] == [(r["loss"], r["mlm_loss"])
                                                                              for r in records]
    for name, tensor in trained.items():
        assert torch.equal(load_file(RunDir(paused).final / "model.safetensors")[name], tensor), name
    a = load_trainer_state(list_checkpoints(RunDir(paused))[-1])
    b = load_trainer_state(list_checkpoints(RunDir(joint_run))[-1])
    assert a["mlm_batches"] == b["mlm_batches"] == 4
    for name, tensor in b["mlm_head"].items():
        assert torch.equal(a["mlm_head"][name], tensor), name


@pytest.mark.parametrize(("changes", "message"), [
    ({"task.mlm_weight": -1.0}, "task.mlm_weight: must not be negative, got -1.0"),
    ({"task.mlm_weight": 0.5, "grad_cache_chunk": 1}, "task.mlm_weight: the joint MLM loss does not run under"),
])
def test_joint_settings_it_cannot_train_with(toy, tmp_path, changes, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        toy_config(toy, tmp_path / "run", negatives="random", eval_topics=None, eval_qrels=None, refresh_every=0,
                   **changes)


def test_a_new_head_warms_up_alone_before_the_encoder_trains(toy, tmp_path):
    """``task.head_warmup_steps``: for that many steps the encoder (and the decoder tied to its embeddings) stays
    bit-identical while the new head's own weights move; after them the encoder trains too."""
    run = tmp_path / "run"
    train(toy_config(toy, run, save_every=1, **settings(toy, max_steps=3, **{"task.head_warmup_steps": 2})))
    start = load_model(toy / "bert-nodrop", "mlm").mlm.state_dict()
    steps = {int(c.name.split("-")[1]): load_file(c / "model.safetensors") for c in list_checkpoints(RunDir(run))}
    encoder = [k for k in steps[2] if k.startswith("bert.")]
    assert encoder and "bert.embeddings.word_embeddings.weight" in encoder
    for step in (1, 2):
        assert all(torch.equal(steps[step][k], start[k]) for k in encoder), step
        assert not torch.equal(steps[step]["cls.predictions.transform.dense.weight"],
                               start["cls.predictions.transform.dense.weight"])
    assert not torch.equal(steps[3]["bert.encoder.layer.0.attention.self.query.weight"],
                           start["bert.encoder.layer.0.attention.self.query.weight"])
    assert not torch.equal(steps[3]["bert.embeddings.word_embeddings.weight"],
                           start["bert.embeddings.word_embeddings.weight"])
