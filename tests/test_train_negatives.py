"""Negative strategies: positives never sampled, seeded and reproducible, candidate depth, static files, registry."""

from __future__ import annotations

import os
import random

import pytest

from ance_ir.bm25 import bm25_negatives
from ance_ir.data import InputError
from ance_ir.train.arguments import build_config
from ance_ir.train.dataset import PairStream, TrainData
from ance_ir.train.distributed import Distributed
from ance_ir.train.layout import RunDir
from ance_ir.train.negatives import (
    NEGATIVE_STRATEGIES,
    AnceNegatives,
    CandidateNegatives,
    NegativeSampler,
    build_sampler,
    read_negatives_file,
    register_negatives,
)

DOCIDS = [f"d{i}" for i in range(1, 9)]


def _config(toy_collection, tmp_path, **settings):
    values = {"output": str(tmp_path / "run"), "corpus": str(toy_collection["corpus"]),
              "train_topics": str(toy_collection["topics"]), "train_qrels": str(toy_collection["qrels"]), **settings}
    return build_config(None, values)


def _sampler(toy_collection, tmp_path, **settings):
    config = _config(toy_collection, tmp_path, **settings)
    data = TrainData.load(config)
    return build_sampler(config, data, RunDir(tmp_path / "run"), Distributed.init("cpu")), data


def _draws(sampler, exclude, n, seed, times=30, qid="q1"):
    rng = random.Random(seed)
    return [sampler.sample(qid, exclude, n, rng) for _ in range(times)]


def test_training_pairs_and_exclusions(toy_collection, tmp_path):
    data = TrainData.load(_config(toy_collection, tmp_path, min_positive_grade=2, negative_exclude_grade=1))
    assert data.pairs == [("q1", "d1"), ("q2", "d3"), ("q3", "d5"), ("q3", "d6")]
    assert data.exclude["q1"] == {"d1", "d2"}  # d2 (grade 1) is no positive, but never a negative either
    assert data.docids == DOCIDS and data.texts["d3"].startswith("a recipe")


def test_pair_stream_is_seeded_and_resumable():
    stream = PairStream(5, seed=7)
    first = stream.take(3)
    state = stream.state_dict()
    rest = stream.take(9)
    assert sorted(first + rest[:2]) == list(range(5))  # an epoch is a permutation
    assert stream.epoch == 2 and stream.epochs_done == pytest.approx(2.4)
    again = PairStream(5, seed=7)
    again.load_state_dict(state)
    assert again.take(9) == rest
    assert PairStream(5, seed=8).take(5) != PairStream(5, seed=7).take(5)
    with pytest.raises(ValueError, match="seed 7"):
        PairStream(5, seed=9).load_state_dict(state)


def test_random_excludes_positives_and_is_reproducible(toy_collection, tmp_path):
    sampler, _ = _sampler(toy_collection, tmp_path, negatives="random")
    exclude = frozenset({"d1", "d2"})
    draws = _draws(sampler, exclude, 3, seed=1)
    assert all(len(set(d)) == 3 and not set(d) & exclude for d in draws)
    assert {d for draw in draws for d in draw} == set(DOCIDS) - exclude  # uniform over the rest
    assert draws == _draws(sampler, exclude, 3, seed=1)
    assert draws != _draws(sampler, exclude, 3, seed=2)
    with pytest.raises(ValueError, match="too few passages"):
        sampler.sample("q1", exclude, 7, random.Random(0))


def test_candidates_come_from_the_top_depth_then_random(toy_collection, tmp_path):
    sampler = CandidateNegatives(DOCIDS, {"q1": ["d2", "d5", "d6", "d7", "d8"]}, depth=3)
    exclude = frozenset({"d1", "d2"})
    draws = _draws(sampler, exclude, 2, seed=3)
    assert {d for draw in draws for d in draw} == {"d5", "d6"}  # top 3 minus the excluded d2
    topped_up = _draws(sampler, exclude, 4, seed=3)
    assert all(set(d[:2]) == {"d5", "d6"} and not set(d) & exclude and len(set(d)) == 4 for d in topped_up)
    unknown = _draws(sampler, exclude, 2, seed=3, qid="q9")  # no candidates: random
    assert all(not set(d) & exclude for d in unknown)
    assert topped_up == _draws(sampler, exclude, 4, seed=3)


def test_ance_samples_only_after_a_version_is_installed(toy_collection, tmp_path):
    sampler, _ = _sampler(toy_collection, tmp_path, negatives="ance", negative_depth=2)
    assert isinstance(sampler, AnceNegatives) and sampler.version is None
    with pytest.raises(RuntimeError, match="before any refresh"):
        sampler.sample("q1", frozenset(), 1, random.Random(0))
    sampler.update(200, {"q1": ["d4", "d3", "d8"]})
    assert sampler.version == 200
    assert {d for draw in _draws(sampler, frozenset({"d1"}), 1, 0) for d in draw} == {"d4", "d3"}


def test_inbatch_and_dpr_force_in_batch(toy_collection, tmp_path):
    inbatch = _config(toy_collection, tmp_path, negatives="inbatch", n_negatives=3)
    assert inbatch.task.in_batch and inbatch.task.n_negatives == 0
    sampler, _ = _sampler(toy_collection, tmp_path, negatives="inbatch")
    assert sampler.sample("q1", frozenset(), 0, random.Random(0)) == []
    assert _config(toy_collection, tmp_path, negatives="dpr").task.in_batch
    assert not _config(toy_collection, tmp_path, negatives="bm25").task.in_batch
    with pytest.raises(ValueError, match="would have no negatives"):
        _config(toy_collection, tmp_path, negatives="random", n_negatives=0)


def test_bm25_negatives_from_a_lucene_index_built_in_the_run(toy_collection, tmp_path, monkeypatch):
    sampler, data = _sampler(toy_collection, tmp_path, negatives="bm25", negative_depth=4)
    index = RunDir(tmp_path / "run").bm25_index
    assert any(index.glob("segments*"))
    expected = bm25_negatives(index, data.queries, {q: sorted(e) for q, e in data.exclude.items()}, depth=4)
    assert sampler.candidates == expected
    for qid, exclude in data.exclude.items():
        draws = _draws(sampler, exclude, 2, seed=0, qid=qid)
        assert all(not set(d) & exclude for d in draws)
        assert {d for draw in draws for d in draw} <= set(expected[qid][:4]) | set(DOCIDS)

    built = max(p.stat().st_mtime_ns for p in index.glob("segments*"))
    assert (RunDir(tmp_path / "run").candidates / "ranking-00000.jsonl").is_file()
    with monkeypatch.context() as patch:  # a resumed run: the run's own index and its kept rankings are reused
        patch.setattr("ance_ir.negatives.sources.BM25Source.retrieve", lambda *_: pytest.fail("retrieved again"))
        again, _ = _sampler(toy_collection, tmp_path, negatives="bm25", negative_depth=4)
    assert again.candidates == expected
    assert max(p.stat().st_mtime_ns for p in index.glob("segments*")) == built
    corpus = data.corpus_path
    os.utime(corpus, ns=(built + 10**9, built + 10**9))  # an edited corpus: the index is built again
    _sampler(toy_collection, tmp_path, negatives="bm25", negative_depth=4)
    assert max(p.stat().st_mtime_ns for p in index.glob("segments*")) > built


def test_static_files_jsonl_and_tsv(toy_collection, tmp_path):
    jsonl = tmp_path / "negs.jsonl"
    jsonl.write_text('{"qid": "q1", "negatives": ["d7", "d8"]}\n{"qid": 2, "negatives": []}\n')
    assert read_negatives_file(jsonl, DOCIDS) == {"q1": ["d7", "d8"], "2": []}
    tsv = tmp_path / "negs.tsv"
    tsv.write_text("q1\td8\nq1\td7\nq2\td5\n")
    assert read_negatives_file(tsv, DOCIDS) == {"q1": ["d8", "d7"], "q2": ["d5"]}
    sampler, _ = _sampler(toy_collection, tmp_path, negatives="static", negatives_file=str(tsv))
    assert {d for draw in _draws(sampler, frozenset({"d1"}), 1, 0) for d in draw} == {"d7", "d8"}


@pytest.mark.parametrize(("name", "content", "line", "message"), [
    ("a.jsonl", '{"qid": "q1", "negatives": ["d2"]}\n{"qid": "q2", "negatives": [\n', 2, "malformed JSON"),
    ("b.jsonl", '{"qid": "q1"}\n', 1, '"qid" and "negatives"'),
    ("c.jsonl", '{"qid": "q1", "negatives": "d2"}\n', 1, "list of document ids"),
    ("d.jsonl", '{"qid": "q1", "negatives": ["d2"]}\n\n{"qid": "q1", "negatives": ["d3"]}\n', 3,
     "already listed on line 1"),
    ("e.jsonl", '{"qid": "q1", "negatives": ["d2", "nope"]}\n', 1, "'nope' is not in the corpus"),
    ("f.tsv", "q1\td2\nq1 d3\n", 2, "expected 2 columns"),
    ("g.tsv", "q1\td2\nq2\td2\nq1\td2\n", 3, "listed twice"),
])
def test_static_file_errors_name_file_and_line(tmp_path, name, content, line, message):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(InputError, match=message) as error:
        read_negatives_file(path, DOCIDS)
    assert str(error.value).startswith(f"{path}:{line}: ")


def test_a_new_strategy_is_one_registered_class(toy_collection, tmp_path):
    @register_negatives
    class Last(NegativeSampler):
        """The last n passages of the corpus that are not excluded."""

        name = "test-last"

        def sample(self, qid, exclude, n, rng):
            return [d for d in reversed(self.docids) if d not in exclude][:n]

    try:
        sampler, _ = _sampler(toy_collection, tmp_path, negatives="test-last", n_negatives=2)
        assert sampler.sample("q1", frozenset({"d8"}), 2, random.Random(0)) == ["d7", "d6"]
    finally:
        del NEGATIVE_STRATEGIES["test-last"]
    with pytest.raises(ValueError, match="negatives.name: must be one of"):
        _config(toy_collection, tmp_path, negatives="test-last")


def test_static_requires_a_file(toy_collection, tmp_path):
    with pytest.raises(ValueError, match="negatives.file: is required"):
        _config(toy_collection, tmp_path, negatives="static")
    missing = _config(toy_collection, tmp_path, negatives="static", negatives_file=str(tmp_path / "no.jsonl"))
    with pytest.raises(InputError, match="no such file"):
        build_sampler(missing, TrainData.load(missing), RunDir(tmp_path), Distributed.init("cpu"))


def test_denoised_group_negatives_leave_out_what_the_teacher_scores_high(toy_collection, tmp_path, capsys):
    from ance_ir.data import GroupPassage, TrainingGroup, write_groups
    from ance_ir.train.negatives import denoise

    kept, dropped = denoise({"q1": ["d2", "d4", "d6"], "q2": ["d5"]}, {"q1": {"d2": 2.5, "d4": 0.1}}, 1.0)
    assert kept == {"q1": ["d4", "d6"], "q2": ["d5"]} and dropped == 1  # unscored d6 and d5 stay
    groups = tmp_path / "groups.jsonl"
    write_groups(groups, [TrainingGroup("q1", "cat", (GroupPassage("d1", score=3.0),),
                                        (GroupPassage("d7", score=2.5), GroupPassage("d8", score=0.1)))])
    settings = {"data_source": "groups", "groups": str(groups), "train_topics": None, "negatives": "groups"}
    sampler, data = _sampler(toy_collection, tmp_path, **settings, **{"negatives.denoise_above": 1.0})
    assert "left out 1 of 2 scored above 1.0" in capsys.readouterr().err
    assert sampler.candidates == {"q1": ["d8"]}
    assert all(draw == ["d8"] for draw in _draws(sampler, data.exclude["q1"], 1, seed=3, times=5))
    with pytest.raises(ValueError, match="negatives.denoise_above: must be a number"):
        _config(toy_collection, tmp_path, **settings, **{"negatives.denoise_above": "high"})
    with pytest.raises(ValueError, match="negatives.denoise_above: needs teacher scores"):
        _config(toy_collection, tmp_path, data_source="spider", negatives="groups",
                **{"negatives.denoise_above": 1.0})
    unscored = tmp_path / "unscored.jsonl"
    write_groups(unscored, [TrainingGroup("q1", "cat", (GroupPassage("d1"),), (GroupPassage("d7"),))])
    with pytest.raises(ValueError, match="no passage has a score, and negatives.denoise_above"):
        _sampler(toy_collection, tmp_path, **{**settings, "groups": str(unscored)}, **{"negatives.denoise_above": 1.0})


def test_denoised_share_mixes_denoised_and_undenoised_negatives(toy_collection, tmp_path):
    from ance_ir.data import GroupPassage, TrainingGroup, write_groups

    groups = tmp_path / "groups.jsonl"
    # d7 and d8 scored above the threshold (likely positives), d4 and d6 below it
    write_groups(groups, [TrainingGroup("q1", "cat", (GroupPassage("d1", score=3.0),),
                                        tuple(GroupPassage(d, score=s) for d, s in
                                              [("d7", 2.5), ("d4", 0.1), ("d8", 2.0), ("d6", -1.0)]))])
    settings = {"data_source": "groups", "groups": str(groups), "train_topics": None, "negatives": "groups",
                "negatives.denoise_above": 1.0}
    exclude = frozenset({"d1"})
    denoised_only, _ = _sampler(toy_collection, tmp_path, **settings, **{"negatives.denoised_share": 1.0})
    assert all(set(draw) == {"d4", "d6"} for draw in _draws(denoised_only, exclude, 2, seed=1, times=20))
    undenoised, _ = _sampler(toy_collection, tmp_path, **settings, **{"negatives.denoised_share": 0.0})
    drawn = [d for draw in _draws(undenoised, exclude, 1, seed=1, times=400) for d in draw]
    assert set(drawn) == {"d4", "d6", "d7", "d8"}
    mixed, _ = _sampler(toy_collection, tmp_path, **settings, **{"negatives.denoised_share": 0.5})
    drawn = [d for draw in _draws(mixed, exclude, 1, seed=1, times=400) for d in draw]
    # half from {d4, d6}, half uniform over all four: 3/4 of the draws are below the threshold
    assert 0.68 < sum(d in ("d4", "d6") for d in drawn) / len(drawn) < 0.82 and set(drawn) == {"d4", "d6", "d7", "d8"}
    pairs = _draws(mixed, exclude, 3, seed=2, times=50)
    assert all(len(set(draw)) == 3 and not set(draw) & exclude for draw in pairs)
    with pytest.raises(ValueError, match="negatives.denoised_share: must be a probability"):
        _config(toy_collection, tmp_path, **settings, **{"negatives.denoised_share": 2})
    with pytest.raises(ValueError, match="negatives.denoised_share: mixes denoised and undenoised"):
        _config(toy_collection, tmp_path, **{**settings, "negatives.denoise_above": None},
                **{"negatives.denoised_share": 0.5})


def test_bm25_rand_mixes_bm25_candidates_and_random_passages(toy_collection, tmp_path):
    from ance_ir.train.negatives import BM25RandNegatives

    candidates = {"q1": ["d5", "d6"]}
    exclude = frozenset({"d1", "d2"})
    assert all(set(d) <= {"d5", "d6"} for d in _draws(BM25RandNegatives(DOCIDS, candidates, 2, 1.0), exclude, 2, 0))
    mixed = [d for draw in _draws(BM25RandNegatives(DOCIDS, candidates, 2, 0.5), exclude, 1, 0, times=200)
             for d in draw]
    from_bm25 = sum(d in ("d5", "d6") for d in mixed)
    # half from BM25's top 2, half uniform over the 6 passages not judged (2 of which are BM25's): about 2/3
    assert 0.55 < from_bm25 / len(mixed) < 0.78 and not set(mixed) & exclude and len(set(mixed)) == 6
    sampler, data = _sampler(toy_collection, tmp_path, negatives="bm25-rand", negative_depth=4)
    assert isinstance(sampler, BM25RandNegatives) and sampler.share == 0.5 and sampler.candidates
    with pytest.raises(ValueError, match="negatives.bm25_share: must be a probability"):
        _config(toy_collection, tmp_path, negatives="bm25-rand", **{"negatives.bm25_share": 1.5})


def test_the_candidates_sampler_keeps_its_rankings_for_a_resumed_run(toy_collection, tmp_path, monkeypatch, capsys):
    from ance_ir.bm25 import build_lucene_index

    index = build_lucene_index(toy_collection["corpus"], tmp_path / "toy.lucene")
    settings = {"negatives": "candidates", "negatives.source": "bm25", "negatives.index": str(index),
                "negative_depth": 4}
    first, data = _sampler(toy_collection, tmp_path, **settings)
    assert set(first.candidates) == set(data.queries) and any(first.candidates.values())
    assert (RunDir(tmp_path / "run").candidates / "job.json").is_file()
    with monkeypatch.context() as patch:
        patch.setattr("ance_ir.negatives.sources.BM25Source.retrieve", lambda *_: pytest.fail("retrieved again"))
        again, _ = _sampler(toy_collection, tmp_path, **settings)
    assert again.candidates == first.candidates
    capsys.readouterr()
    # before a first checkpoint the settings may change: the rankings of other ones are retrieved again
    for changed in ({**settings, "negative_depth": 3},
                    {"negatives": "bm25", "bm25_index": str(index), "negative_depth": 4}):
        other, _ = _sampler(toy_collection, tmp_path, **changed)
        assert "holds the rankings of another retrieval (an earlier attempt's); retrieving again" in \
            capsys.readouterr().err
        assert all(len(docids) <= changed["negative_depth"] for docids in other.candidates.values())
