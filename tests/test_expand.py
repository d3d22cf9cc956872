"""``python -m ance_ir.expand``: doc2query expansion with a generator or the judged queries, its two files, resuming
after an interruption (a stop, a ``kill -9``) with the same bytes, and refusing what would change them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import TOY_PASSAGES, TOY_QRELS, TOY_TOPICS, assert_refused, run_main

from ance_ir.data import corpus_texts, iter_corpus, output_lock
from ance_ir.expand import judged_queries, queries_path, work_folder
from ance_ir.expand.__main__ import main
from ance_ir.modeling.kinds import load_model
from ance_ir.pretrain_data.qgen import read_generated_queries

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def generator_dir(toy_bert, tmp_path_factory) -> Path:
    """A (random) generator saved by ance-ir: it records its kind, so expand takes it."""
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("generator") / "gen"
    load_model(toy_bert, "generator", query_max_length=6).save_pretrained(path)
    return path


def expand(corpus: Path, generator: Path, output: Path, *args: str, capsys) -> str:
    code, err = run_main(main, "--corpus", str(corpus), "--generator", str(generator), "--output", str(output),
                         "--quiet", "--device", "cpu", *args, capsys=capsys)
    assert code == 0, err
    return err


def test_each_passage_gets_its_generated_queries_and_the_side_file_lists_them(toy, generator_dir, tmp_path, capsys):
    out = tmp_path / "expanded.jsonl"
    err = expand(toy / "corpus.jsonl", generator_dir, out, "--n", "3", "--seed", "5", capsys=capsys)
    assert f"wrote {out}: 8 passages, 8 expanded with 24 queries" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["expanded.jsonl", "expanded.jsonl.queries.jsonl"]
    queries = read_generated_queries(queries_path(out))
    expected = load_model(generator_dir).generate(list(TOY_PASSAGES.values()), n=3, seed=5)
    assert list(queries) == list(TOY_PASSAGES) and list(queries.values()) == expected
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["id"] for line in lines] == list(TOY_PASSAGES)
    for line, generated in zip(lines, expected, strict=True):
        assert set(line) == {"id", "contents"}
        assert line["contents"] == " ".join([TOY_PASSAGES[line["id"]], *generated])
    assert [p.docid for p in iter_corpus(out)] == list(TOY_PASSAGES)  # a corpus every command reads
    assert queries_path(out).read_text().splitlines()[0] == json.dumps({"docid": "d1", "queries": expected[0]})


def test_a_stopped_run_resumes_to_the_same_bytes_and_refuses_other_settings(toy, generator_dir, tmp_path, capsys):
    corpus, out = toy / "corpus.jsonl", tmp_path / "x.jsonl"
    settings = ("--n", "2", "--chunk-size", "3", "--batch-size", "2")
    err = expand(corpus, generator_dir, out, *settings, "--stop-after-chunks", "1", capsys=capsys)
    assert "stopped after 1 chunks; rerun the same command to continue" in err
    assert not out.exists() and not queries_path(out).exists()
    assert sorted(p.name for p in work_folder(out).iterdir()) == ["chunk-00000.jsonl", "job.json"]
    code, err = run_main(main, "--corpus", str(corpus), "--generator", str(generator_dir), "--output", str(out),
                         "--quiet", *settings, "--seed", "1", capsys=capsys)
    assert code == 2 and err.startswith(f"error: {work_folder(out)}: holds an unfinished expansion with a "
                                        "different sampling")
    err = expand(corpus, generator_dir, out, *settings, "--stop-after-chunks", "1", capsys=capsys)
    assert "reused 3 of 8 passages already expanded" in err and "stopped after 1 chunks" in err
    err = expand(corpus, generator_dir, out, *settings, capsys=capsys)
    assert "reused 6 of 8 passages already expanded" in err and not work_folder(out).exists()
    straight = tmp_path / "straight.jsonl"
    expand(corpus, generator_dir, straight, *settings, capsys=capsys)
    assert out.read_bytes() == straight.read_bytes()
    assert queries_path(out).read_bytes() == queries_path(straight).read_bytes()
    other = tmp_path / "other.jsonl"  # another chunking and batching: the same queries
    expand(corpus, generator_dir, other, "--n", "2", "--chunk-size", "5", "--batch-size", "8", capsys=capsys)
    assert queries_path(other).read_bytes() == queries_path(straight).read_bytes()


def test_a_killed_run_resumes_to_the_same_bytes(generator_dir, tmp_path, capsys):
    corpus = tmp_path / "corpus.jsonl"
    words = " ".join(TOY_PASSAGES.values()).split()
    corpus.write_text("".join(json.dumps({"id": f"p{i}", "contents": " ".join(words[i % 30:i % 30 + 12])}) + "\n"
                              for i in range(120)))
    out = tmp_path / "killed.jsonl"
    settings = ["--n", "4", "--max-length", "6", "--chunk-size", "4", "--batch-size", "4"]
    cmd = [sys.executable, "-m", "ance_ir.expand", "--corpus", str(corpus), "--generator", str(generator_dir),
           "--output", str(out), "--device", "cpu", "--threads", "1", *settings]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    first = work_folder(out) / "chunk-00000.jsonl"
    deadline = time.monotonic() + 120
    try:
        while not first.exists():
            assert proc.poll() is None, "finished before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert not out.exists() and (tmp_path / ".killed.jsonl.lock").exists()  # what kill -9 leaves
    expand(corpus, generator_dir, out, *settings, capsys=capsys)
    straight = tmp_path / "straight.jsonl"
    expand(corpus, generator_dir, straight, *settings, capsys=capsys)
    assert out.read_bytes() == straight.read_bytes()
    assert queries_path(out).read_bytes() == queries_path(straight).read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.jsonl", "killed.jsonl", "killed.jsonl.queries.jsonl",
                                                          "straight.jsonl", "straight.jsonl.queries.jsonl"]


def test_an_expansion_counts_the_corpus_and_its_writing_past_the_delay(toy, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("ance_ir.data.resume.BAR_DELAY_S", 0)
    out = tmp_path / "judged.jsonl"
    code, err = run_main(main, "--corpus", str(toy / "corpus.jsonl"), "--topics", str(toy / "topics.tsv"),
                         "--qrels", str(toy / "qrels.txt"), "--output", str(out), capsys=capsys)
    passages = len(TOY_PASSAGES)
    assert code == 0 and f"check corpus: {passages}passage [" in err
    assert f"write judged.jsonl: 100%|██████████| {passages}/{passages}" in err


def test_judged_queries_expand_the_relevant_passages_with_their_topics_text(toy, tmp_path, capsys):
    out = tmp_path / "upper.jsonl"
    code, err = run_main(main, "--corpus", str(toy / "corpus.jsonl"), "--topics", str(toy / "topics.tsv"),
                         "--qrels", str(toy / "qrels.txt"), "--min-positive-grade", "2", "--output", str(out),
                         "--quiet", capsys=capsys)
    assert code == 0, err
    relevant = {d: [TOY_TOPICS[q]] for q, judged in TOY_QRELS.items() for d, g in judged.items() if g >= 2}
    assert relevant == {"d1": [TOY_TOPICS["q1"]], "d3": [TOY_TOPICS["q2"]], "d5": [TOY_TOPICS["q3"]],
                        "d6": [TOY_TOPICS["q3"]]}
    assert read_generated_queries(queries_path(out)) == {d: relevant.get(d, []) for d in TOY_PASSAGES}
    contents = corpus_texts(out)
    assert contents == {d: " ".join([t, *relevant.get(d, [])]) for d, t in TOY_PASSAGES.items()}
    assert "8 passages, 4 expanded with 4 queries" in err
    both = judged_queries({"q1": "cat  mat", "q2": "cat mat", "q3": "dog"}, {"q1": {"d": 1}, "q2": {"d": 2},
                                                                            "q3": {"d": 0}})
    assert both == {"d": ["cat mat"]}  # one text once; grade 0 is not relevant


def test_a_named_topic_set_brings_its_own_qrels(rag24_home, tmp_path, capsys):
    common = ["--corpus", "rag24-mini", "--topics", "rag24-mini-train", "--min-positive-grade", "2", "--quiet"]
    own = run_main(main, *common, "--output", str(tmp_path / "own.jsonl"), capsys=capsys)
    given = run_main(main, *common, "--qrels", "rag24-mini-train", "--output", str(tmp_path / "given.jsonl"),
                     capsys=capsys)
    assert own[0] == given[0] == 0, own[1] + given[1]
    assert (tmp_path / "own.jsonl").read_bytes() == (tmp_path / "given.jsonl").read_bytes()


def test_a_judged_expansion_resumes_from_another_folder_with_relative_paths(toy, tmp_path, monkeypatch, capsys):
    out = tmp_path / "upper.jsonl"
    more = ("--output", str(out), "--chunk-size", "3", "--quiet")
    monkeypatch.chdir(toy)
    code, err = run_main(main, "--corpus", "corpus.jsonl", "--topics", "topics.tsv", "--qrels", "qrels.txt", *more,
                         "--stop-after-chunks", "1", capsys=capsys)
    assert code == 0 and "stopped after 1 chunks" in err, err
    monkeypatch.chdir(toy.parent)
    code, err = run_main(main, "--corpus", f"{toy.name}/corpus.jsonl", "--topics", f"{toy.name}/topics.tsv",
                         "--qrels", f"./{toy.name}/qrels.txt", *more, capsys=capsys)
    assert code == 0 and "reused 3 of 8 passages already expanded" in err, err


@pytest.mark.parametrize("flags, message", [
    (("--topics", "topics.tsv", "--qrels", "qrels.txt", "--n", "3", "--top-k", "5"),
     "--n, --top-k: not used with --topics"),
    (("--generator", "GENERATOR", "--min-positive-grade", "2"), "--min-positive-grade: not used with --generator"),
])
def test_the_other_modes_flags_are_refused_not_ignored(toy, generator_dir, tmp_path, monkeypatch, capsys, flags,
                                                     message):
    monkeypatch.chdir(toy)
    flags = tuple(str(generator_dir) if f == "GENERATOR" else f for f in flags)
    out = tmp_path / "x.jsonl"
    assert_refused(run_main(main, "--corpus", "corpus.jsonl", "--output", str(out), *flags, capsys=capsys),
                   message, out)


def test_an_existing_output_needs_force_and_a_locked_one_is_refused(toy, generator_dir, tmp_path, capsys):
    out = tmp_path / "x.jsonl"
    expand(toy / "corpus.jsonl", generator_dir, out, "--n", "1", capsys=capsys)
    before = out.read_bytes()
    argv = ["--corpus", str(toy / "corpus.jsonl"), "--generator", str(generator_dir), "--output", str(out),
            "--n", "2", "--quiet"]
    code, err = run_main(main, *argv, capsys=capsys)
    assert code == 2 and err.strip() == f"error: {out}: already exists; pass --force to replace it"
    assert out.read_bytes() == before
    expand(toy / "corpus.jsonl", generator_dir, out, "--n", "2", "--force", capsys=capsys)
    assert all(len(q) == 2 for q in read_generated_queries(queries_path(out)).values())
    locked = tmp_path / "locked.jsonl"
    with output_lock(locked):
        code, err = run_main(main, *argv[:4], "--output", str(locked), capsys=capsys)
    assert code == 2 and "another process" in err and not locked.exists()
