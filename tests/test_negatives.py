"""The negatives stage: mining rules, the bm25 / dense / run candidate sources, and the CLI end to end."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import TOY_PASSAGES, TOY_QRELS, TOY_TOPICS, run_here

from ance_ir.data import GroupPassage, InputError, read_groups, read_qrels, read_topics_tsv
from ance_ir.negatives import (
    CANDIDATE_SOURCES,
    BM25Source,
    CandidateSource,
    DenseSource,
    RunSource,
    build_groups,
    build_source,
    mine,
)
from ance_ir.negatives.__main__ import main

# broad queries over the toy corpus, so that BM25 ranks most passages; d5 is judged 0 for q3 (a valid negative)
BROAD_TOPICS = {"q1": "cat dogs park bread puppy roman history market",
                "q2": "bread flour yeast recipe home baking",
                "q3": "stock market investors shares sold dropped history",
                "q4": "a topic without judgments"}
BROAD_QRELS = {"q1": {"d2": 2, "d7": 1}, "q2": {"d4": 2, "d3": 1}, "q3": {"d6": 2, "d5": 0}}


# ---------------------------------------------------------------------------------------------------- mining

RANKING = {"q": [("p", 10.0), ("a", 9.5), ("j", 9.2), ("b", 9.0), ("c", 8.0), ("d", 7.0), ("e", 1.0)]}
POS, JUDGED = {"q": ["p"]}, {"q": ["j"]}


def docids(mined: dict[str, list[tuple[str, float]]], qid: str = "q") -> list[str]:
    return [d for d, _ in mined[qid]]


def test_judged_and_positive_passages_are_never_negatives():
    mined = mine(RANKING, POS, JUDGED, depth=10)
    assert mined["q"] == [("a", 9.5), ("b", 9.0), ("c", 8.0), ("d", 7.0), ("e", 1.0)]
    assert docids(mine(RANKING, {}, {"q": ["p", "j"]}, depth=10)) == ["a", "b", "c", "d", "e"]
    assert docids(mine(RANKING, POS, {}, depth=10)) == ["a", "j", "b", "c", "d", "e"]


def test_depth_keeps_the_best_without_refilling_past_the_ranking():
    assert docids(mine(RANKING, POS, JUDGED, depth=2)) == ["a", "b"]
    short = {"q": RANKING["q"][:4]}  # a ranking of depth 4 minus 2 judged: 2 negatives, even with depth 4
    assert docids(mine(short, POS, JUDGED, depth=4)) == ["a", "b"]


def test_skip_and_max_rank_count_ranks_before_removal():
    # ranks: p=0 a=1 j=2 b=3 c=4 d=5 e=6
    assert docids(mine(RANKING, POS, JUDGED, depth=10, skip=2)) == ["b", "c", "d", "e"]
    assert docids(mine(RANKING, POS, JUDGED, depth=10, skip=1, max_rank=5)) == ["a", "b", "c"]
    assert docids(mine(RANKING, POS, JUDGED, depth=2, skip=3, max_rank=100)) == ["b", "c"]
    assert docids(mine(RANKING, POS, JUDGED, depth=10, skip=7)) == []


def test_absolute_margin_drops_candidates_too_close_to_the_positive():
    # positive 10: dropped when score + margin > 10
    assert docids(mine(RANKING, POS, JUDGED, depth=10, margin=1.0)) == ["b", "c", "d", "e"]  # 9.0 + 1 == 10 kept
    assert docids(mine(RANKING, POS, JUDGED, depth=10, margin=1.5)) == ["c", "d", "e"]
    assert docids(mine(RANKING, POS, JUDGED, depth=2, margin=0.0)) == ["a", "b"]


def test_relative_margin_drops_candidates_above_a_share_of_the_positive():
    # positive 10, relative margin 0.1: dropped when score > 9
    assert docids(mine(RANKING, POS, JUDGED, depth=10, relative_margin=0.1)) == ["b", "c", "d", "e"]
    assert docids(mine(RANKING, POS, JUDGED, depth=10, relative_margin=0.25)) == ["d", "e"]
    both = mine(RANKING, POS, JUDGED, depth=10, margin=0.9, relative_margin=0.15)  # 9.1 and 8.5: the stricter wins
    assert docids(both) == ["c", "d", "e"]


def test_margin_is_measured_from_the_lowest_retrieved_positive():
    two = {"q": ["p", "c"]}  # c (8.0) is the harder positive
    assert docids(mine(RANKING, two, JUDGED, depth=10, margin=0.5)) == ["d", "e"]
    unretrieved = {"q": ["zz"]}  # no positive score known: no margin
    assert docids(mine(RANKING, unretrieved, {}, depth=10, margin=5.0)) == ["p", "a", "j", "b", "c", "d", "e"]


def test_every_query_of_the_ranking_gets_an_entry():
    mined = mine({"q": RANKING["q"], "empty": [], "all-judged": [("x", 1.0)]}, POS, {**JUDGED, "all-judged": ["x"]}, 3)
    assert mined == {"q": [("a", 9.5), ("b", 9.0), ("c", 8.0)], "empty": [], "all-judged": []}


@pytest.mark.parametrize("params, message", [
    ({"depth": 0}, "depth"), ({"depth": 5, "skip": -1}, "skip"), ({"depth": 5, "skip": 3, "max_rank": 3}, "max rank"),
    ({"depth": 5, "margin": -0.1}, "margin"), ({"depth": 5, "relative_margin": 1.5}, "relative margin"),
])
def test_bad_mining_parameters(params, message):
    with pytest.raises(ValueError, match=message):
        mine(RANKING, POS, JUDGED, **params)


# --------------------------------------------------------------------------------------------- sources

def test_registry_builds_sources_by_name(tmp_path):
    assert {"bm25", "dense", "run"} <= set(CANDIDATE_SOURCES)
    assert all(issubclass(cls, CandidateSource) and cls.name == name for name, cls in CANDIDATE_SOURCES.items())
    run = tmp_path / "r.trec"
    run.write_text("q1 Q0 d1 1 2.0 x\n")
    assert isinstance(build_source("run", path=run), RunSource)
    with pytest.raises(ValueError, match=r"unknown candidate source 'colbert' \(known: bm25, dense, run"):
        build_source("colbert")
    with pytest.raises(ValueError, match="candidate source 'run'.*'index'"):
        build_source("run", path=run, index="x")
    with pytest.raises(ValueError, match="python -m ance_ir.bm25 index --corpus"):
        build_source("bm25")
    with pytest.raises(InputError, match="no such Lucene index folder"):
        build_source("bm25", index=tmp_path / "missing")
    with pytest.raises(InputError, match="no such dense index folder"):
        build_source("dense", index=tmp_path / "missing")


def test_run_source_sorts_cuts_and_keeps_every_query(tmp_path):
    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 d3 2 1.5 x\nq1 Q0 d1 1 3.0 x\nq1 Q0 d2 3 0.5 x\nq2 Q0 d4 1 9.0 x\n")
    source = RunSource(run)
    assert source.retrieve({"q1": "a", "q9": "b"}, 2) == {"q1": [("d1", 3.0), ("d3", 1.5)], "q9": []}
    assert source.retrieve({"q2": "c"}, 5) == {"q2": [("d4", 9.0)]}


@pytest.fixture(scope="module")
def broad(tmp_path_factory):
    """The toy corpus with the broad topics and their qrels, as files."""
    folder = tmp_path_factory.mktemp("broad")
    corpus, topics, qrels = folder / "corpus.jsonl", folder / "topics.tsv", folder / "qrels.txt"
    corpus.write_text("".join(json.dumps({"id": d, "contents": t, **({"title": "Bread"} if d == "d4" else {})})
                              + "\n" for d, t in TOY_PASSAGES.items()))
    topics.write_text("".join(f"{q}\t{t}\n" for q, t in BROAD_TOPICS.items()))
    qrels.write_text("".join(f"{q} 0 {d} {g}\n" for q, judged in BROAD_QRELS.items() for d, g in judged.items()))
    return {"corpus": corpus, "topics": topics, "qrels": qrels, "folder": folder}


@pytest.fixture(scope="module")
def lucene(broad):
    from ance_ir.bm25 import build_lucene_index

    return build_lucene_index(broad["corpus"], broad["folder"] / "toy.lucene")


def trainer_view(topics_path, qrels_path, min_positive_grade=1, exclude_grade=1):
    """What ``TrainData.load`` hands BM25Negatives: the topics with positives and their judged passages."""
    topics, qrels = read_topics_tsv(topics_path), read_qrels(qrels_path)
    keep = [q for q in topics if any(g >= min_positive_grade for g in qrels.get(q, {}).values())]
    exclude = {q: sorted(d for d, g in qrels[q].items() if g >= exclude_grade) for q in keep}
    return {q: topics[q] for q in keep}, exclude


def test_bm25_source_is_pyserini_bm25(lucene, broad):
    from ance_ir.bm25 import BM25Searcher

    queries, _ = trainer_view(broad["topics"], broad["qrels"])
    ranking = BM25Source(lucene).retrieve(queries, 5)
    assert ranking == BM25Searcher(lucene).search(queries, hits=5)
    assert set(ranking) == {"q1", "q2", "q3"} and all(0 < len(r) <= 5 for r in ranking.values())
    assert ranking["q2"][0][0] in {"d3", "d4"}
    assert len(BM25Source(lucene).retrieve(queries, 8)["q1"]) > 5  # enough hits to make the depth cut matter


@pytest.mark.parametrize("depth", [3, 200])
def test_mining_bm25_equals_the_trainers_bm25_negatives(lucene, broad, depth):
    from ance_ir.bm25 import bm25_negatives

    queries, exclude = trainer_view(broad["topics"], broad["qrels"])
    positives = {q: [d for d, g in read_qrels(broad["qrels"])[q].items() if g >= 2] for q in queries}
    mined = mine(BM25Source(lucene).retrieve(queries, depth), positives, exclude, depth)
    expected = bm25_negatives(lucene, queries, exclude, depth=depth)
    assert {q: docids(mined, q) for q in mined} == expected
    assert "d5" in expected["q3"]  # judged 0: still a negative
    if depth == 3:
        assert any(len(v) < 3 for v in expected.values())  # judged removal is not refilled


def test_cli_bm25_defaults_give_the_trainers_warm_up_negatives(lucene, broad, tmp_path, capsys):
    from ance_ir.bm25 import bm25_negatives

    out = tmp_path / "groups.jsonl.gz"
    assert main(["--topics", str(broad["topics"]), "--qrels", str(broad["qrels"]), "--corpus", str(broad["corpus"]),
                 "--source", "bm25", "--index", str(lucene), "--output", str(out)]) == 0
    queries, exclude = trainer_view(broad["topics"], broad["qrels"])
    groups = read_groups(out)
    assert {g.query_id: [p.docid for p in g.negatives] for g in groups} == bm25_negatives(lucene, queries, exclude,
                                                                                          depth=200)
    scores = dict(BM25Source(lucene).retrieve(queries, 200)["q1"])
    assert all(p.score == pytest.approx(scores[p.docid]) and p.text is None for p in groups[0].negatives)
    assert [p.docid for p in groups[0].positives] == ["d2", "d7"] and groups[0].query == BROAD_TOPICS["q1"]
    assert {g.scored_by for g in groups} == {"bm25"}
    err = capsys.readouterr().err
    assert "1 topics have no passage of the corpus judged >= 1" in err and f"wrote {out}: 3 groups" in err
    assert "mining up to 200 negatives for each of 3 queries" in err and f"writing 3 groups to {out} ..." in err


@pytest.fixture(scope="module")
def dense_index(broad, tiny_bert_dir):
    from ance_ir.encode.__main__ import main as encode_main

    out = broad["folder"] / "toy.dense"
    encode_main(["--corpus", str(broad["corpus"]), "--encoder", str(tiny_bert_dir), "--output", str(out), "--quiet",
                 "--precision", "fp32", "--pooling", "mean"])  # mean: the random BERT's CLS vectors nearly tie
    return out


def test_dense_source_ranks_by_inner_product(dense_index, tiny_bert_dir):
    from ance_ir.index import load_dense_index, stored_vectors
    from ance_ir.modeling import DenseEncoder

    queries = {"q1": BROAD_TOPICS["q1"], "q2": BROAD_TOPICS["q2"]}
    ranking = DenseSource(dense_index, batch_size=1, device="cpu").retrieve(queries, 5)
    dense = load_dense_index(dense_index)
    vectors = DenseEncoder.from_pretrained(str(tiny_bert_dir), pooling="mean").encode_queries(list(queries.values()))
    scores = vectors @ stored_vectors(dense).T
    for row, qid in zip(scores, queries, strict=True):
        order = np.argsort(-row, kind="stable")[:5]
        assert [d for d, _ in ranking[qid]] == [dense.docids[i] for i in order]
        np.testing.assert_allclose([s for _, s in ranking[qid]], row[order], rtol=1e-4, atol=1e-4)
    assert len(DenseSource(dense_index, device="cpu").retrieve(queries, 100)["q1"]) == len(TOY_PASSAGES)


def test_a_resumed_dense_retrieval_refuses_a_query_encoder_trained_again_in_place(dense_index, broad, tiny_bert_dir,
                                                                                  tmp_path, monkeypatch):
    import shutil

    import torch
    from transformers import BertModel

    import ance_ir.negatives.resume as resume

    monkeypatch.setattr(resume, "QUERY_CHUNK", 1)
    original, calls = DenseSource.retrieve, []

    def spy(self, queries, depth):  # Ctrl-C once, at the second chunk
        calls.append(list(queries))
        if len(calls) == 2:
            raise KeyboardInterrupt
        return original(self, queries, depth)

    monkeypatch.setattr(DenseSource, "retrieve", spy)
    encoder, out = tmp_path / "encoder", tmp_path / "groups.jsonl"
    shutil.copytree(tiny_bert_dir, encoder)
    args = ["--topics", str(broad["topics"]), "--qrels", str(broad["qrels"]), "--corpus", str(broad["corpus"]),
            "--source", "dense", "--index", str(dense_index), "--encoder", str(encoder), "--threads", "1", "--quiet",
            "--output", str(out)]
    with pytest.raises(KeyboardInterrupt, match="interrupted: 1 of 3 queries retrieved are kept"):
        main(args)
    model = BertModel.from_pretrained(encoder)
    with torch.no_grad():
        model.encoder.layer[0].output.dense.bias.add_(1.0)
    model.save_pretrained(encoder)  # the same folder, other weights
    with pytest.raises(InputError, match="holds an unfinished retrieval with a different weights_sha256"):
        main(args)
    index = tmp_path / "index"  # an index encoded again in place (its meta.json records other weights)
    shutil.copytree(dense_index, index)
    before = DenseSource(index, encoder=str(encoder), threads=1).resume_record()["index_meta_sha256"]
    meta = json.loads((index / "meta.json").read_text())
    (index / "meta.json").write_text(json.dumps({**meta, "weights_sha256": "0" * 64}))
    assert DenseSource(index, encoder=str(encoder), threads=1).resume_record()["index_meta_sha256"] != before


def test_cli_dense_source_with_text_and_skip(dense_index, broad, tmp_path):
    out = tmp_path / "dense.jsonl"
    assert main(["--topics", str(broad["topics"]), "--qrels", str(broad["qrels"]), "--corpus", str(broad["corpus"]),
                 "--source", "dense", "--index", str(dense_index), "--output", str(out), "--with-text",
                 "--hits", "8", "--depth", "4", "--skip", "1", "--threads", "1", "--device", "cpu"]) == 0
    ranking = DenseSource(dense_index, device="cpu").retrieve({q: BROAD_TOPICS[q] for q in ("q1", "q2", "q3")}, 8)
    for group in read_groups(out):
        judged = {d for d, g in BROAD_QRELS[group.query_id].items() if g >= 1}
        expected = [(d, s) for d, s in ranking[group.query_id][1:] if d not in judged][:4]
        assert [p.docid for p in group.negatives] == [d for d, _ in expected]
        assert [p.score for p in group.negatives] == pytest.approx([s for _, s in expected])
        for p in (*group.positives, *group.negatives):
            assert p.text == TOY_PASSAGES[p.docid] and p.title == ("Bread" if p.docid == "d4" else None)
        assert all(p.score is not None for p in group.positives)  # every passage is a dense candidate


# ------------------------------------------------------------------------------------------ run source + CLI

@pytest.fixture()
def toy_run(toy_collection):
    """A run over the toy topics: every passage for every query, scores descending with the docid number."""
    path = toy_collection["corpus"].parent / "run.trec"
    path.write_text("".join(f"{q} Q0 d{i} {9 - i} {float(10 - i)} toy\n" for q in TOY_TOPICS for i in range(1, 9)))
    return path


def test_building_groups_counts_the_corpus_past_the_delay_when_it_reports(toy_collection, toy_run, monkeypatch,
                                                                          capsys):
    topics, qrels = read_topics_tsv(toy_collection["topics"]), read_qrels(toy_collection["qrels"])
    monkeypatch.setattr("ance_ir.data.resume.BAR_DELAY_S", 0)
    lines = []
    reported, _ = build_groups(topics, qrels, toy_collection["corpus"], RunSource(toy_run), hits=5, depth=2,
                               progress=lines.append)
    assert "read corpus: 8passage [" in capsys.readouterr().err and lines
    silent, _ = build_groups(topics, qrels, toy_collection["corpus"], RunSource(toy_run), hits=5, depth=2)
    assert silent == reported and capsys.readouterr().err == ""


def test_build_groups_from_a_run(toy_collection, toy_run):
    topics = {**read_topics_tsv(toy_collection["topics"]), "q4": "no judgments"}
    qrels = {**read_qrels(toy_collection["qrels"]), "q1": {"d1": 2, "d2": 1, "d9": 2, "d3": 0}}
    groups, report = build_groups(topics, qrels, toy_collection["corpus"], RunSource(toy_run), hits=5, depth=2,
                                  min_positive_grade=2, exclude_grade=1)
    assert [g.query_id for g in groups] == ["q1", "q2", "q3"]
    q1 = groups[0]
    assert q1.positives == (GroupPassage("d1", score=9.0),)  # d9 is not in the corpus
    assert q1.negatives == (GroupPassage("d3", score=7.0), GroupPassage("d4", score=6.0))  # d2 judged 1, d3 judged 0
    assert [p.docid for p in groups[2].negatives] == ["d1", "d2"]
    assert (report.topics, report.groups, report.without_positive, report.positives_not_in_corpus) == (4, 3, 1, 1)
    assert report.negatives == 6 and report.short == 0
    deep, _ = build_groups(topics, qrels, toy_collection["corpus"], RunSource(toy_run), hits=5, depth=5,
                           min_positive_grade=2, exclude_grade=3)
    assert [p.docid for p in deep[0].negatives] == ["d2", "d3", "d4", "d5"]  # grade 1 allowed, positive never



def test_grade_scores_carry_the_judgments_not_the_source_scores(toy_collection, toy_run):
    qrels = {**read_qrels(toy_collection["qrels"]), "q1": {"d1": 3, "d2": 1, "d3": 0}}
    groups, _ = build_groups(read_topics_tsv(toy_collection["topics"]), qrels, toy_collection["corpus"],
                             RunSource(toy_run), hits=5, depth=3, min_positive_grade=2, exclude_grade=2,
                             grade_scores=True)
    q1 = groups[0]
    assert q1.positives == (GroupPassage("d1", score=3.0),)
    assert q1.negatives == (GroupPassage("d2", score=1.0), GroupPassage("d3", score=0.0),
                            GroupPassage("d4", score=0.0))  # d4 unjudged: 0, not the run's 6.0

def test_candidates_outside_the_corpus_are_never_negatives(toy_collection, tmp_path):
    run = tmp_path / "other.trec"
    run.write_text("q1 Q0 x1 1 5.0 t\nq1 Q0 d1 2 4.0 t\nq1 Q0 d7 3 3.0 t\n")
    groups, report = build_groups(TOY_TOPICS, TOY_QRELS, toy_collection["corpus"], RunSource(run), hits=10, depth=5)
    assert [p.docid for p in groups[0].negatives] == ["d7"] and report.candidates_not_in_corpus == 1
    assert report.without_candidates == 2
    run.write_text("q1 Q0 x1 1 5.0 t\nq2 Q0 x2 1 4.0 t\n")
    with pytest.raises(ValueError, match="none of the 2 candidates from the run source"):
        build_groups(TOY_TOPICS, TOY_QRELS, toy_collection["corpus"], RunSource(run), hits=10, depth=5)


def cli(*args: str) -> subprocess.CompletedProcess:
    return run_here("ance_ir.negatives", *args)


def test_cli_run_source_writes_reproducible_gzip(toy_collection, toy_run, tmp_path):
    common = ["--topics", str(toy_collection["topics"]), "--qrels", str(toy_collection["qrels"]),
              "--corpus", str(toy_collection["corpus"]), "--source", "run", "--run", str(toy_run),
              "--depth", "3", "--relative-margin", "0.2"]
    first, second = tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl.gz"
    result = cli(*common, "--output", str(first))
    assert result.returncode == 0, result.stderr
    assert main([*common, "--output", str(second)]) == 0
    assert first.read_bytes() == second.read_bytes()
    groups = read_groups(first)
    # q3: positives d5 (5.0) and d6 (4.0); relative margin 0.2 drops scores above 3.2
    assert [p.docid for p in groups[2].negatives] == ["d7", "d8"]
    assert "wrote" in result.stderr and "3 groups" in result.stderr


def test_help_imports_nothing_heavy():
    code = ("import sys, ance_ir.negatives, ance_ir.negatives.__main__ as m; m.build_parser().format_help(); "
            "print(sorted({'torch', 'transformers', 'pyserini', 'faiss'} & set(sys.modules)))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
    assert cli("--help").stdout.startswith("usage: python -m ance_ir.negatives")


BAD_INPUTS = {
    "topics": ("topics", "q1\tcat\textra\n", 1, "expected 2 columns"),
    "qrels": ("qrels", "q1 0 d1 2\nq2 0 d3 high\n", 2, "is not an integer"),
    "corpus": ("corpus", json.dumps({"id": "d1", "contents": "x"}) + "\n{broken\n", 2, "malformed JSON"),
    "duplicate passage": ("corpus", json.dumps({"id": "d1", "contents": "x"}) + "\n"
                          + json.dumps({"id": "d1", "contents": "y"}) + "\n", 2, "duplicate id 'd1'"),
    "run": ("run", "q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 much t\n", 2, "is not a number"),
}


@pytest.mark.parametrize("kind", list(BAD_INPUTS))
def test_cli_bad_input_is_one_line_and_writes_nothing(toy_collection, toy_run, tmp_path, kind):
    which, content, line, message = BAD_INPUTS[kind]
    files = {**toy_collection, "run": toy_run}
    files[which].write_text(content)
    out = tmp_path / "out" / "groups.jsonl"
    result = cli("--topics", str(files["topics"]), "--qrels", str(files["qrels"]), "--corpus", str(files["corpus"]),
                 "--source", "run", "--run", str(files["run"]), "--output", str(out))
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {files[which]}:{line}: ") and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not out.parent.exists() or list(out.parent.iterdir()) == []


@pytest.mark.parametrize("args, message", [
    (["--source", "bm25"], "--source bm25 needs --index, a Lucene index of the corpus; build one with: "
                           "python -m ance_ir.bm25 index --corpus"),
    (["--source", "bm25", "--index", "nowhere"], "nowhere: no such Lucene index folder"),
    (["--source", "dense"], "--source dense needs --index"),
    (["--source", "run"], "--source run needs --run"),
    (["--source", "bm25", "--run", "x.trec", "--index", "i"], "--run does not apply to --source bm25"),
    (["--source", "bm25", "--index", "i", "--device", "cpu"], "--device does not apply to --source bm25"),
    (["--source", "run", "--run", "r", "--skip", "4", "--max-rank", "2"], "max rank (2) must be greater than skip"),
])
def test_cli_usage_errors(toy_collection, tmp_path, args, message):
    out = tmp_path / "groups.jsonl"
    result = cli("--topics", str(toy_collection["topics"]), "--qrels", str(toy_collection["qrels"]),
                 "--corpus", str(toy_collection["corpus"]), "--output", str(out), *args)
    assert result.returncode == 2 and result.stderr.startswith(f"error: {message}"), result.stderr
    assert not out.exists()


def test_cli_needs_qrels_for_a_topics_file(toy_collection, toy_run, tmp_path):
    result = cli("--topics", str(toy_collection["topics"]), "--corpus", str(toy_collection["corpus"]),
                 "--source", "run", "--run", str(toy_run), "--output", str(tmp_path / "g.jsonl"))
    assert result.returncode == 2
    assert result.stderr == f"error: no qrels are known for {toy_collection['topics']}; pass --qrels\n"


def test_pseudo_positives_label_topics_from_the_ranking(toy_collection, tmp_path):
    run = tmp_path / "teacher.trec"
    run.write_text("q1 Q0 x9 1 0.95 t\nq1 Q0 d2 2 0.9 t\nq1 Q0 d5 3 0.8 t\nq1 Q0 d1 4 0.4 t\nq1 Q0 d3 5 0.3 t\n"
                   "q2 Q0 d4 1 0.45 t\nq2 Q0 d6 2 0.2 t\n")
    topics = {"q1": "cat dogs", "q2": "bread", "q3": "never retrieved"}
    groups, report = build_groups(topics, {}, toy_collection["corpus"], RunSource(run), hits=10, depth=2,
                                  pseudo_positives=2)
    assert [g.query_id for g in groups] == ["q1", "q2"] and report.without_positive == 1
    # x9 is not in the corpus: the top 2 of the corpus are the positives, the next ones the negatives
    assert [p.docid for p in groups[0].positives] == ["d2", "d5"]
    assert [p.docid for p in groups[0].negatives] == ["d1", "d3"] and groups[0].negatives[0].score == 0.4
    assert [p.docid for p in groups[1].positives] == ["d4", "d6"] and groups[1].negatives == ()
    confident, _ = build_groups(topics, {}, toy_collection["corpus"], RunSource(run), hits=10, depth=2,
                                pseudo_positives=2, min_pseudo_score=0.5)
    assert [(g.query_id, [p.docid for p in g.positives]) for g in confident] == [("q1", ["d2", "d5"])]
    assert [p.docid for p in confident[0].negatives] == ["d1", "d3"]


def test_cli_pseudo_positives(toy_collection, toy_run, tmp_path):
    common = ["--topics", str(toy_collection["topics"]), "--corpus", str(toy_collection["corpus"]), "--source",
              "run", "--run", str(toy_run), "--depth", "2"]
    out = tmp_path / "pseudo.jsonl"
    result = cli(*common, "--pseudo-positives", "1", "--output", str(out))
    assert result.returncode == 0, result.stderr
    groups = read_groups(out)
    assert [(g.query_id, [p.docid for p in g.positives], [p.docid for p in g.negatives]) for g in groups] == \
        [(q, ["d1"], ["d2", "d3"]) for q in TOY_TOPICS]
    for args, message in ((["--pseudo-positives", "1", "--qrels", str(toy_collection["qrels"])], "drop --qrels"),
                          (["--qrels", str(toy_collection["qrels"]), "--min-pseudo-score", "1"],
                           "--min-pseudo-score needs --pseudo-positives"),
                          (["--pseudo-positives", "1", "--grade-scores"], "--grade-scores needs judged topics")):
        refused = tmp_path / "refused.jsonl"
        result = cli(*common, *args, "--output", str(refused))
        assert result.returncode == 2 and message in result.stderr and not refused.exists()


def test_a_resumed_bm25_retrieval_refuses_an_index_built_again_in_place(broad, tmp_path, monkeypatch):
    import ance_ir.negatives.resume as resume
    from ance_ir.bm25 import build_lucene_index

    monkeypatch.setattr(resume, "QUERY_CHUNK", 1)
    original = BM25Source.retrieve

    def spy(self, queries, depth):  # Ctrl-C at the second chunk
        if spy.calls == 1:
            raise KeyboardInterrupt
        spy.calls += 1
        return original(self, queries, depth)

    spy.calls = 0
    monkeypatch.setattr(BM25Source, "retrieve", spy)
    index = build_lucene_index(broad["corpus"], tmp_path / "index")
    args = ["--topics", str(broad["topics"]), "--qrels", str(broad["qrels"]), "--corpus", str(broad["corpus"]),
            "--source", "bm25", "--index", str(index), "--quiet", "--output", str(tmp_path / "groups.jsonl")]
    with pytest.raises(KeyboardInterrupt, match="interrupted: 1 of 3 queries retrieved are kept"):
        main(args)
    build_lucene_index(broad["corpus"], index)  # the same corpus, indexed again: another commit of the index
    with pytest.raises(InputError, match="holds an unfinished retrieval with a different index_commit"):
        main(args)


def test_cli_interrupted_retrieval_resumes_from_kept_chunks(lucene, broad, tmp_path, monkeypatch):
    """Ctrl-C while the second of three one-query chunks is retrieved: the first is kept, the rerun retrieves the
    other two only and writes the groups an uninterrupted run writes; other source settings are refused, and a
    failure that is not an interrupt keeps nothing."""
    import ance_ir.negatives.resume as resume

    monkeypatch.setattr(resume, "QUERY_CHUNK", 1)
    calls: list[list[str]] = []
    original = BM25Source.retrieve

    def spy(self, queries, depth):
        if len(calls) == spy.stop:
            raise spy.error
        calls.append(list(queries))
        return original(self, queries, depth)

    spy.stop, spy.error = 1, KeyboardInterrupt
    monkeypatch.setattr(BM25Source, "retrieve", spy)
    args = ["--topics", str(broad["topics"]), "--qrels", str(broad["qrels"]), "--corpus", str(broad["corpus"]),
            "--source", "bm25", "--index", str(lucene), "--quiet"]
    out, partial = tmp_path / "groups.jsonl.gz", tmp_path / "groups.jsonl.gz.partial"
    kept = f"interrupted: 1 of 3 queries retrieved are kept in {partial}; rerun the same command to resume"
    with pytest.raises(KeyboardInterrupt, match=re.escape(kept)):
        main([*args, "--output", str(out)])
    assert not out.exists() and sorted(p.name for p in partial.iterdir()) == ["job.json", "ranking-00000.jsonl"]
    with pytest.raises(InputError, match="holds an unfinished retrieval with a different k1"):
        main([*args, "--k1", "1.2", "--output", str(out)])

    spy.stop = None
    calls.clear()
    assert main([*args, "--output", str(out)]) == 0
    assert calls == [["q2"], ["q3"]] and not partial.exists()
    assert main([*args, "--output", str(tmp_path / "straight.jsonl.gz")]) == 0
    assert out.read_bytes() == (tmp_path / "straight.jsonl.gz").read_bytes()

    calls.clear()
    spy.stop, spy.error = 1, RuntimeError("the source failed")  # not an interrupt: nothing is kept to resume
    with pytest.raises(RuntimeError):
        main([*args, "--output", str(tmp_path / "failed.jsonl.gz")])
    assert not (tmp_path / "failed.jsonl.gz.partial").exists()


def test_cli_kept_chunks_one_writer_a_damaged_chunk_and_an_interrupt_while_mining(lucene, broad, tmp_path,
                                                                                   monkeypatch):
    """A second writer of the same output is refused at once; a kept chunk that cannot be read names the folder to
    delete; a Ctrl-C after every chunk was retrieved says the chunks are kept, and the rerun uses them."""
    import ance_ir.negatives.mining as mining
    import ance_ir.negatives.resume as resume
    from ance_ir.data import output_lock

    monkeypatch.setattr(resume, "QUERY_CHUNK", 1)
    args = ["--topics", str(broad["topics"]), "--qrels", str(broad["qrels"]), "--corpus", str(broad["corpus"]),
            "--source", "bm25", "--index", str(lucene), "--quiet"]
    out, partial = tmp_path / "groups.jsonl", tmp_path / "groups.jsonl.partial"
    with output_lock(out), pytest.raises(InputError, match="another process .* is writing this output"):
        main([*args, "--output", str(out)])

    original = mining.mine

    def interrupted(*given, **settings):
        raise KeyboardInterrupt

    monkeypatch.setattr(mining, "mine", interrupted)
    kept = f"interrupted while mining and writing the groups: every chunk is finished and kept in {partial}"
    with pytest.raises(KeyboardInterrupt, match=re.escape(kept)):
        main([*args, "--output", str(out)])
    chunk = partial / "ranking-00001.jsonl"
    whole = chunk.read_bytes()
    chunk.write_bytes(whole[:len(whole) // 2])
    monkeypatch.setattr(mining, "mine", original)
    with pytest.raises(InputError, match=re.escape(f"{partial}: chunk 1 kept here cannot be read (")
                       + ".*" + re.escape(f"; delete {partial} to start over")):
        main([*args, "--output", str(out)])
    assert not out.exists() and chunk.is_file()  # left for the user to delete, as the error says
    shutil.rmtree(partial)

    with pytest.raises(KeyboardInterrupt):  # kept again, whole this time
        monkeypatch.setattr(mining, "mine", interrupted)
        main([*args, "--output", str(out)])
    monkeypatch.setattr(mining, "mine", original)
    calls: list[list[str]] = []
    monkeypatch.setattr(BM25Source, "retrieve", lambda self, queries, depth: calls.append(list(queries)))
    assert main([*args, "--output", str(out)]) == 0
    assert calls == [] and not partial.exists()  # every ranking read back from the kept chunks


def test_cli_a_source_that_computes_nothing_is_called_once(toy_collection, toy_run, tmp_path, monkeypatch):
    """A source with ``computes = False`` (the run file) gets every query in one call, chunks or not, and leaves
    no resume folder; a computing source is called chunk by chunk."""
    import ance_ir.negatives.resume as resume

    monkeypatch.setattr(resume, "QUERY_CHUNK", 1)
    calls: list[list[str]] = []
    original = RunSource.retrieve

    def spy(self, queries, depth):
        calls.append(list(queries))
        return original(self, queries, depth)

    monkeypatch.setattr(RunSource, "retrieve", spy)
    args = ["--topics", str(toy_collection["topics"]), "--qrels", str(toy_collection["qrels"]),
            "--corpus", str(toy_collection["corpus"]), "--source", "run", "--run", str(toy_run), "--quiet"]
    out = tmp_path / "groups.jsonl"
    assert main([*args, "--output", str(out)]) == 0
    assert calls == [list(read_topics_tsv(toy_collection["topics"]))] and len(calls[0]) > 1
    monkeypatch.setattr(RunSource, "computes", True)
    calls.clear()
    assert main([*args, "--output", str(tmp_path / "chunked.jsonl")]) == 0
    assert calls == [[q] for q in read_topics_tsv(toy_collection["topics"])]
    assert out.read_bytes() == (tmp_path / "chunked.jsonl").read_bytes()
