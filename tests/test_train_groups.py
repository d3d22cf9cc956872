"""Training from JSONL groups (``data.source: groups``): the groups ``python -m ance_ir.negatives`` mines from BM25
train exactly like ``negatives: bm25`` inside training (in one file or several), and teacher scores in groups reach
the loss."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import run_here
from test_train_run import assert_same_training, events, toy_config, training_records

from ance_ir.bm25 import build_lucene_index
from ance_ir.data import GroupPassage, TrainingGroup, read_groups, write_groups
from ance_ir.train import train
from ance_ir.train.loss import LOSSES, NLLLoss, register_loss


@pytest.fixture(scope="module")
def lucene(toy, tmp_path_factory):
    index = tmp_path_factory.mktemp("lucene") / "index"
    build_lucene_index(toy / "corpus.jsonl", index)
    return index


def bm25_settings(toy, lucene) -> dict:
    return {"negatives": "bm25", "bm25_index": str(lucene), "negative_depth": 5, "refresh_every": 0,
            "eval_topics": None, "eval_qrels": None, "max_steps": 6}


def test_mined_groups_train_like_bm25_negatives(toy, lucene, tmp_path):
    groups = tmp_path / "groups.jsonl"
    mined = run_here("ance_ir.negatives", "--topics", str(toy / "topics.tsv"), "--qrels", str(toy / "qrels.txt"),
                     "--corpus", str(toy / "corpus.jsonl"), "--source", "bm25", "--index", str(lucene), "--hits", "5",
                     "--depth", "5", "--min-positive-grade", "1", "--output", str(groups))
    assert mined.returncode == 0, mined.stderr
    settings = bm25_settings(toy, lucene)
    train(toy_config(toy, tmp_path / "bm25", **settings))
    train(toy_config(toy, tmp_path / "groups", **{**settings, "negatives": "groups", "data_source": "groups",
                                                  "groups": str(groups), "train_topics": None, "bm25_index": None}))
    assert_same_training(tmp_path / "groups", tmp_path / "bm25")
    mined_groups = read_groups(groups)  # the same groups in two files train the same
    # the second file inside the run folder, where an earlier attempt's leftovers are removed: a named file is kept
    halves = tmp_path / "first.jsonl", tmp_path / "halves" / "negatives" / "second.jsonl.gz"
    write_groups(halves[0], mined_groups[:1])
    write_groups(halves[1], mined_groups[1:])
    (tmp_path / "halves" / "log.jsonl").write_text('{"step": 7, "loss": 9.0}\n')
    train(toy_config(toy, tmp_path / "halves", **{**settings, "negatives": "groups", "data_source": "groups",
                                                  "groups": [str(h) for h in halves], "train_topics": None,
                                                  "bm25_index": None}))
    assert halves[1].is_file()
    assert_same_training(tmp_path / "halves", tmp_path / "bm25")


def test_teacher_scores_of_groups_reach_the_loss(toy, lucene, tmp_path):
    scores = {("q1", "d1"): 9.0, ("q1", "d7"): 1.5, ("q2", "d3"): 8.0, ("q3", "d5"): 7.0, ("q3", "d6"): 6.5}
    queries = {"q1": "cat on a mat", "q2": "how to bake bread", "q3": "stock market drop"}
    positives = {"q1": ["d1"], "q2": ["d3"], "q3": ["d5", "d6"]}
    negatives = {"q1": ["d7", "d8"], "q2": ["d7", "d8"], "q3": ["d7", "d8"]}
    groups = tmp_path / "groups.jsonl"
    write_groups(groups, [TrainingGroup(q, queries[q],
                                        tuple(GroupPassage(d, score=scores.get((q, d))) for d in positives[q]),
                                        tuple(GroupPassage(d, score=scores.get((q, d))) for d in negatives[q]))
                          for q in queries])
    seen: list[torch.Tensor] = []

    @register_loss
    class Recording(NLLLoss):
        name = "test-recording"

        def __call__(self, batch):
            seen.append(batch.teacher.clone())
            return super().__call__(batch)

    try:
        train(toy_config(toy, tmp_path / "run", negatives="groups", data_source="groups", groups=str(groups),
                         train_topics=None, loss="test-recording", n_negatives=2, refresh_every=0, eval_topics=None,
                         eval_qrels=None, max_steps=3))
    finally:
        del LOSSES["test-recording"]
    assert len(seen) == 3 and all(t.shape == (2, 3) for t in seen)
    values = {v for t in seen for v in t.flatten().tolist() if not math.isnan(v)}
    assert values and values <= set(scores.values())
    assert any(math.isnan(v) for t in seen for v in t.flatten().tolist())  # unscored passages are NaN


def test_margin_mse_distils_scored_groups_and_refuses_unscored_data(toy, lucene, tmp_path):
    groups, unscored = tmp_path / "groups.jsonl", tmp_path / "unscored.jsonl"
    queries = {"q1": "cat on a mat", "q2": "how to bake bread", "q3": "stock market drop"}
    positives = {"q1": "d1", "q2": "d3", "q3": "d5"}
    teacher = {"d7": -2.0, "d8": 1.0}

    def group(qid: str, scored: bool) -> TrainingGroup:
        return TrainingGroup(qid, queries[qid], (GroupPassage(positives[qid], score=3.0 if scored else None),),
                             tuple(GroupPassage(d, score=s if scored else None) for d, s in teacher.items()))

    write_groups(groups, [group(q, True) for q in queries])
    write_groups(unscored, [group(q, False) for q in queries])
    settings = {"negatives": "groups", "data_source": "groups", "train_topics": None, "loss": "margin-mse",
                "n_negatives": 2, "refresh_every": 0, "eval_topics": None, "eval_qrels": None, "max_steps": 30}
    train(toy_config(toy, tmp_path / "run", groups=str(groups), **settings))
    losses = [r["loss"] for r in training_records(tmp_path / "run")]
    assert sum(losses[-5:]) < sum(losses[:5])
    with pytest.raises(ValueError, match="no passage has a score"):
        train(toy_config(toy, tmp_path / "unscored", groups=str(unscored), **settings))
    # RocketQA's denoising leaves out d8 (teacher 1.0 > 0.0) of each query's two negatives; the log records it
    denoised = {**settings, "max_steps": 2, "negatives.denoise_above": 0.0}
    train(toy_config(toy, tmp_path / "denoised", groups=str(groups), stop_at=1, **denoised))
    train(toy_config(toy, tmp_path / "denoised", groups=str(groups), **denoised))  # resumed: logged once
    assert [{k: v for k, v in e.items() if k != "time"} for e in events(tmp_path / "denoised", "negatives")] == [
        {"step": 0, "event": "negatives", "name": "groups", "denoise_above": 0.0, "left_out": 3, "of": 6,
         "denoised_share": None}]
    with pytest.raises(ValueError, match="does not bring"):
        toy_config(toy, tmp_path / "qrels", loss="kl", refresh_every=0, eval_topics=None, eval_qrels=None)


def test_distilling_bm25_scored_groups_is_noted(toy, lucene, tmp_path, capsys):
    """Groups straight from ``negatives --source bm25`` carry BM25's scores: a distillation loss trains on them,
    with a note that a cross-encoder's come from ``rerank --groups``; the groups of a teacher get no note."""
    groups = tmp_path / "groups.jsonl"
    mined = run_here("ance_ir.negatives", "--topics", str(toy / "topics.tsv"), "--qrels", str(toy / "qrels.txt"),
                     "--corpus", str(toy / "corpus.jsonl"), "--source", "bm25", "--index", str(lucene), "--hits", "5",
                     "--depth", "5", "--min-positive-grade", "1", "--output", str(groups))
    assert mined.returncode == 0, mined.stderr
    settings = {"negatives": "groups", "data_source": "groups", "train_topics": None, "loss": "margin-mse",
                "n_negatives": 2, "refresh_every": 0, "eval_topics": None, "eval_qrels": None, "max_steps": 1}
    capsys.readouterr()
    train(toy_config(toy, tmp_path / "bm25", groups=str(groups), **settings))
    assert "the scores of 3 groups are BM25's (python -m ance_ir.negatives --source bm25)" in capsys.readouterr().err
    taught = tmp_path / "taught.jsonl"
    write_groups(taught, [TrainingGroup(g.query_id, g.query, g.positives, g.negatives, "train-runs/ce")
                          for g in read_groups(groups)])
    train(toy_config(toy, tmp_path / "taught", groups=str(taught), **settings))
    assert "are BM25's" not in capsys.readouterr().err


def test_queries_with_fewer_negatives_than_n_negatives_are_noted(toy, lucene, tmp_path, capsys):
    """Groups of at most one negative (BM25's top 5 less the judged passages), six or one drawn a step: the rest come
    from the whole corpus, and training says for how many queries."""
    groups = tmp_path / "groups.jsonl"
    mined = run_here("ance_ir.negatives", "--topics", str(toy / "topics.tsv"), "--qrels", str(toy / "qrels.txt"),
                     "--corpus", str(toy / "corpus.jsonl"), "--source", "bm25", "--index", str(lucene), "--hits", "5",
                     "--depth", "5", "--min-positive-grade", "1", "--output", str(groups))
    assert mined.returncode == 0, mined.stderr
    settings = {"negatives": "groups", "data_source": "groups", "train_topics": None, "refresh_every": 0,
                "eval_topics": None, "eval_qrels": None, "max_steps": 1, "groups": str(groups)}
    capsys.readouterr()
    train(toy_config(toy, tmp_path / "six", n_negatives=6, **settings))
    assert ("note: 3 of 3 training queries have fewer than task.n_negatives (6) groups negatives to draw from; the "
            "rest of theirs are drawn at random from the corpus") in capsys.readouterr().err
    train(toy_config(toy, tmp_path / "one", n_negatives=1, **settings))  # BM25's top 5 of q1 and q3 are all judged
    assert "note: 2 of 3 training queries have fewer than task.n_negatives (1)" in capsys.readouterr().err
