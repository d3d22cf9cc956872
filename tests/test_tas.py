"""TAS and TAS-B (``task: tas``, ``task: tas-b``): batches from at most ``clusters_per_batch`` k-means clusters,
TAS-B's pairs spread evenly over the margin bins, exact resume, and the refusals."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from test_train_run import assert_same_training, events, toy_config

from ance_ir.data import GroupPassage, InputError, TrainingGroup, write_groups
from ance_ir.train import train
from ance_ir.train.dataset import TrainData
from ance_ir.train.tas import TopicDraws, cluster_queries, margin_bins


def test_kmeans_recovers_separated_topics():
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(4, 8)) * 10
    qids = [f"q{i}" for i in range(40)]
    vectors = np.stack([centres[i % 4] + rng.normal(size=8) * 0.1 for i in range(40)])
    clusters = cluster_queries(vectors, qids, 4, seed=1)
    assert sorted(sorted(int(q[1:]) % 4 for q in c) for c in clusters) == [[t] * 10 for t in range(4)]


def test_margin_bins_cut_the_range_of_each_querys_margins():
    teacher = {"p": 10.0, "n0": 10.0, "n1": 9.5, "n5": 5.0, "n9": 0.5, "n10": 0.0, "x": 1.0}
    bins = margin_bins(["p", "unscored"], ["n0", "n1", "n5", "n9", "n10", "unscored"], teacher, 10)
    # margins 0, 0.5, 5, 9.5, 10 over [0, 10]: bins 0, 0, 5, 9, 9 (the top edge belongs to the last bin)
    assert bins == [[("p", "n0"), ("p", "n1")], [("p", "n5")], [("p", "n9"), ("p", "n10")]]
    assert margin_bins(["p"], ["n0"], teacher, 10) == [[("p", "n0")]]
    assert margin_bins(["p"], ["unscored"], teacher, 10) == []


def synthetic(queries: int, negatives: int) -> TrainData:
    qids = [f"q{i}" for i in range(queries)]
    return TrainData(Path("corpus"), [], {}, {q: q for q in qids}, {q: frozenset({f"{q}-pos"}) for q in qids},
                     [(q, f"{q}-pos") for q in qids])


def skewed_bins(qid: str) -> list[list[tuple[str, str]]]:
    """Margins 0..9: 91 pairs at margin 0, one at each of 1..9 (a draw uniform over pairs lands in bin 0 91%)."""
    teacher = {f"{qid}-pos": 10.0, **{f"{qid}-n{i}": 10.0 for i in range(91)},
               **{f"{qid}-m{k}": 10.0 - k for k in range(1, 10)}}
    negatives = [d for d in teacher if d != f"{qid}-pos"]
    return margin_bins([f"{qid}-pos"], negatives, teacher, 10)


def test_tas_b_batches_come_from_few_clusters_and_spread_over_the_margin_bins():
    data = synthetic(24, 100)
    clusters = [[f"q{i}" for i in range(c, 24, 6)] for c in range(6)]  # 6 topics of 4 queries
    cluster_of = {q: c for c, members in enumerate(clusters) for q in members}
    bins = {q: skewed_bins(q) for q in data.queries}
    assert all(len(b) == 10 for b in bins.values())
    draws = TopicDraws(data, None, seed=3, n_negatives=1, clusters_per_batch=2, bins=bins,
                       make_clusters=lambda: clusters)
    margins: Counter[int] = Counter()
    for _ in range(500):
        batch = draws.draw(8)
        assert len(batch) == 8 and len({cluster_of[g.qid] for g in batch}) <= 2
        assert all(len(g.negatives) == 1 for g in batch)
        for g in batch:
            negative = g.negatives[0]
            margins[int(negative.rsplit("-m", 1)[1]) if "-m" in negative else 0] += 1
    assert set(margins) == set(range(10))
    expected = 4000 / 10
    chi2 = sum((margins[b] - expected) ** 2 / expected for b in range(10))
    assert chi2 < 27.9  # chi-square, 9 degrees of freedom, p = 0.001; uniform over pairs would give ~29,000
    assert draws.epochs_done == pytest.approx(4000 / 24)


def test_topic_draws_resume_the_same_batches():
    data = synthetic(12, 5)
    clusters = [[f"q{i}" for i in range(c, 12, 3)] for c in range(3)]
    bins = {q: [[(f"{q}-pos", f"{q}-n{i}")] for i in range(3)] for q in data.queries}

    def draws():
        return TopicDraws(data, None, 5, 1, 1, bins, lambda: [list(c) for c in clusters])

    straight = draws()
    expected = [straight.draw(4) for _ in range(6)]
    first = draws()
    got = [first.draw(4) for _ in range(3)]
    state = first.state_dict()
    second = draws()
    second.make_clusters = lambda: pytest.fail("a resumed run clusters again")
    second.load_state_dict(state)
    got += [second.draw(4) for _ in range(3)]
    assert got == expected
    assert random.Random(5).getstate() != state["topic_rng"]


def write_scored_groups(path: Path) -> None:
    queries = {"q1": "cat on a mat", "q2": "how to bake bread", "q3": "stock market drop"}
    positives = {"q1": "d1", "q2": "d3", "q3": "d5"}
    teacher = {"d7": -2.0, "d8": 1.0, "d2": 0.5, "d4": -1.0}
    write_groups(path, [TrainingGroup(q, queries[q], (GroupPassage(positives[q], score=3.0),),
                                      tuple(GroupPassage(d, score=s) for d, s in teacher.items()))
                        for q in queries])


def tas_settings(groups: Path, **task) -> dict:
    return {"negatives": "groups", "data_source": "groups", "groups": str(groups), "train_topics": None,
            "loss": "margin-mse", "n_negatives": 1, "refresh_every": 2, "eval_topics": None, "eval_qrels": None,
            "max_steps": 6, "task.name": "tas-b", "task.clusters": 2, "task.clusters_per_batch": 1,
            **{f"task.{key}": value for key, value in task.items()}}


def test_tas_b_trains_and_resumes_bit_identically(toy, tmp_path):
    groups = tmp_path / "groups.jsonl"
    write_scored_groups(groups)
    settings = tas_settings(groups)
    train(toy_config(toy, tmp_path / "straight", **settings))
    clustered = events(tmp_path / "straight", "tas-clusters")
    assert len(clustered) == 1 and clustered[0]["queries"] == 3 and clustered[0]["clusters"] == 2
    output = tmp_path / "resumed"
    train(toy_config(toy, output, stop_at=3, **settings))
    train(toy_config(toy, output, **settings))
    assert events(output, "resume")[0]["step"] == 3
    assert len(events(output, "tas-clusters")) == 1
    assert_same_training(output, tmp_path / "straight")
    train(toy_config(toy, tmp_path / "tas", **{**settings, "task.name": "tas", "loss": "nll"}))


@pytest.mark.parametrize(("settings", "message"), [
    ({"data_source": "qrels", "train_topics": "t.tsv", "negatives": "random", "groups": None},
     "needs data.source: groups"),
    ({"n_negatives": 2}, "one .positive, negative. pair per query"),
    ({"task.clusters_per_batch": 0}, "task.clusters_per_batch: must be a positive integer"),
    ({"task.bins": 0}, "task.bins: must be a positive integer"),
    ({"negatives": "random"}, "negatives.name: tas-b draws its pairs from the groups' scored negatives"),
    ({"negatives.denoise_above": 0.5, "negatives.denoised_share": 0.5}, "negatives.denoised_share: tas-b's margin"),
])
def test_tas_b_refuses_what_it_cannot_train_with(toy, tmp_path, settings, message):
    groups = tmp_path / "groups.jsonl"
    write_scored_groups(groups)
    with pytest.raises(ValueError, match=message):
        toy_config(toy, tmp_path / "run", **{**tas_settings(groups), "loss": "nll", **settings})


def test_the_tas_b_task_draws_each_batch_from_one_of_its_clusters(toy, tmp_path):
    from test_cross_encoder import task_context

    from ance_ir.modeling import DenseEncoder
    from ance_ir.train.tas import TASBTask

    groups = tmp_path / "groups.jsonl"
    write_scored_groups(groups)
    config = toy_config(toy, tmp_path / "run", **{**tas_settings(groups), "batch_size": 4})
    task = TASBTask(task_context(config, tmp_path / "run"), DenseEncoder.from_pretrained(toy / "bert"))
    batches = [task.next_batch().groups for _ in range(20)]
    clusters = task.draws.clusters
    assert len(clusters) == 2 and sorted(q for c in clusters for q in c) == ["q1", "q2", "q3"]
    for batch in batches:
        assert len(batch) == 4 and any({g.qid for g in batch} <= set(c) for c in clusters)
        assert all(g.docids[0] in {"d1", "d3", "d5"} and len(g.negatives) == 1 for g in batch)
    elsewhere = toy_config(toy, tmp_path / "other",
                           **{**tas_settings(groups, encoder="./no-such-run"), "batch_size": 4})
    with pytest.raises(InputError, match=r"^\./no-such-run: task.encoder: no such run or model folder"):
        TASBTask(task_context(elsewhere, tmp_path / "other"), DenseEncoder.from_pretrained(toy / "bert")).next_batch()
