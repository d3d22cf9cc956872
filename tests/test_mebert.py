"""ME-BERT (kind ``mebert``): scores against a hand computation, m = 1 is the dense CLS dual encoder, save/load,
the ``mebert`` training task through the real trainer (in-batch negatives, ANCE refresh), and encode -> index ->
search through the CLIs equal to exhaustive max-over-m scoring; bad inputs give one ``error:`` line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TOY_PASSAGES, TOY_TOPICS, assert_refused, load_sections, run_main, toy_sections

from ance_ir.data import InputError, read_run, write_run
from ance_ir.encode.__main__ import main as encode
from ance_ir.index import load_dense_index
from ance_ir.modeling import DenseEncoder
from ance_ir.modeling.kinds import load_model, saved_kind
from ance_ir.modeling.mebert import MeBertEncoder, max_scores
from ance_ir.rerank.__main__ import main as rerank
from ance_ir.search.__main__ import main as search
from ance_ir.train import build_config, read_log, train
from ance_ir.train.layout import RunDir
from ance_ir.train.mebert import MeBertTask
from ance_ir.train.store import RefreshRecords

QUERIES = list(TOY_TOPICS.values())
PASSAGES = [*TOY_PASSAGES.values(), "cat"]  # "cat": [CLS] cat [SEP], fewer tokens than m = 4


@pytest.fixture(scope="module")
def mebert(toy_bert, tmp_path_factory) -> Path:
    """A saved ME-BERT (m = 4) over the tiny random BERT, with separate query and passage towers and an ANCE head
    (one shared random tower gives nearly one CLS state for every text, whose self-similarity wins every maximum):
    what encode takes."""
    torch.manual_seed(1)
    path = tmp_path_factory.mktemp("mebert") / "model"
    load_model(toy_bert, "mebert", head=True, shared=False).save_pretrained(path)
    return path


def test_scores_are_the_best_of_the_first_m_token_vectors(toy_bert):
    model = load_model(toy_bert, "mebert", m=4)
    assert isinstance(model, MeBertEncoder) and model.m == 4
    backbone = model.query_tower.backbone

    def states(text: str, max_length: int) -> torch.Tensor:  # one text alone: no padding
        tokens = model.tokenizer(text, truncation=True, max_length=max_length, return_tensors="pt")
        with torch.no_grad():
            return backbone(**tokens).last_hidden_state[0]

    queries = [states(q, 64)[0].tolist() for q in QUERIES]
    passages = []
    for text in PASSAGES:
        hidden = states(text, 256).tolist()
        passages.append([hidden[j] if j < len(hidden) else hidden[0] for j in range(4)])
    expected = np.empty((len(QUERIES), len(PASSAGES)))
    for i, q in enumerate(queries):
        for j, vectors in enumerate(passages):
            expected[i, j] = max(sum(a * b for a, b in zip(q, v, strict=True)) for v in vectors)

    query_vectors = model.encode_queries(QUERIES, batch_size=2)
    passage_vectors = model.encode_passages(PASSAGES, batch_size=3)  # padded batches of mixed lengths
    assert passage_vectors.shape == (len(PASSAGES), 4, 32)
    scores = model.score(torch.from_numpy(query_vectors), torch.from_numpy(passage_vectors)).numpy()
    assert np.allclose(scores, expected, atol=1e-4)


def test_m_1_is_the_dense_cls_dual_encoder(toy_bert):
    dense = DenseEncoder.from_pretrained(toy_bert, pooling="cls", head=True)
    torch.manual_seed(0)
    mebert = load_model(toy_bert, "mebert", m=1, head=True)
    mebert.load_state_dict(dense.state_dict())  # the same head
    dense_scores = dense.encode_queries(QUERIES) @ dense.encode_passages(PASSAGES).T
    queries, passages = mebert.encode_queries(QUERIES), mebert.encode_passages(PASSAGES)
    assert passages.shape == (len(PASSAGES), 1, 32)
    assert np.allclose(mebert.score(torch.from_numpy(queries), torch.from_numpy(passages)).numpy(), dense_scores,
                       atol=1e-5)


def test_save_load_round_trip_gives_identical_scores(mebert, tmp_path):
    model = load_model(mebert)
    assert isinstance(model, MeBertEncoder) and model.m == 4 and model.towers["passage"].head is not None
    assert saved_kind(mebert) == "mebert" and json.loads((mebert / "ance_ir_mebert.json").read_text()) == {"m": 4}
    model.save_pretrained(tmp_path / "again")
    again = load_model(tmp_path / "again")
    assert np.array_equal(model.encode_passages(PASSAGES), again.encode_passages(PASSAGES))
    assert np.array_equal(model.encode_queries(QUERIES), again.encode_queries(QUERIES))
    assert load_model(mebert, m=2).m == 2  # an override wins over the saved m
    with pytest.raises(ValueError, match="is a 'mebert' model, expected a 'dense' model"):
        load_model(mebert, "dense")
    with pytest.raises(ValueError, match="pooling must be cls"):
        load_model(mebert, pooling="mean")
    (tmp_path / "again" / "ance_ir_mebert.json").write_text('{"m": 0}')
    with pytest.raises(InputError, match="ance_ir_mebert.json: m \\(vectors per passage\\) must be a positive"):
        load_model(tmp_path / "again")


def test_the_task_scores_groups_max_over_m():
    torch.manual_seed(0)
    queries, passages = torch.randn(2, 5), torch.randn(2 * 3, 4, 5)  # 2 queries, groups of 3, m = 4
    mask = torch.zeros(2, 6, dtype=torch.bool)
    mask[0, 4] = True
    inbatch = MeBertTask.score_groups(queries, passages, 3, True, mask, None)
    own = MeBertTask.score_groups(queries, passages, 3, False, None, None)
    for i in range(2):
        for j in range(6):
            best = max(sum(queries[i, d] * passages[j, k, d] for d in range(5)) for k in range(4))
            assert inbatch.scores[i, j].item() == (-math.inf if (i, j) == (0, 4) else pytest.approx(best.item(),
                                                                                                    abs=1e-5))
            if j // 3 == i:
                assert own.scores[i, j % 3].item() == pytest.approx(best.item(), abs=1e-5)
    assert inbatch.targets.tolist() == [0, 3] and own.targets.tolist() == [0, 0]


def settings(toy: Path, toy_bert: Path, output: Path, **changes) -> dict:
    """An ME-BERT config on the toy collection: 3 queries a step, one sampled negative each, in-batch."""
    return toy_sections(toy, output, {"model": {"name": str(toy_bert), "m": 3},
                                      "task": {"name": "mebert", "batch_size": 3, "n_negatives": 1, "in_batch": True},
                                      "refresh": {"every": 0}, "optim": {"max_steps": 6}}, changes)


def test_a_few_training_steps_through_the_trainer(toy, toy_bert, tmp_path):
    config = load_sections(tmp_path / "m.yaml", settings(toy, toy_bert, tmp_path / "run"))
    assert (config.model.kind, config.model.options) == ("mebert", {"m": 3})
    train(config)
    run = RunDir(tmp_path / "run")
    losses = [r["loss"] for r in read_log(run.log) if "loss" in r]
    assert len(losses) == 6 and all(map(math.isfinite, losses))
    trained = load_model(run.root)
    assert isinstance(trained, MeBertEncoder) and trained.m == 3 and saved_kind(run.final) == "mebert"
    start = load_model(toy_bert, "mebert", m=3)
    assert not np.array_equal(trained.encode_passages(PASSAGES), start.encode_passages(PASSAGES))


def test_ance_refreshes_search_the_m_vector_index(toy, toy_bert, tmp_path):
    values = settings(toy, toy_bert, tmp_path / "run", negatives={"name": "ance", "depth": 4}, task={"in_batch": False},
                      refresh={"every": 2, "mode": "sync", "eval_topics": str(toy / "topics.tsv"),
                               "eval_qrels": str(toy / "qrels.txt"), "precision": "fp32"})
    train(load_sections(tmp_path / "m.yaml", values))
    records = RefreshRecords(RunDir(tmp_path / "run").refresh).read_all()
    assert [r["step"] for r in records] == [0, 2, 4, 6]
    assert all(r["queries_mined"] == 3 and 0 <= r["metrics"]["ndcg_cut_10"] <= 1 for r in records)


@pytest.mark.parametrize(("changes", "setting", "message"), [
    ({"model": {"pooling": "mean"}}, "model.pooling", "ME-BERT encodes a query as its CLS vector"),
    ({"model": {"kind": "dense"}}, "model.kind", "task 'mebert' trains 'mebert' models"),
])
def test_settings_mebert_cannot_train_with(toy, toy_bert, tmp_path, changes, setting, message):
    with pytest.raises(ValueError, match=rf"m\.yaml:\d+: {setting}: .*{message}"):
        load_sections(tmp_path / "m.yaml", settings(toy, toy_bert, tmp_path / "run", **changes))


def test_the_contrastive_task_sends_mebert_to_its_own_task(toy, toy_bert, tmp_path):
    with pytest.raises(ValueError, match=r"model.kind: 'mebert' models train with task: mebert"):
        load_sections(tmp_path / "m.yaml", settings(toy, toy_bert, tmp_path / "run", task={"name": "contrastive"},
                                                    model={"kind": "mebert"}))


def test_the_example_config_loads():
    config = build_config(Path(__file__).resolve().parent.parent / "configs/rag24-mini/mebert.yaml", {})
    assert (config.task.name, config.model.kind, config.model.name) == ("mebert", "mebert", "bert-tiny")
    assert config.model.options == {"m": 4} and config.model.pooling == "cls" and config.task.in_batch


def test_encode_index_search_equals_exhaustive_max_over_m(mebert, toy, tmp_path, capsys):
    index = tmp_path / "index"
    code, err = run_main(encode, "--corpus", str(toy / "corpus.jsonl"), "--encoder", str(mebert),
                         "--output", str(index), "--precision", "fp32", "--batch-size", "3", "--chunk-size", "5",
                         "--quiet", capsys=capsys)
    assert code == 0, err
    docids = list(TOY_PASSAGES)
    assert (index / "docid").read_text().split() == [d for d in docids for _ in range(4)]
    dense = load_dense_index(index)
    assert dense.meta["vectors_per_passage"] == 4 and dense.meta["kind"] == "mebert" and len(dense) == 32

    model = load_model(mebert)
    queries = model.encode_queries(list(TOY_TOPICS.values()))
    passages = model.encode_passages(list(TOY_PASSAGES.values()))
    assert np.allclose(dense.index.reconstruct_n(0, 32), passages.reshape(32, -1), atol=1e-5)
    exhaustive = max_scores(torch.from_numpy(queries), torch.from_numpy(passages)).numpy()
    best = np.einsum("qd,pmd->qpm", queries, passages).argmax(axis=-1)
    assert len(set(best.ravel().tolist())) > 1  # the best vector is not always the same one
    assert all(len({round(float(s), 3) for s in row}) == len(row) for row in exhaustive)  # no ties

    for hits in (3, 8, 1000):
        output = tmp_path / f"run{hits}.trec"
        code, err = run_main(search, "--topics", str(toy / "topics.tsv"), "--index", str(index),
                             "--output", str(output), "--hits", str(hits), "--device", "cpu", capsys=capsys)
        assert code == 0, err
        run = read_run(output)
        for i, qid in enumerate(TOY_TOPICS):
            order = np.argsort(-exhaustive[i], kind="stable")[:min(hits, 8)]
            assert [d for d, _ in run[qid]] == [docids[j] for j in order]
            assert np.allclose([s for _, s in run[qid]], exhaustive[i][order], atol=1e-4)


def test_bad_inputs_give_one_line(mebert, toy_bert, toy, tmp_path, capsys):
    corpus, index, output = str(toy / "corpus.jsonl"), tmp_path / "index", tmp_path / "run.trec"
    assert run_main(encode, "--corpus", corpus, "--encoder", str(mebert), "--output", str(index), "--quiet",
                    capsys=capsys)[0] == 0
    dense = tmp_path / "dense"
    DenseEncoder.from_pretrained(toy_bert).save_pretrained(dense)
    searching = ("--topics", str(toy / "topics.tsv"), "--output", str(output))
    assert_refused(run_main(search, *searching, "--index", str(index), "--encoder", str(dense), capsys=capsys),
                   "is a 'dense' model, expected a 'mebert' model", output)
    dense_index = tmp_path / "dense-index"
    assert run_main(encode, "--corpus", corpus, "--encoder", str(dense), "--output", str(dense_index), "--quiet",
                    capsys=capsys)[0] == 0
    assert_refused(run_main(search, *searching, "--index", str(dense_index), "--encoder", str(mebert), capsys=capsys),
                   "is a 'mebert' model, expected a 'dense' model", output)
    assert_refused(run_main(encode, "--corpus", corpus, "--encoder", str(mebert), "--output", str(tmp_path / "mean"),
                            "--pooling", "mean", capsys=capsys), "pooling must be cls", tmp_path / "mean")
    first_stage = tmp_path / "first.trec"
    write_run({qid: [(d, 1.0) for d in TOY_PASSAGES] for qid in TOY_TOPICS}, first_stage, tag="first")
    assert_refused(run_main(rerank, "--run", str(first_stage), "--topics", str(toy / "topics.tsv"), "--corpus", corpus,
                            "--model", str(mebert), "--output", str(output), capsys=capsys),
                   "is a 'mebert' model, which scores no (query, passage) pairs", output)
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in ("index", "meta.json"):
        (broken / name).write_bytes((index / name).read_bytes())
    (broken / "docid").write_text("".join(f"{d}\n" for d in list(TOY_PASSAGES) * 4))  # not m consecutive lines
    assert_refused(run_main(search, *searching, "--index", str(broken), capsys=capsys),
                   "must repeat each docid on 4 consecutive lines", output)


def test_shards_merge_into_the_unsharded_index(mebert, toy, tmp_path, capsys):
    corpus, whole = str(toy / "corpus.jsonl"), tmp_path / "whole"
    common = ("--encoder", str(mebert), "--precision", "fp32", "--quiet")
    assert run_main(encode, "--corpus", corpus, "--output", str(whole), *common, capsys=capsys)[0] == 0
    for i in range(2):
        code, err = run_main(encode, "--corpus", corpus, "--output", str(tmp_path / f"s{i}"), "--shard", f"{i}/2",
                             *common, capsys=capsys)
        assert code == 0, err
    code, err = run_main(encode, "merge", "--inputs", str(tmp_path / "s1"), str(tmp_path / "s0"), "--output",
                         str(tmp_path / "merged"), capsys=capsys)
    assert code == 0, err
    merged, expected = load_dense_index(tmp_path / "merged"), load_dense_index(whole)
    assert merged.docids == expected.docids and merged.vectors_per_passage == 4
    assert np.allclose(merged.index.reconstruct_n(0, 32), expected.index.reconstruct_n(0, 32), atol=1e-6)
