"""Readers and writers: round trips, Pyserini-compatible run lines, and one clear error per bad input."""

from __future__ import annotations

import gzip
import json

import pytest

from ance_ir.data import (
    InputError,
    Passage,
    atomic_directory,
    atomic_write,
    corpus_texts,
    load_corpus,
    output_lock,
    read_qrels,
    read_run,
    read_topics_tsv,
    write_corpus,
    write_qrels,
    write_run,
)


def test_corpus_jsonl_and_tsv_round_trip(tmp_path):
    passages = [Passage("a", "alpha text", "Title A"), Passage("b", "beta text")]
    write_corpus(passages, tmp_path / "c.jsonl")
    assert load_corpus(tmp_path / "c.jsonl") == passages
    write_corpus(passages, tmp_path / "c.tsv")
    assert load_corpus(tmp_path / "c.tsv") == [Passage("a", "Title A alpha text"), Passage("b", "beta text")]


def test_corpus_texts_are_a_passages_title_and_text_of_every_or_the_asked_docids(tmp_path):
    write_corpus([Passage("a", "alpha text", "Title A"), Passage("b", "beta text")], tmp_path / "c.jsonl")
    assert corpus_texts(tmp_path / "c.jsonl") == {"a": "Title A alpha text", "b": "beta text"}
    assert corpus_texts(tmp_path / "c.jsonl", {"b", "z"}) == {"b": "beta text"}


def test_loading_a_corpus_counts_its_passages_past_the_delay_when_asked(tmp_path, monkeypatch, capsys):
    write_corpus([Passage("a", "alpha"), Passage("b", "beta")], tmp_path / "c.jsonl")
    load_corpus(tmp_path / "c.jsonl", show_progress=True)
    assert capsys.readouterr().err == ""  # quicker than BAR_DELAY_S
    monkeypatch.setattr("ance_ir.data.resume.BAR_DELAY_S", 0)
    assert load_corpus(tmp_path / "c.jsonl", show_progress=True) == load_corpus(tmp_path / "c.jsonl")
    assert capsys.readouterr().err.count("read c.jsonl: 2passage [") == 1  # only with show_progress


def test_gzip_corpus(tmp_path):
    path = tmp_path / "c.jsonl.gz"
    with gzip.open(path, "wt") as f:
        f.write(json.dumps({"id": 7, "contents": "x"}) + "\n")
    assert load_corpus(path) == [Passage("7", "x")]


@pytest.mark.parametrize(
    ("name", "content", "line", "message"),
    [
        ("c.jsonl", '{"id": "a", "contents": "x"}\n{"id": "b", "contents": \n', 2, "malformed JSON"),
        ("c.jsonl", '{"id": "a", "contents": "x"}\n["a", "b"]\n', 2, "expected a JSON object"),
        ("c.jsonl", '{"contents": "x"}\n', 1, '"id"'),
        ("c.jsonl", '{"id": "a"}\n', 1, '"contents"'),
        ("c.jsonl", '{"id": "a", "contents": "x"}\n\n{"id": "a", "contents": "y"}\n', 3, "duplicate id 'a'"),
        ("c.tsv", "a\tx\nb\ty\tz\n", 2, "expected 2 columns, found 3"),
        ("c.tsv", "a\tx\na\ty\n", 2, "duplicate id"),
    ],
)
def test_bad_corpus_lines_name_file_and_line(tmp_path, name, content, line, message):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(InputError) as err:
        load_corpus(path)
    assert str(err.value).startswith(f"{path}:{line}: ")
    assert message in str(err.value)


@pytest.mark.parametrize("reader", [load_corpus, read_topics_tsv, read_qrels, read_run])
def test_missing_and_empty_files(tmp_path, reader):
    with pytest.raises(InputError, match="no such file"):
        reader(tmp_path / "absent.txt")
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(InputError, match="empty"):
        reader(tmp_path / "empty.txt")
    (tmp_path / "blank.txt").write_text("\n  \n")
    with pytest.raises(InputError, match="no content lines"):
        reader(tmp_path / "blank.txt")


def test_topics(tmp_path):
    path = tmp_path / "t.tsv"
    path.write_bytes(b"1\tfirst query\r\n2\tsecond\r\n")
    assert read_topics_tsv(path) == {"1": "first query", "2": "second"}
    path.write_text("1\tq\n2\n")
    with pytest.raises(InputError, match=r":2: expected 2 columns, found 1"):
        read_topics_tsv(path)
    path.write_text("1\tq\n1\tr\n")
    with pytest.raises(InputError, match=r":2: duplicate query id '1'"):
        read_topics_tsv(path)


def test_qrels(tmp_path):
    qrels = {"q1": {"d1": 2, "d2": 0}, "q2": {"d3": 1}}
    write_qrels(qrels, tmp_path / "q.txt")
    assert read_qrels(tmp_path / "q.txt") == qrels
    (tmp_path / "bad.txt").write_text("q1 0 d1 1\nq1 0 d2 high\n")
    with pytest.raises(InputError, match=r"bad.txt:2: relevance 'high' is not an integer"):
        read_qrels(tmp_path / "bad.txt")
    (tmp_path / "dup.txt").write_text("q1 0 d1 1\nq1 0 d1 2\n")
    with pytest.raises(InputError, match=r"dup.txt:2: duplicate judgment"):
        read_qrels(tmp_path / "dup.txt")
    (tmp_path / "cols.txt").write_text("q1 0 d1\n")
    with pytest.raises(InputError, match=r"cols.txt:1: expected 4 columns, found 3"):
        read_qrels(tmp_path / "cols.txt")
    (tmp_path / "underscore.txt").write_text("q1 0 d1 1_0\n")  # int() would read 10
    with pytest.raises(InputError, match=r"underscore.txt:1: relevance '1_0' is not an integer"):
        read_qrels(tmp_path / "underscore.txt")
    (tmp_path / "huge.txt").write_text("q1 0 d1 -1000\nq1 0 d2 99999999999999999999\n")  # pytrec_eval crashes
    with pytest.raises(InputError, match=r"huge.txt:2: relevance 99999999999999999999 is out of range"):
        read_qrels(tmp_path / "huge.txt")
    (tmp_path / "beir.tsv").write_text("query-id\tcorpus-id\tscore\nq1\t\t1\n")
    with pytest.raises(InputError, match=r"beir.tsv:2: empty docid"):
        read_qrels(tmp_path / "beir.tsv")


def test_run_lines_match_pyserini_trec_writer(tmp_path):
    run = {"q1": [("d1", 12.5), ("d2", 3.0)], "q2": [("d9", -1.25)]}
    write_run(run, tmp_path / "r.trec", tag="Anserini")
    expected = ("q1 Q0 d1 1 12.500000 Anserini\nq1 Q0 d2 2 3.000000 Anserini\n"
                "q2 Q0 d9 1 -1.250000 Anserini\n")
    assert (tmp_path / "r.trec").read_text() == expected
    assert read_run(tmp_path / "r.trec") == run


def test_gzip_run_files_are_byte_reproducible(tmp_path, monkeypatch):
    run = {"q1": [("d1", 12.5), ("d2", 3.0)]}
    write_run(run, tmp_path / "a.trec.gz")
    monkeypatch.setattr("time.time", lambda: 2_000_000_000.0)
    write_run(run, tmp_path / "b.trec.gz")
    assert (tmp_path / "a.trec.gz").read_bytes() == (tmp_path / "b.trec.gz").read_bytes()
    assert read_run(tmp_path / "b.trec.gz") == run


def test_bad_run_lines(tmp_path):
    path = tmp_path / "r.trec"
    path.write_text("q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 t\n")
    with pytest.raises(InputError, match=r"r.trec:2: expected 6 columns, found 5"):
        read_run(path)
    path.write_text("q1 Q0 d1 1 2.0 t\nq1 Q0 d1 2 1.0 t\n")
    with pytest.raises(InputError, match=r"r.trec:2: document 'd1' appears twice"):
        read_run(path)
    path.write_text("q1 Q0 d1 one 2.0 t\n")
    with pytest.raises(InputError, match=r"r.trec:1: rank 'one' or score"):
        read_run(path)
    path.write_text("q1 Q0 d1 1 2_0.5 t\n")  # float() would read 20.5
    with pytest.raises(InputError, match=r"r.trec:1: rank '1' or score '2_0.5' is not a number"):
        read_run(path)


def test_failed_write_leaves_no_file(tmp_path):
    target = tmp_path / "out.tsv"
    with pytest.raises(ValueError, match="tab or newline"):
        write_corpus([Passage("a", "ok"), Passage("b", "bad\ttext")], target)
    assert list(tmp_path.iterdir()) == []
    write_run({"q": [("d", 1.0)]}, tmp_path / "r.trec")
    with pytest.raises(ValueError, match="run tag"):
        write_run({"q": [("d", 2.0)]}, tmp_path / "r.trec", tag="has space")
    assert (tmp_path / "r.trec").read_text() == "q Q0 d 1 1.000000 ance-ir\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.trec"]


@pytest.mark.parametrize("write", [atomic_write, atomic_directory], ids=["file", "folder"])
def test_a_failed_write_removes_the_folders_it_made_and_only_those(tmp_path, write):
    (tmp_path / "kept").mkdir()
    with pytest.raises(RuntimeError), write(tmp_path / "kept" / "new" / "deeper" / "out"):
        raise RuntimeError("the writer failed")
    assert [p.name for p in tmp_path.rglob("*")] == ["kept"]
    with write(tmp_path / "kept" / "new" / "out"):
        pass
    assert (tmp_path / "kept" / "new" / "out").exists()


@pytest.mark.parametrize("write", [lambda p: atomic_write(p), lambda p: atomic_directory(p), lambda p: output_lock(p)],
                         ids=["file", "folder", "lock"])
def test_an_output_that_cannot_be_made_is_named_not_its_temporary(write):
    with pytest.raises(OSError) as error, write("/proc/out.trec"):  # /proc exists and takes no new file
        pass
    assert error.value.filename == "/proc/out.trec"
