"""SPLADE: term weights, the impact index Pyserini builds from them scoring exactly our own sparse dot products,
the JsonVectorCollection check, resuming, and bad inputs."""

from __future__ import annotations

import io
import json
import math
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from conftest import TOY_PASSAGES, TOY_TOPICS, Terminal, assert_refused, run_main, write_toy_collection

from ance_ir.encode.__main__ import main as encode_main
from ance_ir.index.impact import COLLECTION, check_vector_collection, read_meta
from ance_ir.modeling.kinds import load_model, saved_kind
from ance_ir.modeling.splade import Splade, flops, quantize, sparse_dot
from ance_ir.search.__main__ import main as search_main


@pytest.fixture(scope="module")
def splade_dir(toy_bert, tmp_path_factory) -> Path:
    """The toy BERT as a splade model with its (random) MLM head saved: a model whose head is not new."""
    fresh = load_model(toy_bert, "splade")
    assert fresh.fresh_head  # a bare encoder: its MLM head is newly initialised
    folder = tmp_path_factory.mktemp("splade-model") / "splade"
    fresh.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def model(splade_dir) -> Splade:
    return load_model(splade_dir, "splade")


@pytest.fixture(scope="module")
def index(model, splade_dir, tmp_path_factory) -> Path:
    from ance_ir.encode.impact_encoder import encode_impacts

    root = write_toy_collection(tmp_path_factory.mktemp("splade"))
    encode_impacts(root / "corpus.jsonl", model, root / "index", encoder_name=str(splade_dir), chunk_size=3,
                   show_progress=False)
    return root / "index"


def test_encoding_an_impact_index_moves_a_bar_per_batch_on_a_terminal(model, toy_bert, tmp_path, monkeypatch):
    from ance_ir.encode.impact_encoder import encode_impacts

    root = write_toy_collection(tmp_path)
    for stderr in (Terminal(), io.StringIO()):  # a terminal, a log file
        monkeypatch.setattr(sys, "stderr", stderr)
        encode_impacts(root / "corpus.jsonl", model, root / f"index-{stderr.isatty()}", encoder_name=str(toy_bert),
                       batch_size=1, chunk_size=len(TOY_PASSAGES))
        bar = f"encode:   0%|          | 0/{len(TOY_PASSAGES)}"  # within the chunk
        assert (bar in stderr.getvalue()) == stderr.isatty()  # in a log file every redraw would be a new line


def test_weights_are_max_over_tokens_of_log1p_relu(model):
    batch = model.tokenize(["the cat sat on the mat", "bread"], model.passage_max_length)
    with torch.no_grad():
        weights = model.embed(batch)
        logits = model.mlm(**batch).logits
    for row in range(2):
        n = int(batch["attention_mask"][row].sum())  # padding left out
        expected = torch.log1p(torch.relu(logits[row, :n])).max(dim=0).values
        assert torch.allclose(weights[row], expected)
    encoded = model.encode_passages(["bread"])[0]
    assert encoded and all(w > 0 for w in encoded.values())
    assert encoded == pytest.approx({model.terms[j]: float(weights[1, j]) for j in weights[1].nonzero()[:, 0]},
                                    rel=1e-5)  # batch composition moves the last bits


def test_save_load_round_trip(model, tmp_path):
    model.save_pretrained(tmp_path / "m")
    assert saved_kind(tmp_path / "m") == "splade"
    again = load_model(tmp_path / "m")
    assert isinstance(again, Splade) and again.settings == model.settings
    texts = list(TOY_PASSAGES.values())
    for ours, theirs in zip(again.encode_passages(texts), model.encode_passages(texts), strict=True):
        assert ours == pytest.approx(theirs)
    with pytest.raises(ValueError, match="is a 'splade' model"):
        load_model(tmp_path / "m", "dense")
    assert again.encode_passages([]) == []


def test_flops_equals_hand_computation():
    weights = torch.tensor([[1.0, 0.0, 2.0], [3.0, 0.0, 0.0]])
    assert float(flops(weights)) == pytest.approx(((1 + 3) / 2) ** 2 + 0 + (2 / 2) ** 2)


def test_quantize():
    assert quantize({"a": 0.004, "b": 0.006, "c": 1.234}, 100) == {"b": 1, "c": 123}


def test_pyserini_impact_scores_equal_our_dot_products(index, model):
    """Every hit's score from Pyserini's impact index is the integer dot product of the quantised vectors."""
    from ance_ir.search.impact import ImpactSearcher

    passages = {}
    for part in sorted((index / COLLECTION).glob("*.jsonl")):
        for line in part.read_text().splitlines():
            doc = json.loads(line)
            passages[doc["id"]] = doc["vector"]
    assert passages.keys() == TOY_PASSAGES.keys()
    for docid, text in TOY_PASSAGES.items():  # the collection holds our own quantised passage vectors
        assert passages[docid] == quantize(model.encode_passages([text])[0], 100)
    searcher = ImpactSearcher(index, model)
    run = searcher.search(TOY_TOPICS, hits=8)
    queries = dict(zip(TOY_TOPICS, searcher.encode_queries(list(TOY_TOPICS.values())), strict=True))
    checked = 0
    for qid, ranking in run.items():
        expected = {d: sparse_dot(queries[qid], v) for d, v in passages.items()}
        assert {d for d, s in expected.items() if s > 0} == {d for d, _ in ranking}
        for docid, score in ranking:
            assert score == expected[docid]  # exact: integers
            checked += 1
    assert checked >= 10


def test_an_impact_search_in_slices_with_a_bar_equals_one_batch(index, model, monkeypatch, capsys):
    from ance_ir.search.impact import ImpactSearcher

    topics = {f"{qid}-{n}": text for n in range(3) for qid, text in TOY_TOPICS.items()}
    whole = ImpactSearcher(index, model).search(topics, hits=5, progress=True)
    assert "impact search" not in capsys.readouterr().err
    monkeypatch.setattr("ance_ir.bm25.searcher.SEARCH_SLICE", 2)
    sliced = ImpactSearcher(index, model).search(topics, hits=5, progress=True)
    assert sliced == whole and list(sliced) == list(topics)
    assert f"impact search: 100%|██████████| {len(topics)}/{len(topics)}" in capsys.readouterr().err


def test_lucene_leaving_passages_out_of_an_impact_index_is_refused(model, splade_dir, tmp_path):
    """An id Lucene cannot index (40,000 characters) takes its collection file down silently; the build is refused
    and writes nothing (the encoded chunks stay for a rerun)."""
    from ance_ir.data import InputError
    from ance_ir.encode.impact_encoder import encode_impacts

    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "x" * 40000, "contents": "a cat"}) + "\n"
                      + json.dumps({"id": "d2", "contents": "a dog"}) + "\n")
    with pytest.raises(InputError, match=rf"{corpus}: Lucene indexed 0 of its 2 passages"):
        encode_impacts(corpus, model, tmp_path / "index", encoder_name=str(splade_dir), show_progress=False)
    assert not (tmp_path / "index").exists()


def test_collection_is_pyserini_format_and_indexed(index):
    from pyserini.index.lucene import LuceneIndexReader

    meta = read_meta(index)
    files = sorted((index / COLLECTION).glob("*.jsonl"))
    assert len(files) == 3  # chunks of 3 passages
    postings = sum(len(json.loads(line)["vector"]) for f in files for line in f.read_text().splitlines())
    assert check_vector_collection(files) == (len(TOY_PASSAGES), postings)
    assert (meta["passages"], meta["postings"]) == (len(TOY_PASSAGES), postings)
    assert LuceneIndexReader(str(index / "lucene")).stats()["documents"] == len(TOY_PASSAGES)
    assert meta["postings_per_passage"] == pytest.approx(meta["postings"] / len(TOY_PASSAGES))


@pytest.mark.parametrize(("line", "message"), [
    ("not json", "not JSON"),
    ('{"contents": "x", "vector": {"a": 1}}', "needs a non-empty string 'id'"),
    ('{"id": "d", "contents": "x"}', "needs a 'vector' object"),
    ('{"id": "d", "contents": "x", "vector": {"a b": 1}}', "holds whitespace"),
    ('{"id": "d", "contents": "x", "vector": {"a": 1.5}}', "must be a positive integer"),
    ('{"id": "d", "contents": "x", "vector": {"a": 0}}', "must be a positive integer"),
    (b'{"id": "d", "contents": "caf\xe9", "vector": {"a": 1}}', "not UTF-8 text .invalid continuation byte at byte 29"),
])
def test_bad_vector_collection_lines(tmp_path, line, message):
    from ance_ir.data import InputError

    path = tmp_path / "c.jsonl"
    path.write_bytes(b'{"id": "ok", "contents": "", "vector": {"a": 2}}\n'
                     + (line if isinstance(line, bytes) else line.encode()) + b"\n")
    with pytest.raises(InputError, match=f"{path}:2: .*{message}"):
        check_vector_collection([path])


def test_encode_resumes_from_finished_chunks(model, index, toy_bert, tmp_path):
    """A run that stopped after its first chunk is finished from there, with the same collection."""
    from ance_ir.data.resume import work_folder
    from ance_ir.encode.impact_encoder import encode_impacts
    from ance_ir.modeling.inference import weights_sha256

    root = write_toy_collection(tmp_path)
    output = tmp_path / "index"
    work = work_folder(output)
    (work / COLLECTION).mkdir(parents=True)
    job = {"corpus": str((root / "corpus.jsonl").resolve()), "corpus_sha256": read_meta(index)["corpus_sha256"],
           "encoder": str(toy_bert), "weights_sha256": weights_sha256(model), "kind": "splade",
           "encoder_config": model.settings, "scale": 100,
           "chunk_size": 3, "batch_size": 32, "precision": "fp32"}
    (work / "job.json").write_text(json.dumps(job))
    first = (index / COLLECTION / "part-00000.jsonl").read_text()
    (work / COLLECTION / "part-00000.jsonl").write_text(first)
    encode_impacts(root / "corpus.jsonl", model, output, encoder_name=str(toy_bert), chunk_size=3,
                   show_progress=False)
    for part in sorted((index / COLLECTION).glob("*.jsonl")):
        assert (output / COLLECTION / part.name).read_text() == part.read_text()
    assert not work.exists()


def test_bad_inputs_are_refused(model, index, toy_bert, tmp_path, capsys):
    out = tmp_path / "x"
    assert_refused(run_main(encode_main, "--corpus", str(index.parent / "corpus.jsonl"), "--encoder", str(toy_bert),
                            "--output", str(out), "--scale", "100", capsys=capsys), "--scale is for impact", out)
    splade = tmp_path / "splade"
    model.save_pretrained(splade)
    assert_refused(run_main(encode_main, "--corpus", str(index.parent / "corpus.jsonl"), "--encoder", str(splade),
                            "--output", str(out), "--scale", "0", capsys=capsys), "scale must be positive", out)
    assert_refused(run_main(encode_main, "--corpus", str(index.parent / "corpus.jsonl"), "--encoder", str(splade),
                            "--output", str(out), "--shard", "0/2", capsys=capsys), "in one process", out)
    run = tmp_path / "run.trec"
    assert_refused(run_main(search_main, "--topics", str(index.parent / "topics.tsv"), "--index", str(index),
                            "--output", str(run), "--pooling", "cls", capsys=capsys), "dense settings", run)
    for flag in ("--nprobe", "--ef-search"):
        assert_refused(run_main(search_main, "--topics", str(index.parent / "topics.tsv"), "--index", str(index),
                                "--output", str(run), flag, "4", capsys=capsys),
                       f"{flag} applies to a dense or token index; this is an impact index", run)
    assert_refused(run_main(search_main, "--topics", str(index.parent / "topics.tsv"), "--index", str(index),
                            "--output", str(run), "--encoder", str(toy_bert), capsys=capsys),
                   "has no trained splade head (a plain backbone)", run)
    odd = tmp_path / "odd"  # a meta.json whose encoder settings are not a JSON object
    shutil.copytree(index, odd)
    (odd / "meta.json").write_text(json.dumps({**json.loads((index / "meta.json").read_text()), "encoder_config": "x"}))
    assert_refused(run_main(search_main, "--topics", str(index.parent / "topics.tsv"), "--index", str(odd),
                            "--output", str(run), capsys=capsys),
                   "meta.json: encoder_config must be a JSON object of the encoder's settings, got 'x'", run)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "meta.json").write_text('{"index": "impact"}')
    assert_refused(run_main(search_main, "--topics", str(index.parent / "topics.tsv"), "--index", str(broken),
                            "--output", str(run), capsys=capsys), "not an impact index", run)


def train_settings(collection: Path, bert: Path, output: Path, **task) -> dict:
    return {"output": str(output), "seed": 3, "device": "cpu", "threads": 1, "progress": False, "log_every": 1,
            "model": {"name": str(bert), "query_max_length": 8, "passage_max_length": 16},
            "data": {"corpus": str(collection / "corpus.jsonl"), "topics": str(collection / "topics.tsv"),
                     "qrels": str(collection / "qrels.txt"), "min_positive_grade": 1},
            "task": {"name": "splade", "batch_size": 3, "n_negatives": 2, **task},
            "negatives": {"name": "random"}, "loss": {"name": "nll"}, "optim": {"lr": 1e-3, "max_steps": 40}}


def test_flops_warmup_is_quadratic():
    from ance_ir.train.splade import flops_weight

    assert [flops_weight(1.0, b, 10) for b in (0, 5, 10, 20)] == [0.0, 0.25, 1.0, 1.0]
    assert flops_weight(0.5, 0, 0) == 0.5


def test_the_flops_warm_up_counts_optimizer_steps_under_gradient_accumulation():
    from types import SimpleNamespace

    from ance_ir.train.splade import SpladeTask

    def lambdas(accumulation: int) -> tuple[float, float]:  # after 40 micro-batches of 4 queries
        config = SimpleNamespace(task=SimpleNamespace(batch_size=4, options={"flops_warmup_steps": 20}),
                                 optim=SimpleNamespace(grad_accumulation=accumulation))
        task = SimpleNamespace(options=SpladeTask.options, ctx=SimpleNamespace(config=config), epochs_done=2.0,
                               examples=80)
        return SpladeTask.lambdas(task)

    lambda_q = SpladeTask.options["lambda_q"]
    assert lambdas(1)[0] == pytest.approx(lambda_q)  # 40 steps: warmed up
    assert lambdas(4)[0] == pytest.approx(lambda_q * (10 / 20) ** 2)  # 10 steps of 4 micro-batches


def test_the_task_trains_and_its_loss_falls(toy_bert, tmp_path):
    from ance_ir.train.arguments import build_config
    from ance_ir.train.runlog import read_log
    from ance_ir.train.trainer import train

    collection = write_toy_collection(tmp_path / "toy")
    path = tmp_path / "splade.yaml"
    path.write_text(yaml.safe_dump(train_settings(collection, toy_bert, tmp_path / "run", in_batch=True,
                                                  flops_warmup_steps=10)))
    config = build_config(path, {})
    assert config.model.kind == "splade"
    train(config)
    losses = [r["loss"] for r in read_log(tmp_path / "run" / "log.jsonl") if "loss" in r]
    assert len(losses) == 40 and all(map(math.isfinite, losses))
    assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:10])
    assert saved_kind(tmp_path / "run" / "final") == "splade"
    card = (tmp_path / "run" / "final" / "README.md").read_text()  # its usage: encode and search, no rerank
    assert "python -m ance_ir.encode --corpus CORPUS --encoder" in card and "ance_ir.rerank" not in card


@pytest.mark.parametrize(("task", "setting", "message"), [
    ({"lambda_q": -1}, "task.lambda_q", "must be a number of at least 0"),
    ({"in_batch": False, "pooling": "mean"}, "model.pooling", "is a dense dual-encoder setting"),
])
def test_settings_a_splade_task_cannot_train_with(toy_bert, tmp_path, task, setting, message):
    from ance_ir.train.arguments import build_config

    changed = train_settings(write_toy_collection(tmp_path / "toy"), toy_bert, tmp_path / "run")
    if "pooling" in task:
        changed["model"]["pooling"] = task.pop("pooling")
    changed["task"].update(task)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(changed))
    with pytest.raises(ValueError, match=rf"c\.yaml:\d+: {setting}: {message}"):
        build_config(tmp_path / "c.yaml", {})


def test_the_example_config_loads():
    from ance_ir.train.arguments import build_config

    config = build_config(Path(__file__).resolve().parent.parent / "configs/rag24-mini/splade.yaml", {})
    assert (config.task.name, config.model.kind, config.model.name) == ("splade", "splade", "splade-tiny")
    assert config.task.options == {"lambda_q": 3e-4, "lambda_d": 1e-4, "flops_warmup_steps": 200}
