"""The poly-encoder (kind ``poly-encoder``): scores against a hand computation (code attention over the query's
tokens, passage attention over the codes), save/load with the codes, the ``poly-encoder`` training task through the
real trainer, reranking a run through ``python -m ance_ir.rerank``; bad inputs give one ``error:`` line."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TOY_PASSAGES, TOY_QRELS, TOY_TOPICS, assert_refused, load_sections, run_main, toy_sections
from safetensors.torch import load_file

from ance_ir.data import read_run, write_run
from ance_ir.encode.__main__ import main as encode
from ance_ir.modeling import DenseEncoder
from ance_ir.modeling.kinds import load_model, saved_kind
from ance_ir.modeling.poly_encoder import CODES_NAME, PolyEncoder
from ance_ir.rerank.__main__ import main as rerank
from ance_ir.search.__main__ import main as search
from ance_ir.train import build_config, read_log, train
from ance_ir.train.layout import RunDir
from ance_ir.train.poly_encoder import PolyEncoderTask

QUERIES = [*TOY_TOPICS.values(), "cat"]
PASSAGES = list(TOY_PASSAGES.values())


def spread(model: PolyEncoder) -> PolyEncoder:
    """Every weight matrix (the codes too) redrawn with std 0.2: a new BERT (std 0.02) gives nearly one CLS state
    for every text, and new codes attend nearly uniformly."""
    torch.manual_seed(2)
    with torch.no_grad():
        for param in model.parameters():
            if param.ndim == 2:
                param.normal_(0.0, 0.2)
    return model


@pytest.fixture(scope="module")
def poly(toy_bert, tmp_path_factory) -> Path:
    """A saved poly-encoder (m = 3) over the tiny random BERT: what rerank takes."""
    path = tmp_path_factory.mktemp("poly") / "model"
    spread(load_model(toy_bert, "poly-encoder", m=3)).save_pretrained(path)
    return path


def softmax(values: list[float]) -> list[float]:
    top = max(values)
    exps = [math.exp(v - top) for v in values]
    return [e / sum(exps) for e in exps]


def dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_scores_are_passage_attention_over_code_attention(toy_bert):
    model = load_model(toy_bert, "poly-encoder", m=3)
    assert isinstance(model, PolyEncoder) and model.m == 3 and model.index is None and model.fresh_head
    spread(model)
    backbone, codes = model.query_tower.backbone, model.codes.tolist()

    def states(text: str, max_length: int) -> list[list[float]]:  # one text alone: no padding
        tokens = model.tokenizer(text, truncation=True, max_length=max_length, return_tensors="pt")
        with torch.no_grad():
            return backbone(**tokens).last_hidden_state[0].tolist()

    expected = np.empty((len(QUERIES), len(PASSAGES)))
    for i, query in enumerate(QUERIES):
        tokens = states(query, 64)
        code_vectors = []
        for code in codes:
            weights = softmax([dot(code, t) for t in tokens])
            code_vectors.append([sum(w * t[d] for w, t in zip(weights, tokens, strict=True)) for d in range(32)])
        for j, passage in enumerate(PASSAGES):
            vector = states(passage, 256)[0]
            weights = softmax([dot(vector, c) for c in code_vectors])
            mixed = [sum(w * c[d] for w, c in zip(weights, code_vectors, strict=True)) for d in range(32)]
            expected[i, j] = dot(mixed, vector)

    pairs = [(q, p) for q in QUERIES for p in PASSAGES]
    scores = model.score_pairs([q for q, _ in pairs], [p for _, p in pairs], batch_size=3)  # padded batches
    assert np.allclose(scores.reshape(expected.shape), expected, atol=1e-4)
    query_vectors = model.encode_queries(QUERIES, batch_size=2)
    assert query_vectors.shape == (len(QUERIES), 3, 32)
    matrix = model.score(torch.from_numpy(query_vectors), torch.from_numpy(model.encode_passages(PASSAGES)))
    assert np.allclose(matrix.numpy(), expected, atol=1e-4)
    assert np.ptp(expected, axis=1).min() > 1.0  # the passages score differently


def test_save_load_round_trip_keeps_the_codes(poly, tmp_path):
    model = load_model(poly)
    assert isinstance(model, PolyEncoder) and model.m == 3 and saved_kind(poly) == "poly-encoder"
    assert torch.equal(load_file(poly / CODES_NAME)["codes"], model.codes.detach())
    assert not (poly / "modules.json").exists()  # no sentence-transformers files: one vector is not its model
    model.save_pretrained(tmp_path / "again")
    again = load_model(tmp_path / "again")
    queries, passages = QUERIES * 2, PASSAGES[:4] * 2
    assert np.array_equal(model.score_pairs(queries, passages), again.score_pairs(queries, passages))
    assert torch.equal(model.codes, again.codes)
    assert not model.fresh_head
    fresh = load_model(poly, m=5)  # another m: new codes
    assert fresh.m == 5 and fresh.codes.abs().max() < 0.2 and fresh.fresh_head
    with pytest.raises(ValueError, match="is a 'poly-encoder' model, expected a 'dense' model"):
        load_model(poly, "dense")
    with pytest.raises(ValueError, match="normalize must be false"):
        load_model(poly, normalize=True)
    with pytest.raises(ValueError, match="m \\(code vectors\\) must be a positive integer, got 0"):
        load_model(poly, m=0)


def test_pyserini_adapters_refuse_a_poly_encoder_object(poly):
    from ance_ir.modeling.pyserini_adapters import AnceIrQueryEncoder, auto_query_encoder_kwargs

    with pytest.raises(ValueError, match="a 'poly-encoder' model has no single-vector encoding"):
        AnceIrQueryEncoder(load_model(poly))
    with pytest.raises(ValueError, match="a 'poly-encoder' model has no single-vector encoding"):
        auto_query_encoder_kwargs(str(poly))


def test_the_task_scores_groups_by_attention():
    torch.manual_seed(0)
    queries, passages = torch.randn(2, 3, 4), torch.randn(2 * 2, 4)  # 2 queries of m = 3 codes, groups of 2
    inbatch = PolyEncoderTask.score_groups(queries, passages, 2, True, None, None)
    own = PolyEncoderTask.score_groups(queries, passages, 2, False, None, None)
    for i in range(2):
        codes = queries[i].tolist()
        for j in range(4):
            vector = passages[j].tolist()
            weights = softmax([dot(vector, c) for c in codes])
            expected = sum(w * dot(vector, c) for w, c in zip(weights, codes, strict=True))
            assert inbatch.scores[i, j].item() == pytest.approx(expected, abs=1e-5)
            if j // 2 == i:
                assert own.scores[i, j % 2].item() == pytest.approx(expected, abs=1e-5)
    assert inbatch.targets.tolist() == [0, 2] and own.scores.shape == (2, 2)


def settings(toy: Path, toy_bert: Path, output: Path, **changes) -> dict:
    """A poly-encoder config on the toy collection: 3 queries a step, one sampled negative each, in-batch."""
    return toy_sections(toy, output, {"model": {"name": str(toy_bert), "m": 4},
                                      "task": {"name": "poly-encoder", "batch_size": 3, "n_negatives": 1,
                                               "in_batch": True},
                                      "refresh": {"every": 0}, "optim": {"max_steps": 60}}, changes)


def test_training_steps_through_the_trainer(toy, toy_bert, tmp_path):
    config = load_sections(tmp_path / "p.yaml", settings(toy, toy_bert, tmp_path / "run"))
    assert (config.model.kind, config.model.options) == ("poly-encoder", {"m": 4})
    train(config)
    run = RunDir(tmp_path / "run")
    losses = [r["loss"] for r in read_log(run.log) if "loss" in r]
    assert len(losses) == 60 and all(map(math.isfinite, losses))
    assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:10])  # it learns the toy positives
    trained = load_model(run.root)
    assert isinstance(trained, PolyEncoder) and trained.m == 4 and saved_kind(run.final) == "poly-encoder"
    torch.manual_seed(3)  # the trainer seeds torch with the config's seed before loading the model
    start = load_model(toy_bert, "poly-encoder", m=4)
    assert 0.01 < (trained.codes - start.codes).abs().max() < 0.1  # trained, by at most 60 steps of lr 1e-3
    for qid, query in TOY_TOPICS.items():
        docids = list(TOY_PASSAGES)
        scores = trained.score_pairs([query] * len(docids), [TOY_PASSAGES[d] for d in docids])
        assert TOY_QRELS[qid].get(docids[int(np.argmax(scores))], 0) >= 1, qid


@pytest.mark.parametrize(("changes", "setting", "message"), [
    ({"negatives": {"name": "ance"}}, "negatives.name", "ance mines from an ANN index"),
    ({"refresh": {"eval_topics": "t.tsv"}}, "refresh.eval_topics",
     "builds no index during training; evaluate its final/ model with"),
    ({"model": {"pooling": "mean"}}, "model.pooling", "a poly-encoder encodes a passage as its CLS vector"),
    ({"model": {"normalize": True}}, "model.normalize", "unnormalised vectors"),
    ({"model": {"kind": "dense", "m": None}}, "model.kind", "task 'poly-encoder' trains 'poly-encoder' models"),
    ({"task": {"mlm_weight": -1}}, "task.mlm_weight", "must not be negative"),
    ({"task": {"mlm_weight": 0.5, "grad_cache_chunk": 2}}, "task.mlm_weight", "does not run under the gradient"),
])
def test_settings_a_poly_encoder_cannot_train_with(toy, toy_bert, tmp_path, changes, setting, message):
    with pytest.raises(ValueError, match=rf"p\.yaml:\d+: {setting}: .*{message}"):
        load_sections(tmp_path / "p.yaml", settings(toy, toy_bert, tmp_path / "run", **changes))


def test_the_contrastive_task_refuses_a_poly_encoder(toy, toy_bert, tmp_path):
    with pytest.raises(ValueError, match=r"model.kind: 'poly-encoder' models score pairs and encode no index"):
        load_sections(tmp_path / "p.yaml", settings(toy, toy_bert, tmp_path / "run", task={"name": "contrastive"},
                                                    model={"kind": "poly-encoder"}))


def test_the_example_config_loads():
    config = build_config(Path(__file__).resolve().parent.parent / "configs/rag24-mini/poly-encoder.yaml", {})
    assert (config.task.name, config.model.kind, config.model.name) == ("poly-encoder", "poly-encoder", "bert-tiny")
    assert config.model.options == {"m": 16} and config.task.in_batch and config.refresh.eval_topics is None


@pytest.fixture()
def first_stage(tmp_path) -> Path:
    """A toy first-stage run: every passage for every query, in a fixed order."""
    order = ["d8", "d7", "d6", "d5", "d4", "d3", "d2", "d1"]
    path = tmp_path / "first.trec"
    write_run({qid: [(d, 10.0 - i) for i, d in enumerate(order)] for qid in TOY_TOPICS}, path, tag="first")
    return path


def rerank_args(model: Path, toy: Path, run: Path, output: Path, *extra: str) -> list[str]:
    return ["--run", str(run), "--topics", str(toy / "topics.tsv"), "--corpus", str(toy / "corpus.jsonl"),
            "--model", str(model), "--output", str(output), "--quiet", *extra]


def test_rerank_orders_the_top_depth_by_the_poly_encoder(poly, toy, first_stage, tmp_path, capsys):
    output = tmp_path / "reranked.trec"
    code, err = run_main(rerank, *rerank_args(poly, toy, first_stage, output, "--depth", "5", "--hits", "7",
                                              "--precision", "fp32", "--qrels", str(toy / "qrels.txt")), capsys=capsys)
    assert code == 0, err
    reranked, before = read_run(output), read_run(first_stage)
    model = load_model(poly)
    changed = False
    for qid, query in TOY_TOPICS.items():
        top = [d for d, _ in before[qid][:5]]
        scores = model.score_pairs([query] * 5, [TOY_PASSAGES[d] for d in top])
        expected = [top[i] for i in np.argsort(-scores, kind="stable")]
        hits = reranked[qid]
        assert [d for d, _ in hits] == expected + ["d3", "d2"]  # below depth: first-stage order, cut at 7
        assert np.allclose([s for _, s in hits[:5]], np.sort(scores)[::-1], atol=1e-5)
        changed |= expected != top
    assert changed  # the model did reorder


def test_bad_inputs_give_one_line(poly, toy_bert, toy, first_stage, tmp_path, capsys):
    output = tmp_path / "out"
    assert_refused(run_main(encode, "--corpus", str(toy / "corpus.jsonl"), "--encoder", str(poly), "--output",
                            str(output), capsys=capsys), "a 'poly-encoder' model writes no index", output)
    assert_refused(run_main(rerank, *rerank_args(poly, toy, first_stage, output, "--depth", "0"), capsys=capsys),
                   "--depth must be at least 1, got 0", output)
    assert_refused(run_main(rerank, *rerank_args(poly, toy, first_stage, output, "--max-length", "64"), capsys=capsys),
                   "--max-length is a cross-encoder setting", output)
    dense, index = tmp_path / "dense", tmp_path / "index"
    DenseEncoder.from_pretrained(toy_bert).save_pretrained(dense)
    assert run_main(encode, "--corpus", str(toy / "corpus.jsonl"), "--encoder", str(dense), "--output", str(index),
                    "--quiet", capsys=capsys)[0] == 0
    assert_refused(run_main(search, "--topics", str(toy / "topics.tsv"), "--index", str(index), "--encoder", str(poly),
                            "--output", str(output), capsys=capsys),
                   "is a 'poly-encoder' model, expected a 'dense' model", output)
    assert_refused(run_main(rerank, *rerank_args(dense, toy, first_stage, output), capsys=capsys),
                   "is a 'dense' model, which scores no (query, passage) pairs", output)
