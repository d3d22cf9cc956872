"""BM25 through Pyserini: indexing, search, warm-up negatives, CLI errors, and the rag24-mini numbers."""

from __future__ import annotations

import json

import pytest
from conftest import interrupt_at_call, run_here

from ance_ir.bm25 import BM25Searcher, bm25_negatives, build_lucene_index
from ance_ir.bm25.__main__ import main as bm25_main
from ance_ir.data import InputError, read_run, read_topics_tsv
from ance_ir.datasets import resolve_qrels
from ance_ir.eval import evaluate


@pytest.fixture()
def toy_index(toy_collection, tmp_path):
    return build_lucene_index(toy_collection["corpus"], tmp_path / "toy.lucene")


def test_search_ranks_matching_passages_first(toy_index, toy_collection):
    run = BM25Searcher(toy_index).search(read_topics_tsv(toy_collection["topics"]), hits=3)
    assert run["q2"][0][0] == "d3"
    assert run["q3"][0][0] in {"d5", "d6"}
    scores = [s for _, s in run["q1"]]
    assert scores == sorted(scores, reverse=True) and len(scores) <= 3


def test_search_in_slices_with_a_bar_equals_one_batch_search(toy_index, toy_collection, monkeypatch, capsys):
    import ance_ir.bm25.searcher as searcher

    topics = {f"{qid}-{n}": text for n in range(3) for qid, text in read_topics_tsv(toy_collection["topics"]).items()}
    whole = BM25Searcher(toy_index).search(topics, hits=4)
    monkeypatch.setattr(searcher, "SEARCH_SLICE", 2)
    sliced = BM25Searcher(toy_index).search(topics, hits=4, progress=True)
    assert sliced == whole and list(sliced) == list(topics)
    assert f"{len(topics)}/{len(topics)}" in capsys.readouterr().err


def test_negatives_exclude_positives(toy_index, toy_collection):
    topics = read_topics_tsv(toy_collection["topics"])
    negatives = bm25_negatives(toy_index, topics, {"q2": ["d3", "d4"]}, depth=8)
    assert negatives["q2"] and not {"d3", "d4"} & set(negatives["q2"])
    assert negatives["q1"] == [d for d, _ in BM25Searcher(toy_index).search({"q1": topics["q1"]}, hits=8)["q1"]]


def test_cli_run_file_is_pyserini_format(toy_index, toy_collection, tmp_path, capsys):
    out = tmp_path / "run.trec"
    with pytest.raises(SystemExit) as done:
        from ance_ir.cli import run_cli

        run_cli(bm25_main, ["search", "--index", str(toy_index), "--topics", str(toy_collection["topics"]),
                            "--output", str(out), "--hits", "5"])
    assert done.value.code == 0
    first = out.read_text().splitlines()[0].split(" ")
    assert first[1] == "Q0" and first[3] == "1" and first[5] == "bm25" and len(first[4].split(".")[1]) == 6
    assert set(read_run(out)) == {"q1", "q2", "q3"}
    assert capsys.readouterr().out == ""  # a topics file has no known qrels: nothing to evaluate


def test_cli_prints_the_runs_metrics_with_qrels(toy_index, toy_collection, tmp_path, capsys):
    out = tmp_path / "run.trec"
    assert bm25_main(["search", "--index", str(toy_index), "--topics", str(toy_collection["topics"]),
                      "--output", str(out), "--hits", "5", "--qrels", str(toy_collection["qrels"])]) == 0
    means = evaluate(resolve_qrels(str(toy_collection["qrels"])), read_run(out))
    printed = capsys.readouterr()
    assert "ndcg@10" in printed.out and f"{means['ndcg_cut_10']:.4f}" in printed.out and "warning" not in printed.err
    other = tmp_path / "other.qrels"
    other.write_text("q1 0 x9 1\nq2 0 x8 1\n")  # judgments of another corpus
    assert bm25_main(["search", "--index", str(toy_index), "--topics", str(toy_collection["topics"]),
                      "--output", str(tmp_path / "other.trec"), "--qrels", str(other)]) == 0
    assert f"warning: {tmp_path / 'other.trec'}: none of the retrieved documents is judged in {other}" in \
        capsys.readouterr().err


def test_the_cli_says_how_many_queries_found_nothing(toy_index, tmp_path, capsys):
    topics = tmp_path / "t.tsv"
    topics.write_text("q1\tthe of a\nq2\tzzzunseen\nq3\tbread\n")  # stopwords; a word of no passage
    assert bm25_main(["search", "--index", str(toy_index), "--topics", str(topics),
                      "--output", str(tmp_path / "r.trec")]) == 0
    assert f"wrote {tmp_path / 'r.trec'}: 3 queries, 2 of them without a hit" in capsys.readouterr().err
    assert set(read_run(tmp_path / "r.trec")) == {"q3"}


def test_bad_corpus_fails_cleanly_without_index(tmp_path):
    corpus = tmp_path / "bad.jsonl"
    corpus.write_text(json.dumps({"id": "a", "contents": "x"}) + "\n{broken\n")
    result = run_here("ance_ir.bm25", "index", "--corpus", str(corpus), "--output", str(tmp_path / "idx"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith(f"error: {corpus}:2: malformed JSON")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl"]


def test_ctrl_c_while_indexing_says_what_is_kept(toy_collection, toy_index, tmp_path, monkeypatch):
    """Ctrl-C during Lucene's indexing (at the indexer's first log line): the indexer is killed, and there is no
    output and no temporaries, or the index it was replacing, untouched."""
    import subprocess

    import ance_ir.bm25.index as index

    started = []

    class Recorded(subprocess.Popen):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            started.append(self)

    class Interrupting:
        def search(self, line):
            raise KeyboardInterrupt

    monkeypatch.setattr(index.subprocess, "Popen", Recorded)
    monkeypatch.setattr(index, "_INDEXED", Interrupting())
    fresh = tmp_path / "fresh" / "toy.lucene"
    fresh.parent.mkdir()
    with pytest.raises(KeyboardInterrupt, match="interrupted: nothing was written; a rerun builds the index"):
        bm25_main(["index", "--corpus", str(toy_collection["corpus"]), "--output", str(fresh)])
    assert list(fresh.parent.iterdir()) == []
    before = sorted(p.name for p in toy_index.iterdir())
    with pytest.raises(KeyboardInterrupt, match="interrupted: the index it replaces is kept"):
        bm25_main(["index", "--corpus", str(toy_collection["corpus"]), "--output", str(toy_index), "--force"])
    assert sorted(p.name for p in toy_index.iterdir()) == before and BM25Searcher(toy_index).search({"q": "dog"})
    assert not list(toy_index.parent.glob(".*"))  # no temporaries left beside it
    assert len(started) == 2 and all(indexer.returncode == -9 for indexer in started)  # killed, and waited for


def test_indexing_shows_a_bar_for_each_step_unless_quiet(toy_collection, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("ance_ir.data.resume.BAR_DELAY_S", 0)  # a toy build is quicker than the delay
    passages = len(toy_collection["corpus"].read_text().splitlines())
    assert bm25_main(["index", "--corpus", str(toy_collection["corpus"]), "--output", str(tmp_path / "a")]) == 0
    err = capsys.readouterr().err
    assert f"read corpus: {passages}passage [" in err
    assert f"Lucene index: 100%|██████████| {passages}/{passages}" in err
    assert bm25_main(["index", "--corpus", str(toy_collection["corpus"]), "--output", str(tmp_path / "b"),
                      "--quiet"]) == 0
    assert "read corpus" not in capsys.readouterr().err
    monkeypatch.undo()  # the default: no bar for a build quicker than BAR_DELAY_S
    assert bm25_main(["index", "--corpus", str(toy_collection["corpus"]), "--output", str(tmp_path / "c")]) == 0
    assert "read corpus" not in capsys.readouterr().err


#: the closing counts of Anserini's indexer log (numbers with the JVM locale's thousands separator)
ANSERINI_COUNTS = """00:39:25,002 INFO  [main] index.AbstractIndexer (AbstractIndexer.java:294) - indexed:  {indexed}
00:39:25,002 INFO  [main] index.AbstractIndexer (AbstractIndexer.java:296) - empty:  {empty}
00:39:25,003 INFO  [main] index.AbstractIndexer (AbstractIndexer.java:297) - skipped:  0
"""


@pytest.mark.parametrize(("indexed", "empty", "passages", "refused"), [
    ("12,345", "5", 12350, False), ("12.345", "0", 12345, False), ("1,000", "0", 2000, True), ("2", "1", 4, True),
])
def test_lucene_leaving_passages_out_is_refused(indexed, empty, passages, refused, capsys):
    from ance_ir.bm25.index import check_all_indexed

    log = ANSERINI_COUNTS.format(indexed=indexed, empty=empty)
    if refused:
        with pytest.raises(InputError, match=rf"c.jsonl: Lucene indexed {indexed.replace(',', '')} of its "
                                             rf"{passages} passages \({empty} without text\)"):
            check_all_indexed("c.jsonl", passages, log)
    else:
        check_all_indexed("c.jsonl", passages, log)
    check_all_indexed("c.jsonl", passages, "no counts here")
    assert "note: Anserini's log gives no count" in capsys.readouterr().err


def test_search_rejects_non_index(tmp_path, toy_collection):
    with pytest.raises(Exception, match="not a Lucene index"):
        BM25Searcher(tmp_path)


def test_rag24_mini_bm25_matches_reference(rag24_home, tmp_path):
    """The issue's reference: Pyserini defaults on the rag24-mini test split give nDCG@10 0.698, R@100 0.942."""
    index = tmp_path / "rag24.lucene"
    assert bm25_main(["index", "--corpus", "rag24-mini", "--output", str(index)]) == 0
    run = tmp_path / "bm25.trec"
    assert bm25_main(["search", "--index", str(index), "--topics", "rag24-mini-test", "--output", str(run)]) == 0
    means = evaluate(resolve_qrels("rag24-mini-test"), read_run(run))
    assert means["ndcg_cut_10"] == pytest.approx(0.698, abs=0.005)
    assert means["recall_100"] == pytest.approx(0.942, abs=0.005)


def test_an_interrupted_bm25_search_resumes_to_the_run_of_an_uninterrupted_one(toy_index, toy_collection, tmp_path,
                                                                               monkeypatch):
    monkeypatch.setattr("ance_ir.negatives.resume.QUERY_CHUNK", 1)  # a chunk a query
    args = ["search", "--index", str(toy_index), "--topics", str(toy_collection["topics"]), "--hits", "4"]
    output = tmp_path / "run.trec"
    with monkeypatch.context() as patch:
        interrupt_at_call(patch, BM25Searcher, "search", 2)
        with pytest.raises(KeyboardInterrupt, match="1 of 3 queries retrieved are kept"):
            bm25_main([*args, "--output", str(output)])
    with pytest.raises(InputError, match="holds an unfinished retrieval with a different k1"):
        bm25_main([*args, "--k1", "1.2", "--output", str(output)])
    calls = interrupt_at_call(monkeypatch, BM25Searcher, "search")
    assert bm25_main([*args, "--output", str(output)]) == 0 and len(calls) == 2
    assert bm25_main([*args, "--output", str(tmp_path / "whole.trec")]) == 0
    assert output.read_bytes() == (tmp_path / "whole.trec").read_bytes()
    assert not (tmp_path / "run.trec.partial").exists()
