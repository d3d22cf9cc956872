"""One writer per output, resumes that refuse changed settings, what a ``kill -9`` leaves is cleaned up, and a
SIGTERM stops a job as Ctrl-C does.

The killed runs are real processes (``python -m ance_ir.encode`` / ``ance_ir.bm25 index``) killed with
SIGKILL (or sent SIGTERM) once their first temporary output is on disk.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import make_tiny_bert

from ance_ir.cli import run_cli
from ance_ir.data import output_lock
from ance_ir.encode.__main__ import main as encode_main

REPO = Path(__file__).resolve().parents[2]
WORDS = "the cat sat on mat dogs chase cats in park a recipe for baking bread at home".split()


def _corpus(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({"id": f"d{i}", "contents": " ".join(WORDS[i % 7:i % 7 + 9])}) + "\n"
                            for i in range(n)))
    return path


def _cli_error(main, argv: list[str], capfd) -> str:
    capfd.readouterr()
    with pytest.raises(SystemExit) as done:
        run_cli(main, argv)
    err = capfd.readouterr().err.strip().splitlines()
    assert done.value.code == 2 and len(err) == 1, err
    return err[0]


def _kill_when(cmd: list[str], ready, timeout: float = 120, sig: int = signal.SIGKILL) -> tuple[int, str]:
    """Start ``cmd``, send it ``sig`` as soon as ``ready()`` is true (fail if it finishes first); its exit code and
    stderr."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with tempfile.TemporaryFile("w+") as err:  # not a pipe: a full one would stall the process before ready()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env)
        deadline = time.monotonic() + timeout
        try:
            while not ready():
                assert proc.poll() is None, "finished before it could be killed"
                assert time.monotonic() < deadline
                time.sleep(0.02)
        finally:
            proc.send_signal(sig)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:  # it ignored the signal: fail, and leave nothing running
                proc.kill()
                raise
        err.seek(0)
        return proc.returncode, err.read()


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".") or p.name.endswith(".partial"))


def test_a_second_encode_into_a_locked_output_stops_at_once(tmp_path, capfd):
    model = make_tiny_bert(tmp_path / "model")
    corpus = _corpus(tmp_path / "c.jsonl", 8)
    output = tmp_path / "index"
    argv = ["--corpus", str(corpus), "--encoder", str(model), "--output", str(output), "--device", "cpu"]
    with output_lock(output) as lock:  # another writer (its own open file: flock conflicts in one process too)
        line = _cli_error(encode_main, argv, capfd)
        assert line == (f"error: {output}: another process (pid {os.getpid()}) is writing this output (it holds "
                        f"{lock}); wait for it to finish or choose another output")
        assert not output.exists() and _leftovers(tmp_path) == [".index.lock"]
    assert _leftovers(tmp_path) == []


def _encode_job(tmp_path: Path) -> tuple[list[str], Path, Path]:
    """``encode``'s flags for 1,000 passages in chunks of 50 (slow enough to be stopped mid-way), its output and
    work folder."""
    model = make_tiny_bert(tmp_path / "model")
    corpus = _corpus(tmp_path / "c.jsonl", 1000)
    output = tmp_path / "index"
    argv = ["--corpus", str(corpus), "--encoder", str(model), "--output", str(output), "--device", "cpu",
            "--chunk-size", "50", "--batch-size", "4", "--threads", "1", "--quiet"]
    return argv, output, tmp_path / "index.partial"


def test_killed_encode_resumes_only_with_the_same_precision(tmp_path, capfd):
    argv, output, work = _encode_job(tmp_path)
    _kill_when([sys.executable, "-m", "ance_ir.encode", *argv, "--precision", "fp32"],
               lambda: (work / "chunk-00001.npy").is_file())
    assert work.is_dir() and not output.exists()
    stale = work / ".chunk-00002.npy.killed.tmp"  # as if the kill came mid-write: the refusal leaves it alone
    stale.touch()

    line = _cli_error(encode_main, [*argv, "--precision", "int8"], capfd)
    assert line.startswith(f"error: {work}: holds an unfinished job with a different precision ('fp32', now 'int8')")
    assert stale.exists()

    capfd.readouterr()
    with pytest.raises(SystemExit) as done:
        run_cli(encode_main, [*argv, "--precision", "fp32"])
    assert done.value.code == 0
    assert "reused" in capfd.readouterr().err
    assert output.is_dir() and _leftovers(tmp_path) == []


def test_sigterm_stops_encode_as_ctrl_c_does_and_the_rerun_resumes(tmp_path, capfd):
    argv, output, work = _encode_job(tmp_path)
    code, err = _kill_when([sys.executable, "-m", "ance_ir.encode", *argv],
                           lambda: (work / "chunk-00001.npy").is_file(), sig=signal.SIGTERM)
    last = err.strip().splitlines()[-1]
    assert code == 143, err
    assert last.startswith("interrupted: ") and last.endswith(f"passages encoded are kept in {work}; rerun the "
                                                              "same command to resume"), err
    assert not output.exists() and _leftovers(tmp_path) == ["index.partial"]
    assert not [p.name for p in work.iterdir() if p.name.startswith(".")]  # no chunk half-written

    capfd.readouterr()
    with pytest.raises(SystemExit) as done:
        run_cli(encode_main, argv)
    assert done.value.code == 0
    assert "reused" in capfd.readouterr().err
    assert output.is_dir() and _leftovers(tmp_path) == []


def test_sigterm_without_a_job_of_its_own_to_report_exits_143():
    code = ("import os, signal, time; from ance_ir.cli import run_cli; "
            "run_cli(lambda argv: os.kill(os.getpid(), signal.SIGTERM) or time.sleep(30))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert (done.returncode, done.stderr) == (143, "terminated\n")


def test_run_cli_gives_the_callers_sigterm_handler_back():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit):
        run_cli(lambda argv: None)
    assert signal.getsignal(signal.SIGTERM) is before


def test_sigterm_stops_rerank_and_the_rerun_scores_only_what_was_left(tmp_path, capfd):
    import torch

    from ance_ir.data import write_run
    from ance_ir.modeling.kinds import load_model
    from ance_ir.rerank.__main__ import main as rerank_main

    model = tmp_path / "cross-encoder"
    load_model(make_tiny_bert(tmp_path / "bert"), "cross-encoder").save_pretrained(model)
    corpus = _corpus(tmp_path / "c.jsonl", 8)
    topics = tmp_path / "topics.tsv"
    topics.write_text("".join(f"q{i}\t{' '.join(WORDS[i % 9:i % 9 + 4])} {i}\n" for i in range(600)))
    first = tmp_path / "first.trec"
    write_run({f"q{i}": [(f"d{j}", 8.0 - j) for j in range(8)] for i in range(600)}, first)
    argv = ["--run", str(first), "--topics", str(topics), "--corpus", str(corpus), "--model", str(model),
            "--chunk-size", "8", "--batch-size", "4", "--precision", "fp32", "--threads", "1", "--quiet"]
    straight = tmp_path / "straight.trec"
    capfd.readouterr()
    with pytest.raises(SystemExit) as done:
        run_cli(rerank_main, [*argv, "--output", str(straight)])
    assert done.value.code == 0 and not (tmp_path / "straight.trec.partial").exists()

    output, work = tmp_path / "reranked.trec", tmp_path / "reranked.trec.partial"
    code, err = _kill_when([sys.executable, "-m", "ance_ir.rerank", *argv, "--output", str(output)],
                           lambda: (work / "scores-00001.npy").is_file(), sig=signal.SIGTERM)
    assert code == 143, err
    # 600 queries x 8 passages, 4,200 distinct text pairs (d7's text is d0's): each is scored once
    kept = re.fullmatch(rf"interrupted: (\d+) of 4200 pairs scored are kept in {re.escape(str(work))}; rerun the "
                        "same command to resume", err.strip().splitlines()[-1])
    assert kept and int(kept[1]) >= 16, err
    assert not output.exists()
    line = _cli_error(rerank_main, [*argv, "--output", str(output), "--batch-size", "8"], capfd)
    assert line.startswith(f"error: {work}: holds an unfinished reranking with a different batch_size (4, now 8)")
    kept_model = tmp_path / "kept-model"
    shutil.copytree(model, kept_model)
    trained_again = load_model(str(model), "cross-encoder")
    with torch.no_grad():
        next(trained_again.parameters()).add_(0.5)
    trained_again.save_pretrained(model)
    line = _cli_error(rerank_main, [*argv, "--output", str(output)], capfd)  # the model trained again in place
    assert line.startswith(f"error: {work}: holds an unfinished reranking with a different weights_sha256")
    shutil.rmtree(model)
    shutil.copytree(kept_model, model)
    with output_lock(output):  # another writer: refused before the model is loaded
        line = _cli_error(rerank_main, [*argv, "--output", str(output), "--model", str(tmp_path / "gone")], capfd)
        assert line.startswith(f"error: {output}: another process (pid {os.getpid()}) is writing this output")

    capfd.readouterr()
    with pytest.raises(SystemExit) as done:
        run_cli(rerank_main, [*argv, "--output", str(output)])
    assert done.value.code == 0
    assert f"reused {kept[1]} of 4200 pairs already scored in {work}" in capfd.readouterr().err  # every kept chunk
    assert output.read_bytes() == straight.read_bytes().replace(b"straight", b"reranked")  # the run tag
    assert _leftovers(tmp_path) == []


def test_killed_bm25_index_leaves_nothing_after_the_next_build(tmp_path):
    corpus = _corpus(tmp_path / "c.jsonl", 5000)
    output = tmp_path / "ix"
    cmd = [sys.executable, "-m", "ance_ir.bm25", "index", "--corpus", str(corpus), "--output", str(output),
           "--threads", "1"]
    _kill_when(cmd, lambda: any(p.is_dir() and p.name.startswith(".ix.") and p.name.endswith(".tmp")
                                and p.name != ".ix.lock" and any(p.iterdir()) and ".corpus." not in p.name
                                for p in tmp_path.iterdir()))
    assert _leftovers(tmp_path)  # the killed build's temporaries
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    assert "left by an interrupted build" in done.stderr
    assert (output / "segments_1").exists() or any(output.glob("segments*"))
    assert _leftovers(tmp_path) == []
