"""The cross-encoder (BERT_CAT): scores against a hand computation, save/load, public sequence-classification
checkpoints (and sentence-transformers' CrossEncoder on them), the ``cross-encoder`` training task (listwise and
pointwise, drawing the contrastive task's groups), and ``python -m ance_ir.rerank``."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from conftest import (
    TOY_PASSAGES,
    TOY_QRELS,
    TOY_TOPICS,
    assert_refused,
    load_sections,
    run_here,
    toy_sections,
    write_toy_collection,
)
from safetensors.torch import load_file

from ance_ir.data import (
    GroupPassage,
    InputError,
    TrainingGroup,
    min_max_scores,
    read_groups,
    read_run,
    write_groups,
    write_run,
)
from ance_ir.modeling import DenseEncoder
from ance_ir.modeling.cross_encoder import HEAD_NAME, CrossEncoder
from ance_ir.modeling.kinds import load_model, saved_kind
from ance_ir.train import build_config, read_log, train
from ance_ir.train.contrastive import ContrastiveTask
from ance_ir.train.cross_encoder import CrossEncoderTask
from ance_ir.train.dataset import TrainData
from ance_ir.train.distributed import Distributed
from ance_ir.train.layout import RunDir
from ance_ir.train.loss import GroupScores, build_loss
from ance_ir.train.runlog import RunLog
from ance_ir.train.task import TaskContext

QUERIES = ["cat on a mat", "how to bake bread", "stock market drop", "cat"]
PASSAGES = ["the cat sat on the mat", "bread flour water salt and yeast", "investors sold shares as markets dropped",
            "the history of the roman empire"]


@pytest.fixture(scope="module")
def trained_head(toy_bert, tmp_path_factory) -> Path:
    """A cross-encoder saved with its (random) head: what rerank accepts."""
    torch.manual_seed(5)
    path = tmp_path_factory.mktemp("cross-saved") / "model"
    load_model(toy_bert, "cross-encoder").save_pretrained(path)
    return path


def test_scores_are_the_cls_state_times_the_linear_head(toy_bert):
    from transformers import AutoTokenizer, BertModel

    torch.manual_seed(0)
    model = load_model(toy_bert, "cross-encoder")
    assert isinstance(model, CrossEncoder) and model.fresh_head and model.index is None
    scores = model.score_pairs(QUERIES, PASSAGES, batch_size=3, precision="fp32")  # two batches, padded

    tokenizer, backbone = AutoTokenizer.from_pretrained(toy_bert), BertModel.from_pretrained(toy_bert).eval()
    weight, bias = model.head.weight[0].detach(), model.head.bias.detach()
    for i, (query, passage) in enumerate(zip(QUERIES, PASSAGES, strict=True)):
        inputs = tokenizer(query, passage, return_tensors="pt")  # one pair alone: no padding
        assert inputs["input_ids"][0].tolist().count(tokenizer.unk_token_id) == 0
        assert inputs["token_type_ids"][0].tolist().count(1) > 0  # the passage is segment B
        with torch.no_grad():
            cls = backbone(**inputs).last_hidden_state[0, 0]
        assert scores[i] == pytest.approx(float(cls @ weight + bias), abs=1e-5)
    assert len(set(np.round(scores, 5))) == len(scores)


def test_pairs_are_cut_at_max_length(toy_bert):
    model = load_model(toy_bert, "cross-encoder", max_length=8)
    encoded = model.tokenize_pairs(["cat on a mat"], ["investors sold shares as markets dropped"])
    assert len(encoded["input_ids"][0]) == 8
    with pytest.raises(ValueError, match="max_length 65 exceeds the model's 64 positions"):
        load_model(toy_bert, "cross-encoder", max_length=65)


def test_save_load_round_trip_is_bit_identical(toy_bert, tmp_path):
    torch.manual_seed(1)
    model = load_model(toy_bert, "cross-encoder", max_length=40)
    model.save_pretrained(tmp_path / "a")
    assert saved_kind(tmp_path / "a") == "cross-encoder"
    loaded = load_model(tmp_path / "a")
    assert isinstance(loaded, CrossEncoder) and not loaded.fresh_head and loaded.max_length == 40
    mine, theirs = model.state_dict(), loaded.state_dict()
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)
    assert np.array_equal(model.score_pairs(QUERIES, PASSAGES), loaded.score_pairs(QUERIES, PASSAGES))
    loaded.save_pretrained(tmp_path / "b")
    files = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "b").iterdir())
    for name in files:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    with pytest.raises(ValueError, match="is a 'cross-encoder' model, expected a 'dense' model"):
        load_model(tmp_path / "a", "dense")
    with pytest.raises(ValueError, match="pooling: not a setting of a cross-encoder"):
        load_model(toy_bert, "cross-encoder", pooling="mean")


def test_a_sequence_classification_checkpoint_scores_with_its_own_head(toy_bert, tmp_path):
    from sentence_transformers import CrossEncoder as SentenceTransformersCrossEncoder
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    config = BertConfig.from_pretrained(toy_bert, num_labels=1)
    torch.manual_seed(2)
    public = BertForSequenceClassification(config).eval()
    public.save_pretrained(tmp_path / "public")
    AutoTokenizer.from_pretrained(toy_bert).save_pretrained(tmp_path / "public")
    model = load_model(tmp_path / "public", "cross-encoder")
    assert model.head is None and not model.fresh_head
    scores = model.score_pairs(QUERIES, PASSAGES, batch_size=3)
    tokenizer = AutoTokenizer.from_pretrained(toy_bert)
    with torch.no_grad():
        expected = [float(public(**tokenizer(q, p, return_tensors="pt")).logits[0, 0])
                    for q, p in zip(QUERIES, PASSAGES, strict=True)]
    assert np.allclose(scores, expected, atol=1e-5)
    theirs = SentenceTransformersCrossEncoder(str(tmp_path / "public"), device="cpu")
    predicted = theirs.predict(list(zip(QUERIES, PASSAGES, strict=True)), activation_fn=torch.nn.Identity())
    assert np.allclose(scores, predicted, atol=1e-5)

    model.save_pretrained(tmp_path / "again")  # saved as what it is: a sequence-classification model
    again = load_model(tmp_path / "again")
    assert again.head is None and np.array_equal(again.score_pairs(QUERIES, PASSAGES), model.score_pairs(QUERIES,
                                                                                                          PASSAGES))
    three = BertForSequenceClassification(BertConfig.from_pretrained(toy_bert, num_labels=3))
    three.save_pretrained(tmp_path / "three")
    AutoTokenizer.from_pretrained(toy_bert).save_pretrained(tmp_path / "three")
    with pytest.raises(ValueError, match="a sequence-classification model with 3 labels; a cross-encoder scores"):
        load_model(tmp_path / "three", "cross-encoder")


def test_bce_is_pointwise_binary_cross_entropy():
    scores = torch.tensor([[2.0, -1.0, 0.5], [0.0, 1.0, -3.0]])
    batch = GroupScores(scores, torch.zeros(2, dtype=torch.long), 3, False)
    loss = build_loss("bce", 0.5)(batch)

    def log_sigmoid(x: float) -> float:
        return -math.log1p(math.exp(-x))

    expected = -sum(log_sigmoid(2 * row[0]) + sum(log_sigmoid(-2 * s) for s in row[1:])
                    for row in scores.tolist()) / 6
    assert loss.item() == pytest.approx(expected, rel=1e-6)


@pytest.fixture()
def collection(tmp_path) -> Path:
    """Corpus, topics and qrels of the toy collection in one folder."""
    return write_toy_collection(tmp_path / "toy")


def settings(collection: Path, toy_bert: Path, output: Path, **changes) -> dict:
    """A sectioned cross-encoder config on the toy collection: 6 pairs, 3 groups of 1 + 3 passages a step."""
    return toy_sections(collection, output, {"model": {"name": str(toy_bert), "max_length": 32},
                                             "task": {"name": "cross-encoder", "batch_size": 3, "n_negatives": 3},
                                             "optim": {"max_steps": 200}}, changes)


@pytest.mark.parametrize("loss", ["nll", "bce"])
def test_the_task_trains_from_a_config_file(toy_bert, collection, tmp_path, loss):
    config = tmp_path / "cross.yaml"
    config.write_text(yaml.safe_dump(settings(collection, toy_bert, tmp_path / "run", loss={"name": loss})))
    trained = run_here("ance_ir.train", "--config", str(config))
    assert trained.returncode == 0, trained.stderr
    run = RunDir(tmp_path / "run")
    saved = json.loads(run.config.read_text())
    assert saved["model"]["kind"] == "cross-encoder" and saved["loss"]["name"] == loss
    losses = [r["loss"] for r in read_log(run.log) if "loss" in r]
    assert len(losses) == 200 and all(map(math.isfinite, losses))
    assert np.mean(losses[-20:]) < 0.3 * np.mean(losses[:20])  # it learns the toy positives
    assert saved_kind(run.final) == "cross-encoder"

    # the trained model ranks each query's positive above the other passages of the corpus
    model = load_model(run.root)
    assert isinstance(model, CrossEncoder) and not model.fresh_head
    for qid, query in TOY_TOPICS.items():
        docids = list(TOY_PASSAGES)
        scores = model.score_pairs([query] * len(docids), [TOY_PASSAGES[d] for d in docids])
        best = docids[int(np.argmax(scores))]
        assert TOY_QRELS[qid].get(best, 0) >= 1, (qid, best)


def test_a_stopped_run_resumes_exactly(toy_bert, collection, tmp_path):
    straight = settings(collection, toy_bert, tmp_path / "straight", optim={"max_steps": 12},
                        negatives={"name": "random"}, loss={"name": "bce"})
    train(load_sections(tmp_path / "straight.yaml", straight))
    paused = {**straight, "output": str(tmp_path / "paused"), "stop_at": 5}
    train(load_sections(tmp_path / "paused.yaml", paused))
    assert not RunDir(tmp_path / "paused").final.exists()
    train(load_sections(tmp_path / "paused.yaml", {**paused, "stop_at": None}))
    for name in ("model.safetensors", HEAD_NAME):
        mine = load_file(RunDir(tmp_path / "paused").final / name)
        theirs = load_file(RunDir(tmp_path / "straight").final / name)
        assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine), name
    card = (RunDir(tmp_path / "straight").final / "README.md").read_text()  # a cross-encoder indexes nothing
    assert "evaluate with `python -m ance_ir.rerank` and `python -m ance_ir.eval`" in card
    assert "ance_ir.encode" not in card and "--model " in card
    losses = [[(r["step"], r["loss"]) for r in read_log(RunDir(tmp_path / run).log) if "loss" in r]
              for run in ("paused", "straight")]
    assert losses[0] == losses[1] and len(losses[0]) == 12


def task_context(config, run: Path) -> TaskContext:
    data = TrainData.load(config)
    config.task.passage_buckets = config.task.passage_buckets or 4  # what the trainer resolves on a CPU
    return TaskContext(config, data, RunDir(run), Distributed.init("cpu"), torch.device("cpu"),
                       RunLog(run / "log.jsonl", enabled=False), lambda: False)


def test_groups_are_drawn_as_the_contrastive_task_draws_them(toy_bert, collection, tmp_path):
    cross = load_sections(tmp_path / "a.yaml", settings(collection, toy_bert, tmp_path / "a"))
    dense = load_sections(tmp_path / "b.yaml", settings(collection, toy_bert, tmp_path / "b",
                                                        task={"name": "contrastive"}, model={"max_length": None}))
    ours = CrossEncoderTask(task_context(cross, tmp_path / "a"), load_model(toy_bert, "cross-encoder"))
    theirs = ContrastiveTask(task_context(dense, tmp_path / "b"), DenseEncoder.from_pretrained(toy_bert))
    drawn = [ours.next_batch().groups for _ in range(5)]
    assert drawn == [theirs.next_batch().groups for _ in range(5)]
    assert len({g.negatives for batch in drawn for g in batch}) > 1
    ours.load_state_dict(theirs.state_dict())  # the same checkpointed state
    assert ours.next_batch().groups == theirs.next_batch().groups


def test_buckets_score_the_pairs_of_one_batch_in_group_order(toy_bert, collection, tmp_path):
    config = load_sections(tmp_path / "a.yaml", settings(collection, toy_bert, tmp_path / "a"))
    model = load_model(toy_bert, "cross-encoder")
    task = CrossEncoderTask(task_context(config, tmp_path / "a"), model)
    batch = task.next_batch()
    assert len(batch.inputs.batches) == 4 and batch.inputs.restore is not None
    with torch.no_grad():
        scores = task.module(batch.inputs.batches, batch.inputs.restore)
    pairs = [(TOY_TOPICS[g.qid], TOY_PASSAGES[d]) for g in batch.mine for d in g.docids]
    expected = model.score_pairs([q for q, _ in pairs], [p for _, p in pairs])
    assert np.allclose(scores.numpy(), expected, atol=1e-5)
    grouped = task.group_scores(scores, batch)
    assert grouped.scores.shape == (3, 4) and grouped.targets.tolist() == [0, 0, 0]


@pytest.mark.parametrize(("changes", "setting", "message"), [
    ({"task": {"in_batch": True}}, "task.in_batch", "a cross-encoder scores .query, passage. pairs"),
    ({"negatives": {"name": "dpr"}}, "negatives.name", "dpr adds in-batch negatives"),
    ({"negatives": {"name": "ance"}}, "negatives.name",
     "ance mines from an ANN index .* builds no index during training .use bm25, groups, candidates, static or random"),
    ({"refresh": {"eval_topics": "t.tsv"}}, "refresh.eval_topics",
     "builds no index during training; evaluate its final/ model with"),
    ({"model": {"pooling": "mean"}}, "model.pooling", "is a dual-encoder setting"),
    ({"model": {"kind": "dense", "max_length": None}}, "model.kind", "task 'cross-encoder' trains 'cross-encoder'"),
    ({"model": {"first_stage_weight": -1}}, "model.first_stage_weight", "must be a finite number >= 0, got -1"),
    ({"model": {"first_stage_depth": 0}}, "model.first_stage_depth", "must be a positive integer, got 0"),
    ({"task": {"first_stage": 5}}, "task.first_stage", "must be a TREC run file, got 5"),
    ({"task": {"first_stage": "run.trec"}, "model": {"first_stage_weight": 0}}, "model.first_stage_weight", "is 0"),
])
def test_settings_a_cross_encoder_cannot_train_with(toy_bert, collection, tmp_path, changes, setting, message):
    with pytest.raises(ValueError, match=rf"c\.yaml:\d+: {setting}: .*{message}"):  # the setting's line
        load_sections(tmp_path / "c.yaml", settings(collection, toy_bert, tmp_path / "run", **changes))


def test_the_example_config_loads():
    config = build_config(Path(__file__).resolve().parent.parent / "configs/rag24-mini/cross-encoder.yaml", {})
    assert (config.task.name, config.model.kind, config.loss.name) == ("cross-encoder", "cross-encoder", "nll")
    assert config.model.options == {"max_length": 320} and config.negatives.name == "bm25"
    assert not config.task.in_batch and config.refresh.eval_topics is None


def test_the_contrastive_task_refuses_a_cross_encoder(toy_bert, collection, tmp_path):
    with pytest.raises(ValueError, match=r"c\.yaml:\d+: model.kind: 'cross-encoder' models score pairs"):
        load_sections(tmp_path / "c.yaml", settings(collection, toy_bert, tmp_path / "run",
                                                    task={"name": "contrastive"}, model={"kind": "cross-encoder"}))


def test_a_saved_cross_encoder_as_model_name_is_refused_by_the_contrastive_task(toy_bert, collection, tmp_path):
    load_model(toy_bert, "cross-encoder").save_pretrained(tmp_path / "ce")
    with pytest.raises(ValueError, match=r"model.name: .*ce is a saved 'cross-encoder' model; task 'contrastive' "
                                         r"trains 'dense' models"):
        load_sections(tmp_path / "c.yaml", settings(collection, toy_bert, tmp_path / "run",
                                                    task={"name": "contrastive"},
                                                    model={"name": str(tmp_path / "ce"), "max_length": None}))


@pytest.fixture()
def first_stage(collection) -> Path:
    """A toy first-stage run: every passage for every query, in a fixed order."""
    order = ["d8", "d7", "d6", "d5", "d4", "d3", "d2", "d1"]
    run = {qid: [(d, 10.0 - i) for i, d in enumerate(order)] for qid in TOY_TOPICS}
    path = collection / "first.trec"
    write_run(run, path, tag="first")
    return path


def rerank_args(model: Path, collection: Path, run: Path, output: Path, *extra: str) -> list[str]:
    return ["ance_ir.rerank", "--run", str(run), "--topics", str(collection / "topics.tsv"), "--corpus",
            str(collection / "corpus.jsonl"), "--model", str(model), "--output", str(output), "--quiet", *extra]


def test_rerank_orders_the_top_depth_by_the_model(trained_head, collection, first_stage, tmp_path):
    output = tmp_path / "reranked.trec"
    done = run_here(*rerank_args(trained_head, collection, first_stage, output, "--depth", "5", "--hits", "7",
                                   "--batch-size", "4", "--precision", "fp32",
                                   "--qrels", str(collection / "qrels.txt")))
    assert done.returncode == 0, done.stderr
    assert "ndcg@10" in done.stdout
    reranked, before = read_run(output), read_run(first_stage)
    model = load_model(trained_head)
    for qid, query in TOY_TOPICS.items():
        top = [d for d, _ in before[qid][:5]]
        scores = model.score_pairs([query] * 5, [TOY_PASSAGES[d] for d in top])
        expected = [top[i] for i in np.argsort(-scores, kind="stable")]
        hits = reranked[qid]
        assert [d for d, _ in hits] == expected + ["d3", "d2"]  # below depth: first-stage order, cut at 7
        assert np.allclose([s for _, s in hits[:5]], np.sort(scores)[::-1], atol=1e-5)
        assert all(a > b for (_, a), (_, b) in zip(hits, hits[1:], strict=False))
    assert expected != top  # the model did reorder


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_passages_of_identical_text_tie_and_keep_the_first_stage_order(trained_head, precision):
    """Scored apart (batches of 2, int8's activation scale per batch), twins would differ by rounding."""
    from ance_ir.rerank import rerank

    passages = {"dA": TOY_PASSAGES["d1"], "dB": TOY_PASSAGES["d8"], "dC": TOY_PASSAGES["d8"], "dD": "bread"}
    first = {"q1": [("dA", 4.0), ("dB", 3.0), ("dD", 2.0), ("dC", 1.0)]}
    reranked = rerank(first, TOY_TOPICS, passages, load_model(trained_head), depth=4, batch_size=2,
                      precision=precision)["q1"]
    scores = dict(reranked)
    assert scores["dB"] == scores["dC"]
    assert [d for d, _ in reranked].index("dB") + 1 == [d for d, _ in reranked].index("dC")


def test_reading_the_passages_to_rerank_counts_the_corpus_past_the_delay(collection, first_stage, monkeypatch,
                                                                          capsys):
    from ance_ir.rerank.rerank import passages_for
    from ance_ir.rerank.teacher import group_passages

    corpus = collection / "corpus.jsonl"
    groups = [TrainingGroup("q1", TOY_TOPICS["q1"], (GroupPassage("d1"),), (GroupPassage("d7"),))]
    monkeypatch.setattr("ance_ir.data.resume.BAR_DELAY_S", 0)
    quiet = passages_for(read_run(first_stage), 3, corpus, first_stage), group_passages(groups, corpus, "g.jsonl")
    assert capsys.readouterr().err == ""
    shown = (passages_for(read_run(first_stage), 3, corpus, first_stage, show_progress=True),
             group_passages(groups, corpus, "g.jsonl", show_progress=True))
    assert shown == quiet and capsys.readouterr().err.count(f"read corpus: {len(TOY_PASSAGES)}passage [") == 2


def test_rerank_writes_cross_encoder_scores_into_training_groups(trained_head, collection, tmp_path):
    groups = [TrainingGroup("q1", TOY_TOPICS["q1"], (GroupPassage("d1", score=9.0),),
                            (GroupPassage("d7", score=3.0), GroupPassage("d8"))),
              TrainingGroup("q2", TOY_TOPICS["q2"], (GroupPassage("d3", text="own text", title="t"),),
                            (GroupPassage("d5"),))]
    source, output = tmp_path / "groups.jsonl", tmp_path / "scored.jsonl.gz"
    write_groups(source, groups)
    done = run_here("ance_ir.rerank", "--groups", str(source), "--corpus", str(collection / "corpus.jsonl"),
                      "--model", str(trained_head), "--output", str(output), "--quiet", "--precision", "fp32")
    assert done.returncode == 0, done.stderr
    scored = read_groups(output)
    model = load_model(trained_head)
    for before, after in zip(groups, scored, strict=True):
        passages = (*before.positives, *before.negatives)
        expected = model.score_pairs([before.query] * len(passages), [TOY_PASSAGES[p.docid] for p in passages])
        assert after == dataclasses.replace(before, positives=after.positives, negatives=after.negatives,
                                            scored_by=str(trained_head))
        assert [dataclasses.replace(p, score=None) for p in (*after.positives, *after.negatives)] == [
            dataclasses.replace(p, score=None) for p in passages]  # ids, titles, texts and order kept
        assert np.allclose([p.score for p in (*after.positives, *after.negatives)], expected, atol=1e-5)


def test_several_models_score_groups_with_the_mean_of_their_scores(toy_bert, trained_head, collection, first_stage,
                                                                   tmp_path):
    """A teacher ensemble: each passage's score is the mean of the models' scores; not for --run, nor of two kinds."""
    torch.manual_seed(6)
    other = tmp_path / "other"
    load_model(toy_bert, "cross-encoder").save_pretrained(other)  # another random head
    groups = [TrainingGroup("q1", TOY_TOPICS["q1"], (GroupPassage("d1"),), (GroupPassage("d7"), GroupPassage("d8"))),
              TrainingGroup("q2", TOY_TOPICS["q2"], (GroupPassage("d3"),), (GroupPassage("d5"),))]
    source = tmp_path / "groups.jsonl"
    write_groups(source, groups)
    corpus = str(collection / "corpus.jsonl")

    def scored(*models: Path) -> np.ndarray:
        output = tmp_path / f"scored.{len(models)}.{models[0].name}.jsonl"
        done = run_here("ance_ir.rerank", "--groups", str(source), "--corpus", corpus, "--model", *map(str, models),
                        "--output", str(output), "--quiet", "--precision", "fp32")
        assert done.returncode == 0, done.stderr
        return np.array([p.score for g in read_groups(output) for p in (*g.positives, *g.negatives)])

    first, second, mean = scored(trained_head), scored(other), scored(trained_head, other)
    assert not np.allclose(first, second, atol=1e-3)
    np.testing.assert_allclose(mean, (first + second) / 2, atol=1e-5)
    output = tmp_path / "run.trec"
    assert_refused(run_here(*rerank_args(trained_head, collection, first_stage, output, "--model", str(trained_head),
                                         str(other))), "--model: several models are a teacher ensemble for --groups",
                   output)
    colbert = tmp_path / "colbert"
    load_model(toy_bert, "colbert", dim=8).save_pretrained(colbert)
    output = tmp_path / "mixed.jsonl"
    assert_refused(run_here("ance_ir.rerank", "--groups", str(source), "--corpus", corpus, "--model", str(trained_head),
                            str(colbert), "--output", str(output)),
                   f"{colbert} is a 'colbert' model, {trained_head} a 'cross-encoder' one", output)


def test_a_group_passage_outside_the_corpus_is_scored_by_its_own_text(trained_head, collection, tmp_path):
    """As ``data.source: groups`` trains on it (pretraining pairs: new texts under new ids); none: refused."""
    source, output = tmp_path / "groups.jsonl", tmp_path / "scored.jsonl"
    write_groups(source, [TrainingGroup("q2", TOY_TOPICS["q2"], (GroupPassage("new-1", text="bread at home",
                                                                              title="Baking"),),
                                        (GroupPassage("d5"),))])
    done = run_here("ance_ir.rerank", "--groups", str(source), "--corpus", str(collection / "corpus.jsonl"),
                    "--model", str(trained_head), "--output", str(output), "--quiet", "--precision", "fp32")
    assert done.returncode == 0, done.stderr
    expected = load_model(trained_head).score_pairs([TOY_TOPICS["q2"]] * 2,
                                                    ["Baking bread at home", TOY_PASSAGES["d5"]])
    group = read_groups(output)[0]
    assert np.allclose([group.positives[0].score, group.negatives[0].score], expected, atol=1e-5)
    write_groups(source, [TrainingGroup("q2", TOY_TOPICS["q2"], (GroupPassage("new-1"),))])
    output.unlink()
    assert_refused(run_here("ance_ir.rerank", "--groups", str(source), "--corpus", str(collection / "corpus.jsonl"),
                            "--model", str(trained_head), "--output", str(output)),
                   "document 'new-1' of query 'q2' is not in the corpus", output)


def test_rerank_bad_inputs_give_one_line(toy_bert, trained_head, collection, first_stage, tmp_path):
    output = tmp_path / "out.trec"
    dense = tmp_path / "dense"
    DenseEncoder.from_pretrained(toy_bert).save_pretrained(dense)
    assert_refused(run_here(*rerank_args(dense, collection, first_stage, output)),
                   "is a 'dense' model, which scores no (query, passage) pairs", output)
    assert_refused(run_here(*rerank_args(trained_head, collection, first_stage, output, "--depth", "0")),
                   "--depth must be at least 1, got 0", output)
    assert_refused(run_here(*rerank_args(trained_head, collection, first_stage, output, "--first-stage-weight",
                                         "-1")), "expected a finite number >= 0, got '-1'", output)
    groups = tmp_path / "groups.jsonl"
    write_groups(groups, [TrainingGroup("q1", TOY_TOPICS["q1"], (GroupPassage("d1"),), (GroupPassage("d7"),))])
    assert_refused(run_here("ance_ir.rerank", "--groups", str(groups), "--corpus", str(collection / "corpus.jsonl"),
                            "--model", str(trained_head), "--output", str(output), "--first-stage-weight", "1"),
                   "--first-stage-weight is a setting of --run, not of --groups", output)
    assert_refused(run_here(*rerank_args(toy_bert, collection, first_stage, output)),
                   "has no trained cross-encoder head", output)
    stray = collection / "stray.trec"
    stray.write_text(first_stage.read_text() + "q9 Q0 d1 1 1.0 first\n")
    assert_refused(run_here(*rerank_args(trained_head, collection, stray, output)),
                   f"{stray}: query 'q9' is not in the topics", output)
    assert_refused(run_here("ance_ir.rerank", "--run", str(first_stage), "--corpus", str(collection / "corpus.jsonl"),
                              "--model", str(trained_head), "--output", str(output)), "--run needs --topics", output)
    missing = collection / "missing.trec"
    missing.write_text("q1 Q0 d99 1 1.0 first\n")
    assert_refused(run_here(*rerank_args(trained_head, collection, missing, output)),
                   "document 'd99' of query 'q1' is not in the corpus", output)


def test_min_max_scores_map_each_query_to_unit_range():
    run = {"q1": [("a", 5.0), ("b", 3.0), ("c", 1.0)], "q2": [("a", 2.0), ("b", 2.0)], "q3": []}
    assert min_max_scores(run) == {"q1": {"a": 1.0, "b": 0.5, "c": 0.0}, "q2": {"a": 1.0, "b": 1.0}}
    assert min_max_scores(run, depth=2) == {"q1": {"a": 1.0, "b": 0.0}, "q2": {"a": 1.0, "b": 1.0}}


def residual_settings(collection: Path, toy_bert: Path, output: Path, first_stage: Path | None,
                      weight: float | None, **model) -> dict:
    return settings(collection, toy_bert, output, optim={"max_steps": 4},
                    model={"first_stage_weight": weight, **model},
                    task={"first_stage": str(first_stage) if first_stage else None})


def test_a_residual_cross_encoder_adds_the_weighted_first_stage_in_training_and_rerank(
        toy_bert, collection, first_stage, tmp_path):
    config = load_sections(tmp_path / "r.yaml", residual_settings(collection, toy_bert, tmp_path / "run",
                                                                   first_stage, 2.5, first_stage_depth=5))
    model = load_model(toy_bert, "cross-encoder", first_stage_weight=2.5, first_stage_depth=5)
    task = CrossEncoderTask(task_context(config, tmp_path / "run"), model)
    batch = task.next_batch()
    with torch.no_grad():
        scores = task.module(batch.inputs.batches, batch.inputs.restore)
    grouped = task.group_scores(scores, batch)
    order = ["d8", "d7", "d6", "d5", "d4", "d3", "d2", "d1"]  # the fixture's scores 10, 9, ..., 3
    prior = {d: (4 - i) / 4 if i < 5 else 0.0 for i, d in enumerate(order)}  # min-max over the top 5, then 0
    expected = scores.view(3, 4) + 2.5 * torch.tensor([[prior[d] for d in g.docids] for g in batch.mine])
    assert torch.allclose(grouped.scores, expected, atol=1e-6)
    assert any(prior[d] == 0.0 for g in batch.mine for d in g.docids[1:])

    train(config)
    saved = load_model(RunDir(tmp_path / "run").final)
    assert (saved.first_stage_weight, saved.first_stage_depth) == (2.5, 5)
    card = (RunDir(tmp_path / "run").final / "README.md").read_text()
    assert f"Trained as a residual over the first stage `{first_stage}`" in card
    for flag, weight in (((), 2.5), (("--first-stage-weight", "0"), 0.0), (("--first-stage-weight", "1"), 1.0)):
        output = tmp_path / f"reranked.{weight}.trec"
        done = run_here(*rerank_args(tmp_path / "run", collection, first_stage, output, "--depth", "6",
                                       "--precision", "fp32", *flag))
        assert done.returncode == 0, done.stderr
        top = order[:6]  # reranked; the first stage normalised over the model's 5 as in training
        for qid, query in TOY_TOPICS.items():
            own = saved.score_pairs([query] * 6, [TOY_PASSAGES[d] for d in top])
            expected = own + weight * np.array([prior[d] for d in top])
            ranked = read_run(output)[qid][:6]
            assert [d for d, _ in ranked] == [top[i] for i in np.argsort(-expected, kind="stable")]
            assert np.allclose([s for _, s in ranked], np.sort(expected)[::-1], atol=1e-5)


def test_a_residual_cross_encoder_cannot_score_training_groups_alone(toy_bert, collection, tmp_path):
    residual = tmp_path / "residual"
    load_model(toy_bert, "cross-encoder", first_stage_weight=1.5).save_pretrained(residual)
    groups, output = tmp_path / "groups.jsonl", tmp_path / "scored.jsonl"
    write_groups(groups, [TrainingGroup("q1", TOY_TOPICS["q1"], (GroupPassage("d1"),), (GroupPassage("d7"),))])
    assert_refused(run_here("ance_ir.rerank", "--groups", str(groups), "--corpus", str(collection / "corpus.jsonl"),
                            "--model", str(residual), "--output", str(output)),
                   "is a residual over a first stage (first_stage_weight 1.5)", output)


@pytest.mark.parametrize(("weight", "with_run", "message"), [
    (2.0, False, "task.first_stage: is needed: the model's first_stage_weight is 2.0"),
    (None, True, "model.first_stage_weight: is 0, so task.first_stage would add nothing"),
])
def test_a_residual_needs_both_a_first_stage_and_its_weight(toy_bert, collection, first_stage, tmp_path, weight,
                                                            with_run, message):
    config = load_sections(tmp_path / "r.yaml", residual_settings(collection, toy_bert, tmp_path / "run",
                                                                   first_stage if with_run else None, weight))
    with pytest.raises(ValueError, match=message):
        train(config)


def test_a_first_stage_without_a_training_query_is_refused(toy_bert, collection, first_stage, tmp_path):
    partial = collection / "partial.trec"
    partial.write_text("".join(line + "\n" for line in first_stage.read_text().splitlines()
                               if not line.startswith("q1 ")))
    config = load_sections(tmp_path / "r.yaml", residual_settings(collection, toy_bert, tmp_path / "run", partial, 1.0))
    with pytest.raises(InputError, match=rf"{partial}: has no hits for the training query 'q1'"):
        train(config)
