"""DeepCT (model kind ``deepct``, ``task: deepct``): term recall targets by hand, word weights from the first word
piece, save/load, training, the rewritten passage, and its impact index searched through Pyserini."""

from __future__ import annotations

import collections
import json
import math

import pytest
import torch
from conftest import TOY_PASSAGES, TOY_QRELS, TOY_TOPICS, assert_refused, run_main
from test_train_run import toy_config, training_records

from ance_ir.bm25.__main__ import main as bm25_main
from ance_ir.encode.__main__ import main as encode_main
from ance_ir.index.rewrite import main as rewrite_main
from ance_ir.modeling.deepct import DeepCT, term_recall, words
from ance_ir.modeling.kinds import load_model, saved_kind
from ance_ir.search.__main__ import main as search_main
from ance_ir.train import train
from ance_ir.train.layout import RunDir


def test_term_recall_is_the_share_of_relevant_queries_containing_the_word():
    recall = term_recall("The cat sat on the mat; the CAT purred.", ["cat on a mat", "a cat", "dog"])
    assert recall == pytest.approx({"the": 0.0, "cat": 2 / 3, "sat": 0.0, "on": 1 / 3, "mat": 1 / 3, "purred": 0.0})
    assert words("Don't stop-me now") == ["don", "t", "stop", "me", "now"]


def constant_model(toy_bert, bias: float) -> DeepCT:
    """A DeepCT model whose head outputs ``bias`` for every word piece."""
    model = load_model(toy_bert, "deepct", max_length=32)
    with torch.no_grad():
        model.head.weight.zero_()
        model.head.bias.fill_(bias)
    return model


def test_word_weights_come_from_each_words_first_piece_and_are_cut_with_the_text(toy_bert):
    model = constant_model(toy_bert, 0.25)
    weights = model.encode_passages(["the cat sat on the mat", "bread"])
    assert weights == [dict.fromkeys(["the", "cat", "sat", "on", "mat"], 0.25), {"bread": 0.25}]
    model.max_length = 5  # [CLS] + 3 words + [SEP]: the rest are cut, weight 0, left out
    assert set(model.encode_passages(["the cat sat on the mat"])[0]) == {"the", "cat", "sat"}
    assert model.encode_queries(["Cat mat cat"]) == [{"cat": 1.0, "mat": 1.0}]
    assert constant_model(toy_bert, -1.0).encode_passages(["the cat"]) == [{}]  # negative weights: no impact


def test_save_and_load_give_the_same_weights(toy_bert, tmp_path):
    torch.manual_seed(0)
    model = load_model(toy_bert, "deepct", max_length=32)
    model.save_pretrained(tmp_path / "deepct")
    again = load_model(tmp_path / "deepct")
    assert saved_kind(tmp_path / "deepct") == "deepct" and isinstance(again, DeepCT) and again.max_length == 32
    texts = list(TOY_PASSAGES.values())
    assert again.encode_passages(texts) == model.encode_passages(texts)


def test_the_task_learns_term_recall_and_resumes_exactly(toy, tmp_path):
    settings = {"ance": False, "task.name": "deepct", "model": None, "max_steps": 40, "batch_size": 2, "lr": 3e-3,
                "pooling": None, "query_max_length": None, "passage_max_length": None}
    straight = tmp_path / "straight"
    train(toy_config(toy, straight, **{**settings, "model": str(toy / "bert-nodrop")}))
    losses = [r["loss"] for r in training_records(straight)]
    assert len(losses) == 40 and all(map(math.isfinite, losses))
    assert sum(losses[-5:]) < 0.5 * sum(losses[:5])
    trained = load_model(RunDir(straight).final)
    weights = trained.encode_passages([TOY_PASSAGES["d1"]])[0]
    relevant = [TOY_TOPICS[q] for q, judged in TOY_QRELS.items() if judged.get("d1", 0) >= 1]
    recall = term_recall(TOY_PASSAGES["d1"], relevant)
    best = max(recall, key=recall.get)
    assert weights.get(best, 0.0) > max((w for t, w in weights.items() if recall[t] == 0), default=0.0)

    paused = tmp_path / "paused"
    config = {**settings, "model": str(toy / "bert-nodrop"), "max_steps": 10}
    train(toy_config(toy, paused, stop_at=4, **config))
    train(toy_config(toy, paused, **config))
    train(toy_config(toy, tmp_path / "ten", **config))
    assert [r["loss"] for r in training_records(paused)] == [r["loss"] for r in training_records(tmp_path / "ten")]


def test_deepct_query_learns_the_term_recall_of_query_words_and_weights_queries(toy, tmp_path):
    # TR(t, q): the share of q's relevant passages (grade >= 1) containing t; q3 "stock market drop": d5, d6
    assert term_recall(TOY_TOPICS["q3"], [TOY_PASSAGES["d5"], TOY_PASSAGES["d6"]]) == {
        "stock": 0.5, "market": 0.5, "drop": 0.0}
    settings = {"ance": False, "task.name": "deepct", "task.target": "query", "model": str(toy / "bert-nodrop"),
                "max_steps": 60, "batch_size": 2, "lr": 3e-3, "pooling": None, "query_max_length": None,
                "passage_max_length": None}
    run = tmp_path / "run"
    train(toy_config(toy, run, **settings))
    losses = [r["loss"] for r in training_records(run)]
    assert sum(losses[-5:]) < 0.5 * sum(losses[:5])
    trained = load_model(RunDir(run).final)
    assert trained.target == "query"
    weights = trained.encode_queries([TOY_TOPICS["q1"]])[0]  # "cat on a mat": d1 has cat, on, mat; d2 none
    assert weights.get("cat", 0.0) > weights.get("a", 0.0) and set(weights) <= {"cat", "on", "a", "mat"}
    with pytest.raises(ValueError, match="a DeepCT-Query model .* weights query words, not passages"):
        trained.encode_passages([TOY_PASSAGES["d1"]])
    assert "--query-weights" in (RunDir(run).final / "README.md").read_text()  # the model card's usage
    more = tmp_path / "more"  # continuing from it without task.target: still DeepCT-Query
    del settings["task.target"]
    train(toy_config(toy, more, **{**settings, "model": str(RunDir(run).final), "max_steps": 2}))
    assert load_model(RunDir(more).final).target == "query"
    with pytest.raises(ValueError, match="task.target: must be one of passage, query"):
        toy_config(toy, tmp_path / "bad", **{**settings, "task.target": "document"})
    with pytest.raises(ValueError, match="task.target: 'query', but model.target is 'passage'"):
        toy_config(toy, tmp_path / "bad", **{**settings, "task.target": "query", "model.target": "passage"})


def test_bm25_with_query_weights_boosts_each_query_word(toy, toy_bert, tmp_path, capsys):
    from ance_ir.bm25 import BM25Searcher, build_lucene_index

    index = build_lucene_index(toy / "corpus.jsonl", tmp_path / "lucene")
    weigher = constant_model(toy_bert, 2.0)
    weigher.target = "query"
    weigher.save_pretrained(tmp_path / "query-weights")
    topics = {"q": "cat mat"}
    plain = BM25Searcher(index).search(topics)["q"]
    weighted = BM25Searcher(index, query_weights=tmp_path / "query-weights").search(topics)["q"]
    assert [d for d, _ in weighted] == [d for d, _ in plain] and plain
    assert [s for _, s in weighted] == pytest.approx([2.0 * s for _, s in plain], rel=1e-3)  # float32 scores
    constant_model(toy_bert, 1.0).save_pretrained(tmp_path / "passage-model")
    out = tmp_path / "run.trec"
    refused = run_main(bm25_main, "search", "--index", str(index), "--topics", str(toy / "topics.tsv"), "--output",
                       str(out), "--query-weights", str(tmp_path / "passage-model"), capsys=capsys)
    assert_refused(refused, "a DeepCT model of passage words (target: passage)", out)


def test_refuses_training_data_without_judged_pairs(toy, tmp_path):
    with pytest.raises(ValueError, match="data.source: DeepCT learns term recall"):
        toy_config(toy, tmp_path / "run", False, **{"task.name": "deepct", "data_source": "simcse", "pooling": None,
                                                    "query_max_length": None, "passage_max_length": None})


def test_an_impact_index_of_deepct_weights_is_searched_through_pyserini(toy, toy_bert, tmp_path, capsys):
    model = constant_model(toy_bert, 0.05)
    model.save_pretrained(tmp_path / "deepct")
    index = tmp_path / "index"
    code, err = run_main(encode_main, "--corpus", str(toy / "corpus.jsonl"), "--encoder", str(tmp_path / "deepct"),
                         "--output", str(index), "--quiet", capsys=capsys)
    assert code == 0, err
    meta = json.loads((index / "meta.json").read_text())
    assert meta["scale"] == 100
    out = tmp_path / "run.trec"
    code, err = run_main(search_main, "--index", str(index), "--topics", str(toy / "topics.tsv"), "--output",
                         str(out), "--hits", "3", capsys=capsys)
    assert code == 0, err
    lines = [line.split() for line in out.read_text().splitlines()]
    # every word has impact 5 (= round(100 * 0.05)): a passage scores 5 per distinct query word it holds
    query_words = set(words(TOY_TOPICS["q1"]))
    expected = {d: 5 * len(query_words & set(words(t))) for d, t in TOY_PASSAGES.items()}
    assert sum(line[0] == "q1" for line in lines) == 3
    for qid, _, docid, _, score, _ in lines:
        if qid == "q1":
            assert float(score) == pytest.approx(100 * expected[docid])


@pytest.mark.parametrize(("aggregation", "cat"), [("max", 0.25), ("sum", 0.5), ("decay", 0.25 + 0.25 / 3)])
def test_hdct_scores_windows_of_a_long_text_and_aggregates_them(toy_bert, aggregation, cat):
    model = constant_model(toy_bert, 0.25)
    model.max_length, model.windows, model.aggregation = 6, 3, aggregation  # 4 word pieces a window
    text = "the cat sat on the mat dogs chase cat in the park bread flour water salt"
    assert model.split_windows(words(text)) == [["the", "cat", "sat", "on"], ["the", "mat", "dogs", "chase"],
                                                ["cat", "in", "the", "park"]]
    weights = model.encode_passages([text])[0]
    assert weights["cat"] == pytest.approx(cat) and weights["park"] == pytest.approx(0.25 / (3 if aggregation ==
                                                                                            "decay" else 1))
    assert "bread" not in weights  # past the third window


def test_the_impact_index_rewritten_for_bm25_repeats_each_word_by_its_impact(toy, toy_bert, tmp_path, capsys,
                                                                              monkeypatch):
    model = constant_model(toy_bert, 0.03)
    model.save_pretrained(tmp_path / "deepct")
    index = tmp_path / "index"
    code, err = run_main(encode_main, "--corpus", str(toy / "corpus.jsonl"), "--encoder", str(tmp_path / "deepct"),
                         "--output", str(index), "--quiet", capsys=capsys)
    assert code == 0, err
    corpus = tmp_path / "rewritten.jsonl"
    code, err = run_main(rewrite_main, "--index", str(index), "--output", str(corpus), capsys=capsys)
    assert code == 0 and "rewrite:" not in err, err  # quicker than BAR_DELAY_S: no bar
    monkeypatch.setattr("ance_ir.data.resume.BAR_DELAY_S", 0)
    code, err = run_main(rewrite_main, "--index", str(index), "--output", str(tmp_path / "again.jsonl"),
                         capsys=capsys)
    assert code == 0 and f"rewrite: {len(TOY_PASSAGES)}passage [" in err, err
    assert (tmp_path / "again.jsonl").read_bytes() == corpus.read_bytes()
    code, err = run_main(rewrite_main, "--index", str(index), "--output", str(tmp_path / "quiet.jsonl"), "--quiet",
                         capsys=capsys)
    assert code == 0 and "rewrite:" not in err, err
    rewritten = {d["id"]: d["contents"] for d in map(json.loads, corpus.read_text().splitlines())}
    assert list(rewritten) == list(TOY_PASSAGES)
    weights = model.encode_passages(list(TOY_PASSAGES.values()))
    for docid, weight in zip(TOY_PASSAGES, weights, strict=True):  # each word's impact: round(100 * 0.03) = 3
        assert weight and collections.Counter(rewritten[docid].split()) == dict.fromkeys(weight, 3)
    lucene = tmp_path / "lucene"
    code, err = run_main(bm25_main, "index", "--corpus", str(corpus), "--output", str(lucene), capsys=capsys)
    assert code == 0, err


def test_rewriting_a_folder_that_is_not_an_impact_index_is_one_error_line(tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    (tmp_path / "folder").mkdir()
    assert_refused(run_main(rewrite_main, "--index", str(tmp_path / "folder"), "--output", str(out), capsys=capsys),
                   "not an impact index", out)
