"""Training runs on the toy collection with a tiny random BERT: sync ANCE end to end, exact resume (stop_at,
Ctrl-C, kill -9), the asynchronous inferencer (version switches, crash), checkpoints and logs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from conftest import TOY_QRELS, TOY_TOPICS, interrupt_at_call
from safetensors.torch import load_file

from ance_ir.cli import Terminated
from ance_ir.data import InputError, corpus_texts, iter_corpus, read_groups
from ance_ir.modeling import DenseEncoder
from ance_ir.plot import plot_runs
from ance_ir.train import RefreshJob, TrainConfig, build_config, list_checkpoints, read_log, refresh_checkpoint, train
from ance_ir.train.checkpoint import STATE_FILE, load_trainer_state, step_of
from ance_ir.train.inferencer import serve
from ance_ir.train.layout import RunDir
from ance_ir.train.store import NegativesStore, RefreshRecords, request_stop
from ance_ir.train.trainer import Trainer

REPO = Path(__file__).resolve().parent.parent


def toy_settings(toy: Path, output: Path, ance: bool = True, **settings) -> dict:
    """Sync ANCE on the toy collection: 6 pairs, 2 queries x (1 positive + 2 negatives) per step, refreshed and
    evaluated every 3 steps; ``settings`` replace these. ``ance=False``: the model, data and optimizer settings
    alone, for a task that reads no ``negatives`` or ``refresh`` settings (it refuses them)."""
    out = {"output": str(output), "model": str(toy / "bert"), "corpus": str(toy / "corpus.jsonl"),
           "train_topics": str(toy / "topics.tsv"), "train_qrels": str(toy / "qrels.txt"), "batch_size": 2,
           "lr": 1e-3, "max_steps": 8, "log_every": 1, "pooling": "mean", "query_max_length": 16,
           "passage_max_length": 16, "progress": False, "device": "cpu", "threads": 1}
    if ance:
        out |= {"eval_topics": str(toy / "topics.tsv"), "eval_qrels": str(toy / "qrels.txt"), "negatives": "ance",
                "n_negatives": 2, "negative_depth": 4, "refresh_every": 3, "refresh_mode": "sync",
                "inferencer_threads": 1}
        if settings.get("negatives") in ("random", "inbatch") and "negative_depth" not in settings:
            del out["negative_depth"]  # no candidate list to take the top of (refused as unused)
    return {**out, **settings}


def toy_config(toy: Path, output: Path, ance: bool = True, **settings) -> TrainConfig:
    return build_config(None, toy_settings(toy, output, ance, **settings))


def weights(checkpoint: Path) -> dict[str, torch.Tensor]:
    return load_file(checkpoint / "model.safetensors")


def training_records(run: Path) -> list[dict]:
    return [r for r in read_log(RunDir(run).log) if "loss" in r]


def events(run: Path, name: str) -> list[dict]:
    return [r for r in read_log(RunDir(run).log) if r.get("event") == name]


def assert_same_training(run: Path, reference: Path) -> None:
    """Bit-identical final weights and identical per-step losses."""
    final, expected = list_checkpoints(RunDir(run))[-1], list_checkpoints(RunDir(reference))[-1]
    assert final.name == expected.name
    mine, theirs = weights(final), weights(expected)
    assert mine.keys() == theirs.keys()
    for name in mine:
        assert torch.equal(mine[name], theirs[name]), name
    losses = [(r["step"], r["loss"]) for r in training_records(run)]
    assert losses == [(r["step"], r["loss"]) for r in training_records(reference)]


@pytest.fixture(scope="session")
def straight_run(toy, tmp_path_factory) -> Path:
    """Sync ANCE for 8 steps in one go: the reference of the resume tests."""
    output = tmp_path_factory.mktemp("straight") / "run"
    train(toy_config(toy, output))
    return output


def test_sync_ance_end_to_end(straight_run, toy):
    run = RunDir(straight_run)
    assert [step_of(c) for c in list_checkpoints(run)] == [0, 3, 6, 8]
    state = load_trainer_state(list_checkpoints(run)[-1])
    assert {"optimizer", "scheduler", "rng", "data", "sampler_rng", "negatives_version"} <= state.keys()
    assert state["step"] == 8 and state["negatives_version"] == 6
    encoder = DenseEncoder.from_pretrained(list_checkpoints(run)[-1])
    assert encoder.config.pooling == "mean" and encoder.encode_queries(["cat"]).shape == (1, 32)
    assert not torch.equal(weights(list_checkpoints(run)[0])["embeddings.word_embeddings.weight"],
                           weights(list_checkpoints(run)[-1])["embeddings.word_embeddings.weight"])
    assert TrainConfig.load(run.config) == toy_config(toy, straight_run, passage_buckets=4)  # the CPU default

    store = NegativesStore(run.negatives)
    assert store.versions() == [0, 3, 6, 8]
    for version in store.versions():
        negatives = store.load(version)
        assert set(negatives) == set(TOY_TOPICS)
        for qid, docids in negatives.items():
            assert len(docids) == 4 and not set(docids) & set(TOY_QRELS[qid])  # depth 4, positives removed
    groups = read_groups(store.path(8))  # published as training groups, best first, with scores
    assert [g.query_id for g in groups] == list(TOY_TOPICS)
    assert all(g.negatives[0].score >= g.negatives[-1].score and g.positives for g in groups)

    records = RefreshRecords(run.refresh).read_all()
    assert [r["step"] for r in records] == [0, 3, 6, 8] and {r["mode"] for r in records} == {"sync"}
    for record in records:
        assert {"ndcg_cut_10", "recip_rank", "recall_100"} <= record["metrics"].keys()
        assert {"load_s", "encode_s", "index_s", "mine_s", "eval_s"} <= record["timings"].keys()
        assert record["negatives_version"] == record["step"] and record["started"] <= record["finished"]

    steps = training_records(straight_run)
    assert [r["step"] for r in steps] == list(range(1, 9))
    for r in steps:
        assert all(r[k] is not None and r[k] > 0 for k in
                   ("loss", "lr", "grad_norm", "grad_norm_bottom", "grad_norm_middle", "grad_norm_top",
                    "examples_per_s", "steps_per_s"))
    # step s trains on the negatives of the last refresh before it; staleness = steps since that checkpoint
    assert [(r["negatives_version"], r["staleness"]) for r in steps] == [
        (0, 0), (0, 1), (0, 2), (3, 0), (3, 1), (3, 2), (6, 0), (6, 1)]
    switches = events(straight_run, "negatives")
    assert [(e["step"], e["version"], e["staleness"]) for e in switches] == [(0, 0, 0), (3, 3, 0), (6, 6, 0)]
    assert events(straight_run, "done")[0]["step"] == 8
    plots = plot_runs([straight_run], straight_run.parent / "plots")
    assert [p.name for p in plots] == ["loss.png", "grad_norms.png", "dev_metrics.png", "negatives.png"]


def test_refresh_encodes_in_the_configured_precision(straight_run, toy, tmp_path, monkeypatch):
    seen = []
    encode = DenseEncoder._encode
    monkeypatch.setattr(DenseEncoder, "_encode", lambda self, *args: seen.append(args[-1]) or encode(self, *args))
    config = toy_config(toy, tmp_path / "run", refresh_precision="int8")
    record = refresh_checkpoint(list_checkpoints(RunDir(straight_run))[-1], RefreshJob.from_config(config),
                                RunDir(tmp_path / "run"), torch.device("cpu"), "sync")
    assert seen == ["int8", "fp32", "fp32"]  # passages; training and eval queries in fp32 beside int8 passages
    assert record["negatives_version"] == 8 and "ndcg_cut_10" in record["metrics"]
    seen.clear()
    refresh_checkpoint(list_checkpoints(RunDir(straight_run))[-1],
                       RefreshJob.from_config(toy_config(toy, tmp_path / "bf16", refresh_precision="bf16")),
                       RunDir(tmp_path / "bf16"), torch.device("cpu"), "sync")
    assert seen == ["bf16"] * 3  # queries follow any other precision


def test_a_refresh_can_encode_shorter_passages(straight_run, toy, tmp_path):
    from ance_ir.index import load_dense_index, stored_vectors

    checkpoint = list_checkpoints(RunDir(straight_run))[-1]
    config = toy_config(toy, tmp_path / "run", refresh_precision="fp32", refresh_passage_max_length=4,
                        keep_refresh_index=True)
    refresh_checkpoint(checkpoint, RefreshJob.from_config(config), RunDir(tmp_path / "run"), torch.device("cpu"),
                       "sync")
    kept = stored_vectors(load_dense_index(RunDir(tmp_path / "run").refresh / f"{checkpoint.name}.index"))
    texts = [p.text for p in iter_corpus(toy / "corpus.jsonl")]
    short = DenseEncoder.from_pretrained(checkpoint, passage_max_length=4).encode_passages(texts)
    np.testing.assert_allclose(kept, short, atol=1e-5)
    assert not np.allclose(kept, DenseEncoder.from_pretrained(checkpoint).encode_passages(texts), atol=1e-3)


def test_baseline_in_batch_bf16_accumulation_and_pruning(toy, tmp_path):
    output = tmp_path / "run"
    train(toy_config(toy, output, negatives="random", n_negatives=1, in_batch=True, precision="bf16",
                     grad_accumulation=2, max_steps=6, refresh_every=0, save_every=2, keep_checkpoints=2,
                     eval_topics=None, eval_qrels=None))
    run = RunDir(output)
    assert [step_of(c) for c in list_checkpoints(run)] == [4, 6]
    assert sorted(p.name for p in run.checkpoints.iterdir()) == ["step-00000004", "step-00000006"]  # none half gone
    assert not run.negatives.exists() and not run.refresh.exists()
    steps = training_records(output)
    assert len(steps) == 6 and all(r["negatives_version"] is None and r["staleness"] is None for r in steps)
    assert all(r["examples_per_s"] > 0 and r["loss"] > 0 for r in steps)
    assert steps[-1]["epoch"] == pytest.approx(6 * 2 * 2 / 6)  # 6 steps x 2 micro-batches x 2 queries, 6 pairs
    with pytest.raises(ValueError, match="fp16 needs a CUDA device"):
        train(toy_config(toy, tmp_path / "fp16", precision="fp16"))


def _trainer_with_loss_scaler(config: TrainConfig, init_scale: float) -> Trainer:
    """A trainer whose optimizer steps go through a loss scaler, as fp16's do on a GPU (a CPU one here)."""
    trainer = Trainer(config)
    trainer.precision.scaler = torch.amp.GradScaler("cpu", init_scale=init_scale)
    return trainer


def test_steps_the_loss_scaler_skips_are_counted_and_leave_the_gradient_norms_finite(toy, tmp_path):
    """A loss scale of 2^126 overflows the first backward passes, as fp16's 2^16 does on a GPU: the scaler skips
    those steps and halves its scale until the gradients are finite; their infinite norms are not logged."""
    config = toy_config(toy, tmp_path / "run", ance=False, negatives="random", max_steps=40)
    trainer = _trainer_with_loss_scaler(config, 2.0 ** 126)
    try:
        trainer.train()
    finally:
        trainer.close()
    steps = training_records(tmp_path / "run")
    skipped = [r for r in steps if r["skipped_steps"]]
    assert skipped and steps[-1]["skipped_steps"] == 0
    assert all(r["grad_norm"] is None for r in skipped)  # a window of one skipped step has no norm
    assert all(np.isfinite(r["grad_norm"]) for r in steps if not r["skipped_steps"])
    assert [r["loss_scale"] for r in skipped] == [2.0 ** (125 - i) for i in range(len(skipped))]


def _poison(module: torch.nn.Module) -> None:
    with torch.no_grad():
        for param in module.parameters():
            param.fill_(float("nan"))


def test_training_that_diverges_stops_with_the_step_that_did(toy, tmp_path):
    config = toy_config(toy, tmp_path / "fp32", ance=False, negatives="random")
    trainer = Trainer(config)
    try:
        _poison(trainer.module)
        with pytest.raises(RuntimeError, match="step 1: the gradient norm is nan; the learning rate"):
            trainer.train()
    finally:
        trainer.close()
    trainer = _trainer_with_loss_scaler(toy_config(toy, tmp_path / "fp16", ance=False, negatives="random"),
                                        init_scale=4.0)
    try:
        _poison(trainer.module)
        with pytest.raises(RuntimeError, match="step 3: the gradients overflow fp16 even at a loss scale of 0.5"):
            trainer.train()  # skipped at 4, 2 and 1
    finally:
        trainer.close()


def test_init_from_a_run_folder_starts_from_its_latest_checkpoint(straight_run, toy, tmp_path):
    """BM25 warm-up, then ANCE: the continuation starts from the warm-up run's last weights."""
    output = tmp_path / "continued"
    train(toy_config(toy, output, init_from=str(straight_run), max_steps=3, model="ignored-when-init-from"))
    start = weights(RunDir(output).checkpoints / "step-00000000")
    for name, tensor in weights(list_checkpoints(RunDir(straight_run))[-1]).items():
        assert torch.equal(start[name], tensor), name
    card = (RunDir(output).final / "README.md").read_text()
    assert yaml.safe_load(card.split("---\n")[1])["base_model"] == str(straight_run)  # not the ignored name
    empty = RunDir(tmp_path / "empty-run")
    empty.checkpoints.mkdir(parents=True)
    with pytest.raises(InputError, match="no complete checkpoint"):
        train(toy_config(toy, tmp_path / "x", init_from=str(empty.root), max_steps=3))
    with pytest.raises(InputError, match="model.init_from .*: no such run or model folder"):
        train(toy_config(toy, tmp_path / "y", init_from="train-runs/rag24-mini/not-trained-yet", max_steps=3))
    with pytest.raises(InputError, match=r"^\./not-trained-yet: model.name \(--model\): no such run or model folder"):
        train(toy_config(toy, tmp_path / "z", model="./not-trained-yet", max_steps=3))
    assert not (tmp_path / "z").exists()


@pytest.mark.parametrize("stop_at", [3, 4])
def test_resume_continues_exactly(straight_run, toy, tmp_path, stop_at):
    """N steps, stop, resume, M more == N+M steps straight (weights bit-identical, same losses)."""
    output = tmp_path / "run"
    assert train(toy_config(toy, output, stop_at=stop_at)).name == f"step-{stop_at:08d}"
    assert events(output, "paused")[0]["step"] == stop_at
    assert not (RunDir(output).checkpoints / "step-00000008").exists()
    train(toy_config(toy, output))  # resumes by itself
    assert events(output, "resume")[0]["step"] == stop_at
    assert_same_training(output, straight_run)


def test_a_run_resumed_mid_window_logs_what_it_would_have(toy, tmp_path):
    """A checkpoint between two log records (step 4 of windows of 3) keeps the window begun: the resumed run's
    records equal a straight run's, averages included."""
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    train(toy_config(toy, straight, log_every=3))
    train(toy_config(toy, resumed, log_every=3, stop_at=4))
    train(toy_config(toy, resumed, log_every=3))
    fields = ("step", "loss", "grad_norm", "lr", "epoch")
    records = [[{k: r[k] for k in fields} for r in training_records(run)] for run in (resumed, straight)]
    assert [r["step"] for r in records[1]] == [3, 6, 8] and records[0] == records[1]


@pytest.mark.parametrize("sabotage", ["ance_ir.train.trainer.restore_rng", "ance_ir.train.dataset.PairStream."
                                                                            "load_state_dict"])
def test_resume_check_notices_lost_state(straight_run, toy, tmp_path, monkeypatch, sabotage):
    """The comparison above is sensitive: forgetting the RNG or the data order on resume changes the weights."""
    output = tmp_path / "run"
    train(toy_config(toy, output, stop_at=4))
    monkeypatch.setattr(sabotage, lambda *args: None)
    train(toy_config(toy, output))
    with pytest.raises(AssertionError):
        assert_same_training(output, straight_run)


def test_a_new_run_removes_what_an_attempt_without_a_checkpoint_left(toy, tmp_path, capsys):
    import shutil

    output = tmp_path / "run"
    shutil.copytree(toy / "bert", output / "final")  # a path a setting names is kept: here the start model
    (output / "log.jsonl").write_text('{"step": 7, "loss": 9.0}\n')
    (output / "refresh").mkdir()
    (output / "refresh" / "step-00000000.json").write_text("{}")
    train(toy_config(toy, output, model=str(output / "final"), negatives="random", refresh_every=0, max_steps=2))
    assert "removed what an earlier attempt left: log.jsonl, refresh\n" in capsys.readouterr().err
    assert [r["step"] for r in training_records(output)] == [1, 2]
    assert not (output / "refresh").exists() and (output / "final").is_dir()


def test_a_second_trainer_on_a_run_folder_is_refused(toy, tmp_path, monkeypatch):
    from ance_ir.data import output_lock

    output = tmp_path / "run"
    with output_lock(output), pytest.raises(InputError, match=f"pid {os.getpid()}.* is writing this output"):
        train(toy_config(toy, output, negatives="random", refresh_every=0, max_steps=1))
    train(toy_config(toy, output, negatives="random", refresh_every=0, max_steps=1))  # released: it runs
    assert not (tmp_path / ".run.lock").exists()
    monkeypatch.chdir(output)
    with output_lock("."):  # the run folder named as "." has its lock beside it, as any other
        assert (tmp_path / ".run.lock").exists()


def test_a_resume_removes_the_temporaries_a_killed_refresh_left(tmp_path):
    from ance_ir.train.checkpoint import remove_partial

    run = RunDir(tmp_path / "run")
    run.refresh.mkdir(parents=True)
    (run.refresh / ".vectors-00000003.npz.abc.tmp").write_bytes(b"half")
    (run.refresh / "step-00000003.json").write_text("{}")
    remove_partial(run)
    assert [p.name for p in run.refresh.iterdir()] == ["step-00000003.json"]


@pytest.mark.parametrize("content", [b"", b"not a pickle", b"PK\x03\x04 truncated zip"])
def test_an_unreadable_trainer_state_is_one_error_naming_it(tmp_path, content):
    (tmp_path / STATE_FILE).write_bytes(content)
    with pytest.raises(InputError, match=rf"{STATE_FILE}: unreadable trainer state \(") as raised:
        load_trainer_state(tmp_path)
    assert "\n" not in str(raised.value)


def test_a_resumed_run_keeps_its_passage_buckets_and_a_new_one_takes_the_devices(toy, tmp_path):
    """passage_buckets left unset: a new CPU run records 4; a run started with 2 resumes with 2, not the default;
    one recorded without it resumes with 1."""
    train(toy_config(toy, tmp_path / "new", max_steps=1))
    assert TrainConfig.load(RunDir(tmp_path / "new").config).task.passage_buckets == 4
    output = tmp_path / "run"
    train(toy_config(toy, output, passage_buckets=2, max_steps=4, stop_at=2))
    train(toy_config(toy, output, max_steps=4))
    assert events(output, "resume")[0]["step"] == 2
    assert TrainConfig.load(RunDir(output).config).task.passage_buckets == 2

    # a run recorded before the setting existed ran its passages as one batch, and resumes so
    old = tmp_path / "old"
    train(toy_config(toy, old, passage_buckets=1, max_steps=4, stop_at=2))
    recorded = json.loads(RunDir(old).config.read_text())
    del recorded["task"]["passage_buckets"]
    RunDir(old).config.write_text(json.dumps(recorded))
    train(toy_config(toy, old, max_steps=4))
    assert events(old, "resume")[0]["step"] == 2


def test_resume_refuses_a_different_config(straight_run, toy):
    with pytest.raises(ValueError, match="this run has optim.lr=0.001, now 0.01"):
        train(toy_config(toy, straight_run, lr=1e-2))
    with pytest.raises(ValueError, match="no checkpoint to resume from"):
        train(toy_config(toy, straight_run.parent / "empty"), resume=True)


def test_a_resume_refuses_input_files_changed_since_the_run_started(toy, tmp_path):
    import shutil

    from ance_ir.data import InputError

    qrels = tmp_path / "qrels.txt"
    shutil.copyfile(toy / "qrels.txt", qrels)
    output = tmp_path / "run"
    settings = {"train_qrels": str(qrels), "negatives": "random", "refresh_every": 0, "eval_topics": None,
                "eval_qrels": None, "max_steps": 4}
    train(toy_config(toy, output, stop_at=2, **settings))
    recorded = json.loads((output / "inputs.json").read_text())
    assert set(recorded) == {str(toy / "corpus.jsonl"), str(toy / "topics.tsv"), str(qrels)}  # not the model folder
    original = qrels.read_text()
    qrels.write_text(original.replace(" 1\n", " 2\n", 1))  # one judgment regraded in place
    with pytest.raises(InputError, match=f"{qrels}: changed since this run started"):
        train(toy_config(toy, output, **settings))
    qrels.write_text(original)
    assert train(toy_config(toy, output, **settings)).name == "step-00000004"
    assert events(output, "resume")[0]["step"] == 2


def _write_config(path: Path, settings: dict) -> Path:
    path.write_text(yaml.safe_dump(settings))
    return path


def _wait_for(predicate, timeout: float = 120.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def _start_cli(config: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "ance_ir.train", "--config", str(config)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_kill_9_then_resume_completes_the_same_way(toy, tmp_path):
    settings = toy_settings(toy, tmp_path / "killed", max_steps=120, refresh_every=20, log_every=5)
    proc = _start_cli(_write_config(tmp_path / "killed.yaml", settings))
    run = RunDir(tmp_path / "killed")
    try:
        _wait_for(lambda: (run.checkpoints / "step-00000020").is_dir() or proc.poll() is not None,
                  what="the first checkpoint after step 0")
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        proc.kill()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read()[-2000:]
    reached = step_of(list_checkpoints(run)[-1])
    assert 20 <= reached < 120, "the run should have been killed mid-way"

    train(build_config(None, settings))
    reference = tmp_path / "straight"
    train(toy_config(toy, reference, max_steps=120, refresh_every=20, log_every=5))
    assert_same_training(run.root, reference)
    assert [r["step"] for r in training_records(run.root)] == list(range(5, 121, 5))  # rewound, no duplicates
    assert events(run.root, "resume")[0]["step"] == reached


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_saves_a_checkpoint_and_stops(toy, tmp_path, sig):
    output = tmp_path / "run"
    config = toy_config(toy, output, max_steps=100_000, refresh_every=0, negatives="random", eval_topics=None,
                        eval_qrels=None, save_every=5, log_every=50)
    checkpoints = RunDir(output).checkpoints

    def press_ctrl_c():
        _wait_for(lambda: (checkpoints / "step-00000005").is_dir(), what="step 5")
        os.kill(os.getpid(), sig)

    presser = threading.Thread(target=press_ctrl_c, daemon=True)
    presser.start()
    with pytest.raises(KeyboardInterrupt, match="interrupted at step .*; rerun the same command to resume") as e:
        train(config)
    presser.join()
    assert isinstance(e.value, Terminated) == (sig == signal.SIGTERM)  # run_cli: exit 143, not 130
    stopped = events(output, "interrupted")[0]["step"]
    assert 5 <= stopped < 100_000
    assert step_of(list_checkpoints(RunDir(output))[-1]) == stopped
    assert (checkpoints / f"step-{stopped:08d}" / STATE_FILE).is_file()


def test_ctrl_c_during_a_sync_refresh_says_it_waits_for_the_refresh(toy, tmp_path, monkeypatch, capsys):
    import ance_ir.train.refresher as refresher

    original = refresher.refresh_checkpoint

    def pressed_during(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # handled while the refresh runs
        return original(*args, **kwargs)

    monkeypatch.setattr(refresher, "refresh_checkpoint", pressed_during)
    with pytest.raises(KeyboardInterrupt, match="interrupted at step 0"):
        train(toy_config(toy, tmp_path / "run"))
    assert "stopping after the refresh of step 0's checkpoint with a checkpoint" in capsys.readouterr().err


def test_async_inferencer_publishes_while_training_goes_on(toy, tmp_path):
    output = tmp_path / "run"
    train(toy_config(toy, output, refresh_mode="async", max_steps=12, refresh_every=3, max_staleness=6))
    run = RunDir(output)
    switches = [e for e in events(output, "negatives") if e["version"] > 0]
    assert switches, "the trainer never switched to negatives published by the inferencer"
    for e in switches:
        # published by the inferencer while the trainer went on: picked up at a later step boundary
        assert e["step"] > e["version"] and e["staleness"] == e["step"] - e["version"]
        assert (run.checkpoints / f"step-{e['version']:08d}").is_dir()
    records = {r["step"]: r for r in RefreshRecords(run.refresh).read_all()}
    assert records[0]["mode"] == "sync"  # ANCE's initial negatives, before the inferencer starts
    assert all(r["mode"] == "async" for s, r in records.items() if s > 0)
    assert 12 in records  # the final checkpoint is refreshed before the inferencer stops
    steps = training_records(output)
    assert [r["step"] for r in steps] == list(range(1, 13))
    assert max(r["staleness"] for r in steps) <= 6  # max_staleness is honoured
    versions = [r["negatives_version"] for r in steps]
    assert versions == sorted(versions)
    for e in switches:  # the switch at boundary s shows up from step s+1 on
        assert steps[e["step"]]["negatives_version"] == e["version"]
        assert e["step"] == 0 or steps[e["step"] - 1]["negatives_version"] < e["version"]
    assert json.loads(run.inferencer_status.read_text())["state"] == "stopped"
    assert events(output, "inferencer_died") == []
    encoded = round(records[12]["reencoded"] * records[12]["passages"])  # all, or a partial refresh's share
    assert f"refresh of step 12: encoded {encoded} of {encoded} passages" in run.inferencer_log.read_text()


def test_a_refresh_reports_its_encoding_in_whole_windows_with_the_vectors_of_one_call(tiny_bert_dir, tmp_path,
                                                                                       monkeypatch):
    from types import SimpleNamespace

    from ance_ir.modeling.kinds import load_model
    from ance_ir.train.refresh import _encode_passages

    encoder = load_model(tiny_bert_dir)
    texts = [f"passage number {i} " + "word " * (i % 5) for i in range(7)]
    job = SimpleNamespace(batch_size=2, precision="fp32", passages=texts, passage_max_length=None,
                          corpus_sha256="texts")
    monkeypatch.setattr("ance_ir.modeling.encoder.ENCODE_WINDOW", 3)
    monkeypatch.setattr("ance_ir.train.refresh.REPORT_EVERY", 3)
    reports = []
    reported = _encode_passages(encoder, job, np.arange(7), tmp_path / "parts", False,
                                lambda done, total: reports.append((done, total)))
    assert reports == [(3, 7), (6, 7), (7, 7)]
    assert np.array_equal(reported, encoder.encode_passages(texts, batch_size=2, precision="fp32"))


def test_a_refresh_interrupted_while_encoding_goes_on_from_the_passages_it_kept(straight_run, toy, tmp_path,
                                                                               monkeypatch, capsys):
    """A refresh stopped part-way (a second Ctrl-C, a kill, a preemption) keeps the parts it encoded; redone from
    the same checkpoint and settings it encodes only the rest (parts encoded with other settings are dropped),
    publishes what an uninterrupted refresh publishes, and removes the parts."""
    from ance_ir.train.store import EncodingWork

    monkeypatch.setattr("ance_ir.modeling.encoder.ENCODE_WINDOW", 3)
    monkeypatch.setattr("ance_ir.train.refresh.REPORT_EVERY", 3)  # toy's 8 passages in parts of 3, 3 and 2
    checkpoint, run = list_checkpoints(RunDir(straight_run))[-1], RunDir(tmp_path / "run")

    def refresh(precision: str, output: Path = run.root) -> dict:
        config = toy_config(toy, output, refresh_precision=precision, reencode_share=1.0)
        return refresh_checkpoint(checkpoint, RefreshJob.from_config(config), RunDir(output), torch.device("cpu"),
                                  "sync")

    for precision, stop_at, kept in (("bf16", 2, "3 of 8"), ("fp32", 3, "6 of 8")):
        with monkeypatch.context() as patch:
            interrupt_at_call(patch, DenseEncoder, "encode_passages", stop_at)
            with pytest.raises(KeyboardInterrupt, match=f"{kept} passages encoded are kept in .*encoding-00000008"):
                refresh(precision)
    assert "dropped the unfinished refresh encoding" in capsys.readouterr().err  # bf16's part, redone in fp32
    assert EncodingWork(run.refresh).steps() == [8] and RefreshRecords(run.refresh).steps() == []
    calls = interrupt_at_call(monkeypatch, DenseEncoder, "encode_passages")
    record = refresh("fp32")
    assert [len(texts) for texts in calls] == [2]  # the last part alone
    assert "reused 6 of 8 passages" in capsys.readouterr().err
    assert EncodingWork(run.refresh).steps() == [] and RefreshRecords(run.refresh).steps() == [8]
    reference = refresh("fp32", tmp_path / "reference")
    assert record["metrics"] == reference["metrics"]
    assert (read_groups(NegativesStore(run.negatives).path(8))
            == read_groups(NegativesStore(RunDir(tmp_path / "reference").negatives).path(8)))


def test_the_inferencer_first_finishes_a_refresh_left_unfinished(toy, tmp_path, monkeypatch):
    from ance_ir.train.checkpoint import checkpoint_dir
    from ance_ir.train.inferencer import unfinished_checkpoint
    from ance_ir.train.store import EncodingWork

    monkeypatch.setattr("ance_ir.modeling.encoder.ENCODE_WINDOW", 3)
    monkeypatch.setattr("ance_ir.train.refresh.REPORT_EVERY", 3)
    output = tmp_path / "run"
    config = toy_config(toy, output, max_steps=6, reencode_share=1.0)
    train(config)
    run = RunDir(output)
    for step in (3, 6):  # as if the inferencer had been killed while refreshing step 3, before step 6 was saved
        (run.refresh / f"step-{step:08d}.json").unlink()
    with monkeypatch.context() as patch:
        interrupt_at_call(patch, DenseEncoder, "encode_passages", 2)
        with pytest.raises(KeyboardInterrupt):
            refresh_checkpoint(checkpoint_dir(run, 3), RefreshJob.from_config(config), run, torch.device("cpu"),
                               "async")
    cpu = torch.device("cpu")
    other = RefreshJob.from_config(toy_config(toy, output, max_steps=6, reencode_share=1.0, encode_batch_size=3))
    assert unfinished_checkpoint(run, 0, other, cpu) is None  # its parts would not be reused: not taken first
    assert unfinished_checkpoint(run, 0, RefreshJob.from_config(config), cpu) == checkpoint_dir(run, 3)
    EncodingWork(run.refresh).path(5).mkdir()  # left by a refresh of a checkpoint pruned since
    calls = interrupt_at_call(monkeypatch, DenseEncoder, "encode_passages")
    request_stop(run, "drain")
    assert serve(output, parent_pid=os.getppid()) == 2
    assert [len(texts) for texts in calls] == [3, 2, 3, 3, 2]  # step 3's last two parts, then all of step 6
    assert RefreshRecords(run.refresh).steps() == [0, 3, 6] and EncodingWork(run.refresh).steps() == []


def test_inferencer_crash_leaves_training_on_the_last_negatives(toy, tmp_path, capsys):
    output = tmp_path / "run"
    log = RunDir(output).log

    def kill_inferencer():
        started = _wait_for(lambda: log.is_file() and [r for r in read_log(log)
                                                       if r.get("event") == "inferencer_started"],
                            what="the inferencer to start")
        os.kill(started[0]["pid"], signal.SIGKILL)

    killer = threading.Thread(target=kill_inferencer, daemon=True)
    killer.start()
    train(toy_config(toy, output, refresh_mode="async", max_steps=15, refresh_every=3, max_staleness=3))
    killer.join()
    died = events(output, "inferencer_died")
    assert len(died) == 1 and died[0]["returncode"] == -signal.SIGKILL
    err = capsys.readouterr().err
    assert err.count("warning: the inferencer") == 1 and "training goes on with negatives version" in err
    assert "was not refreshed; run python -m ance_ir.train.inferencer" in err
    steps = training_records(output)
    assert [r["step"] for r in steps] == list(range(1, 16)) and events(output, "done")[0]["step"] == 15
    last = died[0]["negatives_version"]
    assert all(r["negatives_version"] == last for r in steps if r["step"] > died[0]["step"])
    assert NegativesStore(RunDir(output).negatives).versions()[-1] == last
    assert 15 not in RefreshRecords(RunDir(output).refresh).steps()
    assert serve(output, parent_pid=-1) == 0  # an inferencer whose trainer is gone stops by itself
    assert "the trainer is gone" in capsys.readouterr().err
    request_stop(RunDir(output), "now")  # left by the trainer: a run by hand does not take it for its own
    assert serve(output, once=True) == 1  # what the warning suggests: refresh the final checkpoint by hand
    assert "ignoring" in capsys.readouterr().err
    assert 15 in RefreshRecords(RunDir(output).refresh).steps()
    assert serve(output, once=True) == 0


def test_the_final_model_has_a_card_with_its_settings_and_measured_results(straight_run):
    run = RunDir(straight_run)
    card = (run.final / "README.md").read_text()
    front, body = card.split("---\n")[1], card.split("---\n", 2)[2]
    assert yaml.safe_load(front)["library_name"] == "ance-ir"
    settings = yaml.safe_load(body.split("```yaml\n")[1].split("```")[0])
    assert settings["negatives"]["name"] == "ance" and settings["optim"]["max_steps"] == 8
    last = [r for r in read_log(run.log) if "loss" in r][-1]
    assert f"{last['loss']:.4f} at step 8" in card
    for record in RefreshRecords(run.refresh).read_all():
        assert f"| {record['step']} | {record['metrics']['ndcg_cut_10']:.4f} |" in card
    assert "SentenceTransformer(" in card


def test_a_denoising_refresh_leaves_out_what_the_cross_encoder_scores_high(straight_run, toy, tmp_path):
    from ance_ir.modeling.kinds import load_model

    torch.manual_seed(3)
    ranker = tmp_path / "ranker"
    load_model(toy / "bert-nodrop", "cross-encoder", max_length=32).save_pretrained(ranker)
    checkpoint = list_checkpoints(RunDir(straight_run))[-1]
    plain = refresh_checkpoint(checkpoint, RefreshJob.from_config(toy_config(toy, tmp_path / "plain")),
                               RunDir(tmp_path / "plain"), torch.device("cpu"), "sync")
    mined = NegativesStore(RunDir(tmp_path / "plain").negatives).load(plain["negatives_version"])
    texts = corpus_texts(toy / "corpus.jsonl")
    queries = {qid: text for qid, text in (line.split("\t") for line in
                                           (toy / "topics.tsv").read_text().splitlines())}
    model = load_model(ranker)
    scores = {(q, d): float(model.score_pairs([queries[q]], [texts[d]])[0]) for q, ds in mined.items() for d in ds}
    ordered = sorted(scores.values())
    threshold = (ordered[len(ordered) // 2] + ordered[len(ordered) // 2 - 1]) / 2  # away from every score
    config = toy_config(toy, tmp_path / "denoised", **{"negatives.denoise_with": str(ranker),
                                                       "negatives.denoise_above": threshold})
    record = refresh_checkpoint(checkpoint, RefreshJob.from_config(config), RunDir(tmp_path / "denoised"),
                                torch.device("cpu"), "sync")
    denoised = NegativesStore(RunDir(tmp_path / "denoised").negatives).load(record["negatives_version"])
    expected = {q: [d for d in ds if scores[q, d] <= threshold] for q, ds in mined.items()}
    assert denoised == expected and record["denoised"] == len(scores) - sum(map(len, expected.values())) > 0
    with pytest.raises(ValueError, match="needs both a cross-encoder"):
        toy_config(toy, tmp_path / "half", **{"negatives.denoise_with": str(ranker)})
    missing = toy_config(toy, tmp_path / "missing", **{"negatives.denoise_with": "runs/ce-not-trained/final",
                                                       "negatives.denoise_above": threshold})  # a valid config
    with pytest.raises(InputError, match="^runs/ce-not-trained/final: negatives.denoise_with: no such run or model"):
        train(missing)


def test_the_final_refresh_is_optional_and_a_refresh_can_keep_its_index(toy, tmp_path, capsys):
    from ance_ir.eval import evaluate
    from ance_ir.index import load_dense_index
    from ance_ir.search import DenseSearcher, encoder_for_index

    output = tmp_path / "run"
    train(toy_config(toy, output, max_steps=6, refresh_every=3, refresh_final=False, keep_refresh_index=True))
    records = RefreshRecords(RunDir(output).refresh)
    assert records.steps() == [0, 3]  # not 6, the last step
    kept = load_dense_index(RunDir(output).refresh / "step-00000003.index")
    assert len(kept) == 8 and kept.meta["encoder"].endswith("step-00000003")
    run = DenseSearcher(kept, encoder_for_index(kept, None)).search(dict(TOY_TOPICS), hits=1000)
    qrels = {q: dict(j) for q, j in TOY_QRELS.items()}
    record = next(r for r in records.read_all() if r["step"] == 3)
    assert evaluate(qrels, run)["ndcg_cut_10"] == pytest.approx(record["metrics"]["ndcg_cut_10"])


def test_reencode_rows_take_the_priority_ones_then_the_oldest():
    from ance_ir.train.refresh import reencode_rows

    steps = np.array([5, 0, 5, 3, 0, 5, 5, 5])
    assert reencode_rows(steps, [6, 2], 0.5).tolist() == [1, 2, 4, 6]  # 2 priority + the 2 oldest (rows 1, 4)
    assert reencode_rows(steps, [6, 2, 0, 7, 5], 0.25).tolist() == [0, 2, 5, 6, 7]  # the priority set beyond the share


def test_a_partial_refresh_keeps_the_other_passages_vectors(toy, tmp_path):
    from ance_ir.train.store import VectorStore

    output = tmp_path / "run"
    train(toy_config(toy, output, max_steps=6, refresh_every=3, reencode_share=0.5, priority_depth=1,
                     refresh_precision="fp32"))
    records = {r["step"]: r for r in RefreshRecords(RunDir(output).refresh).read_all()}
    assert records[0]["reencoded"] == 1.0 and records[0]["vector_age_max"] == 0
    assert all(0.5 <= records[s]["reencoded"] < 1.0 for s in (3, 6))
    store = VectorStore(RunDir(output).refresh)
    assert store.steps() == [3, 6]  # the newest store and the one before it
    vectors, steps = store.load(8, before=7)
    assert set(steps.tolist()) <= {0, 3, 6} and (steps == 6).sum() == round(8 * records[6]["reencoded"])
    assert records[6]["vector_age_max"] == 6 - steps.min()
    texts = [p.text for p in iter_corpus(toy / "corpus.jsonl")]
    for step in set(steps.tolist()):
        model = DenseEncoder.from_pretrained(list_checkpoints(RunDir(output))[[0, 3, 6].index(step)])
        rows = np.flatnonzero(steps == step)
        np.testing.assert_allclose(vectors[rows], model.encode_passages([texts[i] for i in rows]), atol=1e-5)


def test_a_refresh_that_only_evaluates_encodes_the_whole_corpus(toy, tmp_path):
    from ance_ir.train.store import VectorStore

    output = tmp_path / "run"
    config = toy_config(toy, output, max_steps=6, refresh_every=3, negatives="random")
    assert config.refresh.reencode_share < 1  # the default: partial, but only where negatives are mined
    train(config)
    records = RefreshRecords(RunDir(output).refresh).read_all()
    assert [r["step"] for r in records] == [0, 3, 6] and all(r["reencoded"] == 1.0 for r in records)
    assert VectorStore(RunDir(output).refresh).steps() == []


def test_a_redone_refresh_reads_the_vectors_of_the_refresh_before_it(tmp_path):
    from ance_ir.train.store import VectorStore

    store = VectorStore(tmp_path)
    for step in (3, 6):
        store.save(step, np.full((2, 4), step, dtype=np.float32), np.full(2, step))
    vectors, steps = store.load(2, before=6)  # step 6 redone after its store was written: step 3's vectors
    assert steps.tolist() == [3, 3] and vectors[0, 0] == 3
    assert store.load(2, before=7)[1].tolist() == [6, 6] and store.load(2, before=3) is None
    assert store.load(3, before=7) is None  # another corpus size
    store.save(9, np.zeros((2, 4), dtype=np.float32), np.full(2, 9))
    assert store.steps() == [6, 9]


def test_a_new_run_interrupted_while_retrieving_keeps_the_rankings_for_its_rerun(toy, tmp_path, monkeypatch):
    """Ctrl-C while a new run's bm25 sampler retrieves: the run folder keeps its BM25 index and the rankings
    retrieved so far (and nothing else); the rerun retrieves only the rest and trains as an uninterrupted run."""
    from ance_ir.negatives.sources import BM25Source

    monkeypatch.setattr("ance_ir.negatives.resume.QUERY_CHUNK", 1)  # a chunk a query
    settings = {"negatives": "bm25", "refresh_every": 0, "eval_topics": None, "eval_qrels": None, "max_steps": 4}
    output = tmp_path / "run"
    with monkeypatch.context() as patch:
        interrupt_at_call(patch, BM25Source, "retrieve", 2)
        with pytest.raises(KeyboardInterrupt, match=r"1 of 3 queries retrieved are kept in .*candidates"):
            train(toy_config(toy, output, **settings))
    run = RunDir(output)
    assert sorted(p.name for p in output.iterdir()) == ["bm25-index", "candidates"]
    assert sorted(p.name for p in run.candidates.glob("ranking-*")) == ["ranking-00000.jsonl"]
    calls = interrupt_at_call(monkeypatch, BM25Source, "retrieve")
    train(toy_config(toy, output, **settings))
    assert len(calls) == 2  # the two queries not retrieved before
    train(toy_config(toy, tmp_path / "reference", **settings))
    assert_same_training(output, tmp_path / "reference")


def test_eval_topics_of_a_run_that_refreshes_nothing_are_noted_and_not_read(toy, tmp_path, capsys):
    """refresh.every 0 without ANCE negatives: nothing is refreshed, so the eval topics are not evaluated (nor read:
    a named set would be fetched for nothing), and training says so."""
    train(toy_config(toy, tmp_path / "run", negatives="random", refresh_every=0, max_steps=2,
                     eval_topics=str(tmp_path / "not-read.tsv")))
    assert (f"note: refresh.every is 0: {tmp_path / 'not-read.tsv'} is not evaluated while training"
            in capsys.readouterr().err)
    assert not RunDir(tmp_path / "run").refresh.exists()
