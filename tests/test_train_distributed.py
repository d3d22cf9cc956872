"""torchrun with 2 CPU processes (gloo) trains exactly like 1 process with the same global batch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from conftest import free_port
from test_train_run import REPO, toy_settings, training_records, weights

from ance_ir.train import build_config, list_checkpoints, train
from ance_ir.train.layout import RunDir


def torchrun_two(settings: dict, config_file: Path) -> subprocess.CompletedProcess:
    """``python -m ance_ir.train`` on ``settings`` (written to ``config_file``, a component's ``section.option`` in
    its section) with torchrun in 2 CPU processes."""
    nested: dict = {}
    for key, value in settings.items():
        section, _, name = key.rpartition(".")
        (nested.setdefault(section, {}) if section else nested)[name] = value
    config_file.write_text(yaml.safe_dump(nested))
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1"}
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                           "--master-addr", "127.0.0.1", "--master-port", str(free_port()), "-m", "ance_ir.train",
                           "--config", str(config_file)], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)


def train_two(settings: dict, config_file: Path) -> None:
    """Train ``settings`` with torchrun in 2 CPU processes; only rank 0 reports."""
    done = torchrun_two(settings, config_file)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.count("last checkpoint:") == 1  # only rank 0 reports (and writes)


@pytest.mark.parametrize("in_batch", [False, True], ids=["own-negatives", "gathered-in-batch"])
def test_two_processes_match_one(toy, tmp_path, in_batch):  # noqa: F811 (toy: fixture)
    # no dropout: the two ranks draw different dropout masks than one process would
    settings = toy_settings(toy, tmp_path / "ddp", model=str(toy / "bert-nodrop"), batch_size=4,
                            grad_accumulation=2, max_steps=6, refresh_every=3, in_batch=in_batch)
    train_two(settings, tmp_path / "ddp.yaml")

    single = tmp_path / "single"
    train(build_config(None, {**settings, "output": str(single)}))

    ddp_steps, single_steps = training_records(tmp_path / "ddp"), training_records(single)
    assert [r["step"] for r in ddp_steps] == [r["step"] for r in single_steps] == list(range(1, 7))
    for mine, theirs in zip(ddp_steps, single_steps, strict=True):
        for key in ("loss", "grad_norm", "grad_norm_bottom", "grad_norm_top", "lr"):
            assert mine[key] == pytest.approx(theirs[key], rel=1e-4, abs=1e-7), (mine["step"], key)
        assert mine["negatives_version"] == theirs["negatives_version"]
    final_ddp = weights(list_checkpoints(RunDir(tmp_path / "ddp"))[-1])
    final_single = weights(list_checkpoints(RunDir(single))[-1])
    for name, tensor in final_single.items():
        torch.testing.assert_close(final_ddp[name], tensor, rtol=1e-4, atol=1e-5)
    state = torch.load(list_checkpoints(RunDir(tmp_path / "ddp"))[-1] / "trainer_state.pt", weights_only=True)
    assert state["world_size"] == 2 and len(state["rng"]) == 2  # every rank's RNG state is saved


def test_without_cross_batch_each_process_scores_its_own_passages(toy, tmp_path):  # noqa: F811 (toy: fixture)
    # lr ~ 0: the one-process run's two steps of 2 queries score what the two processes' halves of one step of 4 do
    settings = toy_settings(toy, tmp_path / "ddp", model=str(toy / "bert-nodrop"), batch_size=4, max_steps=1,
                            negatives="random", refresh_every=0, eval_topics=None, eval_qrels=None, in_batch=True,
                            cross_batch=False, lr=1e-12)
    train_two(settings, tmp_path / "ddp.yaml")
    halves = tmp_path / "halves"
    train(build_config(None, {**settings, "output": str(halves), "batch_size": 2, "max_steps": 2}))
    gathered = tmp_path / "gathered"
    train(build_config(None, {**settings, "output": str(gathered), "cross_batch": True}))
    local = training_records(tmp_path / "ddp")[0]["loss"]
    assert local == pytest.approx(sum(r["loss"] for r in training_records(halves)) / 2, rel=1e-5)
    assert local != pytest.approx(training_records(gathered)[0]["loss"], rel=1e-3)


@pytest.mark.parametrize("task", ["mlm", "generator", "deepct"])
def test_two_processes_train_token_losses_as_one(toy, tmp_path, task):  # noqa: F811 (toy: fixture)
    # the loss is the mean over the global batch's tokens (masked, of the target queries, or words), whose number
    # differs between the processes; mlm: each process masks its rows as one process masks those of the global batch
    from test_generator import SETTINGS
    from test_mlm import settings as mlm_settings

    changes = {**SETTINGS, "model": str(toy / "bert-nodrop"), "batch_size": 4, "max_steps": 4}
    if task == "mlm":
        changes = mlm_settings(toy, batch_size=4, max_steps=4)
    elif task == "deepct":
        changes = {**changes, "task.name": "deepct", "query_max_length": None, "passage_max_length": None}
    settings = toy_settings(toy, tmp_path / "ddp", **changes)
    train_two(settings, tmp_path / "ddp.yaml")
    single = tmp_path / "single"
    train(build_config(None, {**settings, "output": str(single)}))
    ddp_steps, single_steps = training_records(tmp_path / "ddp"), training_records(single)
    assert [r["step"] for r in ddp_steps] == [r["step"] for r in single_steps] == [1, 2, 3, 4]
    for mine, theirs in zip(ddp_steps, single_steps, strict=True):
        for key in ("loss", "grad_norm"):
            assert mine[key] == pytest.approx(theirs[key], rel=1e-4, abs=1e-7), (mine["step"], key)
    final_ddp = weights(list_checkpoints(RunDir(tmp_path / "ddp"))[-1])
    for name, tensor in weights(list_checkpoints(RunDir(single))[-1]).items():
        torch.testing.assert_close(final_ddp[name], tensor, rtol=1e-4, atol=1e-5)


def test_in_batch_across_processes_is_refused_where_a_task_does_not_gather(toy, tmp_path):  # noqa: F811
    settings = toy_settings(toy, tmp_path / "ddp", False, task="colbert", pooling=None, batch_size=4, max_steps=1,
                            negatives="random", in_batch=True)
    done = torchrun_two(settings, tmp_path / "ddp.yaml")
    assert done.returncode != 0
    assert "task.in_batch: a colbert task does not gather token vectors across processes" in done.stderr
