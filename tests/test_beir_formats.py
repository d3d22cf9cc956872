"""Readers for BEIR's and Tevatron's layouts, dataset folders as names, and ``irds:NAME`` without network."""

from __future__ import annotations

import json
import sys
import types

import pytest
from test_beir import PASSAGES, QUERIES, TEST_QRELS, TRAIN_QRELS, make_beir_folder

from ance_ir.data import InputError, Passage, load_corpus, read_qrels, read_topics
from ance_ir.datasets import qrels_for_topics, resolve_corpus, resolve_qrels, resolve_topics


def jsonl(*objs: object) -> str:
    return "".join(json.dumps(o) + "\n" for o in objs)


def test_corpus_layouts_are_told_apart_by_the_first_line(tmp_path):
    beir = tmp_path / "beir.jsonl"
    beir.write_text(jsonl({"_id": "a", "title": "Title A", "text": "alpha", "metadata": {"x": 1}},
                          {"_id": 7, "title": "", "text": "seven"}, {"_id": "n", "title": None, "text": "none"}))
    assert load_corpus(beir) == [Passage("a", "alpha", "Title A"), Passage("7", "seven"), Passage("n", "none")]
    assert [p.text for p in load_corpus(beir)] == ["Title A alpha", "seven", "none"]
    tevatron = tmp_path / "tevatron.jsonl"
    tevatron.write_text(jsonl({"docid": "d1", "title": "T", "text": "body"}, {"docid": "d2", "text": "b2"}))
    assert load_corpus(tevatron) == [Passage("d1", "body", "T"), Passage("d2", "b2")]
    pyserini = tmp_path / "pyserini.jsonl"
    pyserini.write_text(jsonl({"id": "p", "contents": "c", "title": "t"}))
    assert load_corpus(pyserini) == [Passage("p", "c", "t")]


@pytest.mark.parametrize(
    ("content", "line", "message"),
    [
        (jsonl({"_id": "a", "text": "x"}, {"id": "b", "contents": "y"}), 2, 'missing or empty "_id" (BEIR corpus'),
        (jsonl({"_id": "a", "text": "x"}, {"_id": "b", "title": "t"}), 2, 'missing or non-string "text" (BEIR'),
        (jsonl({"_id": "a", "text": "x"}, {"_id": "b", "text": "y", "title": 3}), 2, 'non-string "title"'),
        (jsonl({"_id": "a", "text": "x"}, {"_id": "a", "text": "y"}), 2, "duplicate id 'a'"),
        (jsonl({"_id": "", "text": "x"}), 1, 'missing or empty "_id"'),
        (jsonl({"docid": "a", "text": "x"}, {"docid": "b", "contents": "y"}), 2, '"text" (Tevatron corpus'),
        (jsonl({"title": "x", "text": "y"}), 1, 'missing or empty "id"'),
        (jsonl({"id": True, "contents": "y"}), 1, 'missing or empty "id"'),  # not the id "True"
    ],
)
def test_bad_beir_and_tevatron_corpus_lines(tmp_path, content, line, message):
    path = tmp_path / "corpus.jsonl"
    path.write_text(content)
    with pytest.raises(InputError) as err:
        load_corpus(path)
    assert str(err.value).startswith(f"{path}:{line}: ")
    assert message in str(err.value)


def test_topic_layouts(tmp_path):
    beir = tmp_path / "queries.jsonl"
    beir.write_text(jsonl({"_id": "1", "text": " first ", "metadata": {}}, {"_id": 2, "text": "second"}))
    assert read_topics(beir) == {"1": "first", "2": "second"}
    tevatron = tmp_path / "tevatron.jsonl"
    tevatron.write_text(jsonl({"query_id": "q", "query": "a query", "positive_passages": []}))
    assert read_topics(tevatron) == {"q": "a query"}
    tsv = tmp_path / "topics.tsv"
    tsv.write_text("1\tfirst\n2\tsecond\n")
    assert read_topics(tsv) == {"1": "first", "2": "second"}


@pytest.mark.parametrize(
    ("content", "line", "message"),
    [
        ('{"_id": "1", "text": "a"}\n{"_id": "2", "text": \n', 2, "malformed JSON"),
        (jsonl({"_id": "1", "text": "a"}, {"query_id": "2", "query": "b"}), 2, 'missing or empty "_id"'),
        (jsonl({"query_id": "1", "query": "a"}, {"query_id": "2"}), 2, 'missing or non-string "query" (Tevatron'),
        (jsonl({"qid": "1", "query": "a"}), 1, 'expected BEIR query fields ("_id", "text")'),
        (jsonl({"_id": "1", "text": "a"}, {"_id": "1", "text": "b"}), 2, "duplicate query id '1'"),
        (jsonl({"_id": "1", "text": "a"}, {"_id": False, "text": "b"}), 2, 'missing or empty "_id"'),
        (jsonl({"_id": "1", "text": "a"}) + '["2", "b"]\n', 2, "expected a JSON object"),
    ],
)
def test_bad_query_lines(tmp_path, content, line, message):
    path = tmp_path / "queries.jsonl"
    path.write_text(content)
    with pytest.raises(InputError) as err:
        read_topics(path)
    assert str(err.value).startswith(f"{path}:{line}: ")
    assert message in str(err.value)


def test_beir_qrels(tmp_path):
    path = tmp_path / "test.tsv"
    path.write_text("query-id\tcorpus-id\tscore\r\nq1\td 1\t2\nq1\td2\t0\n\nq2\td3\t-1\n")
    assert read_qrels(path) == {"q1": {"d 1": 2, "d2": 0}, "q2": {"d3": -1}}


@pytest.mark.parametrize(
    ("content", "line", "message"),
    [
        ("query-id\tdoc-id\tscore\nq1\td1\t1\n", 1, "expected BEIR's header 'query-id<TAB>corpus-id<TAB>score'"),
        ("query-id\tcorpus-id\nq1\td1\n", 1, "expected BEIR's header"),
        ("qid\tdocid\tscore\nq1\td1\t1\n", 1, "expected 4 columns, found 3 (TREC qrels"),
        ("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\n", 3, "expected 3 columns, found 2"),
        ("query-id\tcorpus-id\tscore\nq1\td1\t1\t0\n", 2, "expected 3 columns, found 4"),
        ("query-id\tcorpus-id\tscore\nq1 d1 1\n", 2, "expected 3 columns, found 1"),
        ("query-id\tcorpus-id\tscore\nq1\td1\thigh\n", 2, "relevance 'high' is not an integer"),
        ("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td1\t2\n", 3, "duplicate judgment"),
    ],
)
def test_bad_beir_qrels(tmp_path, content, line, message):
    path = tmp_path / "test.tsv"
    path.write_text(content)
    with pytest.raises(InputError) as err:
        read_qrels(path)
    assert str(err.value).startswith(f"{path}:{line}: ")
    assert message in str(err.value)


def test_header_only_beir_qrels(tmp_path):
    path = tmp_path / "test.tsv"
    path.write_text("query-id\tcorpus-id\tscore\n")
    with pytest.raises(InputError, match="header and no judgments"):
        read_qrels(path)


def test_folder_is_one_name_for_corpus_topics_and_qrels(tmp_path):
    folder = make_beir_folder(tmp_path / "data")
    assert resolve_corpus(str(folder)) == folder / "corpus.jsonl"
    assert resolve_corpus(f"{folder}:train") == folder / "corpus.jsonl"
    assert [p.docid for p in load_corpus(resolve_corpus(str(folder)))] == list(PASSAGES)
    assert resolve_topics(str(folder)) == {q: QUERIES[q] for q in TEST_QRELS}
    assert resolve_topics(f"{folder}:train") == {q: QUERIES[q] for q in TRAIN_QRELS}
    assert resolve_qrels(str(folder)) == resolve_qrels(f"{folder}:test") == TEST_QRELS
    assert resolve_qrels(f"{folder}:train") == qrels_for_topics(f"{folder}:train") == TRAIN_QRELS
    assert qrels_for_topics(str(folder / "queries.jsonl")) is None
    assert resolve_topics(str(folder / "queries.jsonl")) == QUERIES


def test_folder_errors(tmp_path):
    folder = make_beir_folder(tmp_path / "data")
    with pytest.raises(InputError, match=r"dev.tsv: no such file \(splits here: test, train\)"):
        resolve_topics(f"{folder}:dev")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tc01\t1\nq9\tc02\t1\n")
    with pytest.raises(InputError, match=r"test.tsv: 1 judged queries are not in .*queries.jsonl \(first: 'q9'\)"):
        resolve_topics(str(folder))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError) as err:
        resolve_corpus(str(empty))
    assert str(err.value).startswith(f"{empty / 'corpus.jsonl'}: no such file (a dataset folder in BEIR layout")
    with pytest.raises(InputError, match="queries.jsonl: no such file"):
        (empty / "qrels").mkdir()
        (empty / "qrels" / "test.tsv").write_text("q1 0 d1 1\n")
        resolve_topics(str(empty))


def test_gzipped_folder_files(tmp_path):
    import gzip

    folder = make_beir_folder(tmp_path / "data")
    for name in ("corpus.jsonl", "queries.jsonl"):
        (folder / f"{name}.gz").write_bytes(gzip.compress((folder / name).read_bytes()))
        (folder / name).unlink()
    assert resolve_corpus(str(folder)) == folder / "corpus.jsonl.gz"
    assert len(load_corpus(resolve_corpus(str(folder)))) == len(PASSAGES)
    assert list(resolve_topics(str(folder))) == list(TEST_QRELS)


def test_irds_without_the_package_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ir_datasets", None)  # import ir_datasets raises ImportError
    for resolve in (resolve_corpus, resolve_topics, resolve_qrels):
        with pytest.raises(InputError) as err:
            resolve("irds:beir/scifact/test")
        assert str(err.value) == ("irds:beir/scifact/test: needs the ir_datasets package, which is not installed: "
                                  "pip install ir_datasets (or pip install 'ance-ir[irds]')")


class _Offline:
    """An ir_datasets dataset whose files are not cached and cannot be downloaded."""

    def has_docs(self) -> bool:
        return True

    has_queries = has_qrels = has_docs

    def _fail(self):
        raise ConnectionError("Max retries exceeded with url: https://example.org/scifact.zip")
        yield

    docs_iter = queries_iter = qrels_iter = _fail


def test_irds_offline_is_one_clear_line(monkeypatch, tmp_path):
    fake = types.ModuleType("ir_datasets")
    fake.load = lambda name: _Offline() if name == "beir/scifact/test" else {}[name]
    monkeypatch.setitem(sys.modules, "ir_datasets", fake)
    monkeypatch.setenv("ANCE_IR_HOME", str(tmp_path))
    for resolve, what in ((resolve_topics, "queries"), (resolve_qrels, "qrels"), (resolve_corpus, "documents")):
        with pytest.raises(InputError) as err:
            resolve("irds:beir/scifact/test")
        message = str(err.value)
        assert message.startswith(f"irds:beir/scifact/test: ir_datasets could not load the {what} "
                                  "(ConnectionError: Max retries exceeded")
        assert "needs network access once" in message and "\n" not in message
    assert not list(tmp_path.rglob("*.jsonl*"))  # no half-written corpus export
    with pytest.raises(InputError, match="ir_datasets has no dataset 'nope'"):
        resolve_topics("irds:nope")


def test_irds_export_and_topics_with_a_stand_in_package(monkeypatch, tmp_path):
    from collections import namedtuple

    Doc = namedtuple("Doc", "doc_id text title")
    Query = namedtuple("Query", "query_id text")
    Qrel = namedtuple("Qrel", "query_id doc_id relevance iteration")

    class Dataset:
        def has_docs(self):
            return True

        has_queries = has_qrels = has_docs

        def docs_iter(self):
            return iter([Doc("d1", "body one", "Title"), Doc("d2", "body two", "")])

        def queries_iter(self):
            return iter([Query("1", "a question ")])

        def qrels_iter(self):
            return iter([Qrel("1", "d1", 1, "0")])

    fake = types.ModuleType("ir_datasets")
    fake.load = lambda name: Dataset()
    monkeypatch.setitem(sys.modules, "ir_datasets", fake)
    monkeypatch.setenv("ANCE_IR_HOME", str(tmp_path))
    corpus = resolve_corpus("irds:beir/toy/test")
    assert corpus == tmp_path / "irds" / "beir__toy__test" / "corpus.jsonl"
    assert load_corpus(corpus) == [Passage("d1", "body one", "Title"), Passage("d2", "body two")]
    assert resolve_topics("irds:beir/toy/test") == {"1": "a question"}
    assert qrels_for_topics("irds:beir/toy/test") == {"1": {"d1": 1}}
