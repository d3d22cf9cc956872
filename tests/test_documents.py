"""Documents for FirstP/MaxP: derived from segments, split into token windows, passage runs pooled."""

from __future__ import annotations

import json
import subprocess

import pytest
from conftest import run_here
from transformers import AutoTokenizer

from ance_ir.data import read_run
from ance_ir.data.corpus import Passage, load_corpus
from ance_ir.data.qrels import read_qrels
from ance_ir.documents import document_id, document_qrels, documents_from_segments, pool_run
from ance_ir.documents.passages import split_document

SEGMENTS = [
    Passage("doc_a#1_200", "second part"),
    Passage("doc_b#0_5", "only part", "B title"),
    Passage("doc_a#0_100", "first part", "A title"),
    Passage("plain", "no delimiter"),
]


def test_documents_join_their_segments_in_segment_order():
    documents = documents_from_segments(SEGMENTS)
    assert documents == [Passage("doc_a", "first part second part", "A title"),
                         Passage("doc_b", "only part", "B title"), Passage("plain", "no delimiter")]
    assert document_id("doc_a#1_200") == "doc_a" and document_id("plain") == "plain"


def test_a_document_is_as_relevant_as_its_best_segment():
    qrels = {"q1": {"doc_a#0_1": 1, "doc_a#1_2": 3, "doc_b#0_1": 0}, "q2": {"doc_a#1_2": 0}}
    assert document_qrels(qrels) == {"q1": {"doc_a": 3, "doc_b": 0}, "q2": {"doc_a": 0}}


def test_windows_cut_the_documents_own_text_by_tokens(tiny_bert_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_bert_dir)
    document = Passage("d", "the cat sat on the mat", "T")
    windows = split_document(document, tokenizer, length=4, stride=2)
    # 6 tokens: starts 0, 2 and the last window ending at the document's end
    assert [w.contents for w in windows] == ["the cat sat on", "sat on the mat"]
    assert [w.docid for w in windows] == ["d#0", "d#1"] and {w.title for w in windows} == {"T"}
    windows = split_document(Passage("d", "the cat sat on the mat dogs"), tokenizer, length=3, stride=3)
    assert [w.contents for w in windows] == ["the cat sat", "on the mat", "the mat dogs"]
    first = split_document(document, tokenizer, length=3, stride=3, max_passages=1)
    assert [w.contents for w in first] == ["the cat sat"]
    assert [w.contents for w in split_document(Passage("d", "the cat"), tokenizer, 4, 4)] == ["the cat"]


def test_max_and_first_passage_pooling():
    run = {"q": [("a#1", 9.0), ("b#0", 8.0), ("a#0", 7.0), ("c#2", 6.0), ("c#0_5", 1.0)]}
    assert pool_run(run, "max", hits=10) == {"q": [("a", 9.0), ("b", 8.0), ("c", 6.0)]}
    assert pool_run(run, "max", hits=2) == {"q": [("a", 9.0), ("b", 8.0)]}
    assert pool_run(run, "first", hits=10) == {"q": [("b", 8.0), ("a", 7.0), ("c", 1.0)]}
    with pytest.raises(ValueError, match="unknown pooling"):
        pool_run(run, "mean")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return run_here("ance_ir.documents", *args)


def test_cli_derives_splits_and_pools(tmp_path, tiny_bert_dir):
    corpus = tmp_path / "segments.jsonl"
    corpus.write_text("".join(json.dumps({"id": p.docid, "contents": p.contents}) + "\n" for p in SEGMENTS))
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 doc_a#0_100 1\nq1 0 doc_a#1_200 2\n")
    out = tmp_path / "docs"
    assert _cli("derive", "--corpus", str(corpus), "--qrels", str(qrels), "--output", str(out)).returncode == 0
    assert [p.docid for p in load_corpus(out / "corpus.jsonl")] == ["doc_a", "doc_b", "plain"]
    assert read_qrels(out / "qrels.qrels.txt") == {"q1": {"doc_a": 2}}
    passages = tmp_path / "passages.jsonl"
    done = _cli("split", "--corpus", str(out / "corpus.jsonl"), "--tokenizer", str(tiny_bert_dir), "--length", "1",
                "--output", str(passages))
    assert done.returncode == 0, done.stderr
    assert [p.docid for p in load_corpus(passages)][:4] == ["doc_a#0", "doc_a#1", "doc_a#2", "doc_a#3"]
    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 doc_a#1 1 3.0 x\nq1 Q0 doc_b#0 2 2.0 x\nq1 Q0 doc_a#0 3 1.0 x\n")
    pooled = tmp_path / "pooled.trec"
    assert _cli("pool", "--run", str(run), "--pooling", "first", "--output", str(pooled)).returncode == 0
    assert read_run(pooled) == {"q1": [("doc_b", 2.0), ("doc_a", 1.0)]}


def test_cli_bad_input_is_one_line_and_writes_nothing(tmp_path):
    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 a#0 1 1.0 x\nq1 Q0 a#1 2\n")
    pooled = tmp_path / "pooled.trec"
    done = _cli("pool", "--run", str(run), "--output", str(pooled))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"error: {run}:2:") and not pooled.exists()
    assert list(tmp_path.iterdir()) == [run]


def test_split_shows_a_bar_past_its_delay_unless_quiet(tmp_path, tiny_bert_dir, monkeypatch, capsys):
    from ance_ir.documents.__main__ import main as documents_main

    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"doc{i}", "contents": "the cat sat on the mat"}) + "\n"
                              for i in range(3)))
    args = ["split", "--corpus", str(corpus), "--tokenizer", str(tiny_bert_dir), "--length", "2"]
    monkeypatch.setattr("ance_ir.data.resume.BAR_DELAY_S", 0)
    assert documents_main([*args, "--output", str(tmp_path / "a.jsonl")]) == 0
    assert "split: 3document [" in capsys.readouterr().err
    assert documents_main([*args, "--output", str(tmp_path / "b.jsonl"), "--quiet"]) == 0
    assert "split:" not in capsys.readouterr().err
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
