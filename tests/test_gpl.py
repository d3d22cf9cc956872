"""GPL (``python -m ance_ir.gpl``) end to end on the toy collection with tiny random models: every stage's file,
the pseudo labels are the cross-encoder's scores, the trained model moved, and a rerun skips what exists."""

from __future__ import annotations

import gzip
import json

import pytest
import torch
from conftest import TOY_PASSAGES, assert_refused, run_main
from safetensors.torch import load_file

from ance_ir.encode.__main__ import main as encode_main
from ance_ir.gpl.__main__ import main as gpl_main
from ance_ir.modeling.kinds import load_model
from bench.gpl_pipeline import stage_rows

STAGES = ("generate", "pairs", "mine", "label", "train")


@pytest.fixture(scope="module")
def models(toy, toy_bert, tmp_path_factory):
    root = tmp_path_factory.mktemp("gpl-models")
    torch.manual_seed(0)
    load_model(toy_bert, "generator", query_max_length=8).save_pretrained(root / "generator")
    load_model(toy_bert, "cross-encoder").save_pretrained(root / "cross-encoder")
    code = encode_main(["--corpus", str(toy / "corpus.jsonl"), "--encoder", str(toy_bert), "--output",
                        str(root / "index"), "--quiet"])
    assert not code
    return root


def gpl(toy, models, out, capsys, *extra):
    return run_main(gpl_main, "--corpus", str(toy / "corpus.jsonl"), "--generator", str(models / "generator"),
                    "--retriever", str(models / "index"), "--cross-encoder", str(models / "cross-encoder"),
                    "--output", str(out), "--queries-per-passage", "2", "--depth", "3", "--max-steps", "3",
                    *extra, capsys=capsys)


def test_gpl_runs_every_stage_and_labels_with_the_cross_encoder(toy, toy_bert, models, tmp_path, capsys):
    out = tmp_path / "gpl"
    code, err = gpl(toy, models, out, capsys, "--device", "cpu", "--threads", "1")
    assert code == 0, err
    assert all(f"gpl: {stage} -> " in err for stage in STAGES) and "%|" in err  # the stages' progress bars
    timings = json.loads((out / "timings.json").read_text())
    assert list(timings) == list(STAGES) and all(seconds >= 0 for seconds in timings.values())
    made = {name: what for name, what, _ in stage_rows(out)}
    assert made["generate"] == f"{2 * len(TOY_PASSAGES)} queries for {len(TOY_PASSAGES)} passages"
    assert made["train"] == "3 Margin-MSE steps"
    generated = [json.loads(line) for line in (out / "expanded.jsonl.queries.jsonl").read_text().splitlines()]
    assert [g["docid"] for g in generated] == list(TOY_PASSAGES) and all(len(g["queries"]) == 2 for g in generated)

    qrels = [line.split() for line in (out / "qgen.qrels").read_text().splitlines()]
    topics = dict(line.split("\t", 1) for line in (out / "qgen.tsv").read_text().splitlines())
    own = {g["docid"]: {q.strip() for q in g["queries"]} for g in generated}
    assert qrels and all(topics[qid].strip() in own[docid] for qid, _, docid, _ in qrels)

    with gzip.open(out / "scored.jsonl.gz", "rt") as f:
        groups = [json.loads(line) for line in f]
    assert len(groups) == len(qrels)
    cross_encoder = load_model(models / "cross-encoder")
    group = groups[0]
    passages = group["positive_passages"] + group["negative_passages"]
    assert len(group["negative_passages"]) == 3
    assert group["positive_passages"][0]["docid"] not in {p["docid"] for p in group["negative_passages"]}
    expected = cross_encoder.score_pairs([group["query"]] * len(passages), [TOY_PASSAGES[p["docid"]]
                                                                            for p in passages])
    assert [p["score"] for p in passages] == pytest.approx(expected, abs=1e-4)

    trained_with = json.loads((out / "model" / "config.json").read_text())
    assert trained_with["negatives"]["depth"] == 3  # all 3 labelled
    assert (trained_with["device"], trained_with["threads"]) == ("cpu", 1)  # passed to the model stages
    trained = load_file(next((out / "model" / "final").glob("*.safetensors")))
    start = load_file(toy_bert / "model.safetensors")
    assert any(not torch.equal(trained[k], start[k]) for k in start if k in trained)


def test_a_rerun_skips_the_stages_whose_output_exists(toy, models, tmp_path, capsys):
    out = tmp_path / "gpl"
    assert gpl(toy, models, out, capsys)[0] == 0
    scored = (out / "scored.jsonl.gz").read_bytes()
    code, err = gpl(toy, models, out, capsys)
    assert code == 0 and all(f"gpl: {stage}: " in err and "exists, skipped" in err for stage in STAGES)
    assert (out / "scored.jsonl.gz").read_bytes() == scored


def test_a_rerun_with_other_settings_is_refused(toy, models, tmp_path, capsys):
    out = tmp_path / "gpl"
    assert gpl(toy, models, out, capsys)[0] == 0
    before = sorted(p.name for p in out.iterdir())
    code, err = run_main(gpl_main, "--corpus", str(toy / "corpus.jsonl"), "--generator", str(models / "generator"),
                         "--retriever", str(models / "index"), "--cross-encoder", str(models / "cross-encoder"),
                         "--output", str(out), "--queries-per-passage", "2", "--depth", "4", "--max-steps", "3",
                         capsys=capsys)
    assert code == 2 and err.strip().splitlines() == [
        f"error: {out / 'gpl.json'}: this folder was made with other settings (depth: 3, now 4); rerun them or use "
        "a new --output"]
    assert sorted(p.name for p in out.iterdir()) == before


def test_a_rerun_with_an_input_changed_in_place_is_refused(toy, models, tmp_path, capsys):
    import shutil

    corpus, out = tmp_path / "corpus.jsonl", tmp_path / "gpl"
    shutil.copyfile(toy / "corpus.jsonl", corpus)
    args = ["--corpus", str(corpus), "--generator", str(models / "generator"), "--retriever", str(models / "index"),
            "--cross-encoder", str(models / "cross-encoder"), "--output", str(out), "--queries-per-passage", "2",
            "--depth", "3", "--max-steps", "3"]
    assert run_main(gpl_main, *args, capsys=capsys)[0] == 0
    recorded = json.loads((out / "gpl.json").read_text())["inputs"]
    assert set(recorded) == {"corpus", "train_config", "generator", "cross_encoder", "model", "retriever"}
    assert all(recorded.values())  # files and folders all: no name left unhashed here
    corpus.write_text(corpus.read_text().replace("cat", "dog", 1))  # the corpus edited after stage 1 ran
    code, err = run_main(gpl_main, *args, capsys=capsys)
    assert code == 2 and f"this folder was made with other settings (inputs.corpus: '{recorded['corpus']}', now" in err


def test_max_queries_pairs_mines_and_labels_that_many_drawn_queries(toy, models, tmp_path, capsys):
    out = tmp_path / "gpl"
    code, err = run_main(gpl_main, "--corpus", str(toy / "corpus.jsonl"), "--generator", str(models / "generator"),
                         "--retriever", str(models / "index"), "--cross-encoder", str(models / "cross-encoder"),
                         "--output", str(out), "--queries-per-passage", "2", "--max-queries", "5", "--depth", "2",
                         "--max-steps", "2", "--quiet", capsys=capsys)
    assert code == 0, err
    assert "%|" not in err  # --quiet: no stage draws a progress bar
    assert len((out / "qgen.qrels").read_text().splitlines()) == 5
    with gzip.open(out / "scored.jsonl.gz", "rt") as f:
        assert sum(1 for _ in f) == 5


def test_a_missing_retriever_index_stops_before_any_work(toy, models, tmp_path, capsys):
    out = tmp_path / "gpl"
    assert_refused(run_main(gpl_main, "--corpus", str(toy / "corpus.jsonl"), "--generator", str(models / "generator"),
                            "--retriever", str(tmp_path / "no-index"), "--cross-encoder",
                            str(models / "cross-encoder"), "--output", str(out), capsys=capsys),
                   "no such dense index folder", out)


def test_the_retriever_s_encoder_trains_with_the_pooling_its_index_was_encoded_with(toy, toy_bert, models, tmp_path,
                                                                                   capsys):
    """An index encoded with --pooling mean from a model that pools with CLS: the model GPL trains (the index's
    encoder, no --model) pools as the index did, and unnormalised scores under a temperature for cosines are
    warned about."""
    index = tmp_path / "mean.index"
    assert not encode_main(["--corpus", str(toy / "corpus.jsonl"), "--encoder", str(toy_bert), "--pooling", "mean",
                            "--no-normalize", "--output", str(index), "--quiet"])
    out = tmp_path / "gpl"
    code, err = run_main(gpl_main, "--corpus", str(toy / "corpus.jsonl"), "--generator", str(models / "generator"),
                         "--retriever", str(index), "--cross-encoder", str(models / "cross-encoder"),
                         "--output", str(out), "--queries-per-passage", "1", "--depth", "2", "--max-steps", "2",
                         capsys=capsys)
    assert code == 0, err
    trained_with = json.loads((out / "model" / "config.json").read_text())["model"]
    assert (trained_with["pooling"], trained_with["normalize"]) == ("mean", False)
    assert load_model(out / "model").config.pooling == "mean"
    assert "warning: " in err and "loss.temperature 0.05 suits normalised vectors" in err
