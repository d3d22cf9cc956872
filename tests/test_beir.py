"""Users' own data end to end: a BEIR-layout folder and Tevatron JSONL through BM25, encode, search and eval.

The BEIR folder's pipeline runs each CLI once as a subprocess, as a user runs it; the rest run in this
process. Bad input in the new formats stops with one ``error: FILE[:LINE]:`` line, exit code 2, and nothing
written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_here

from ance_ir.data import read_qrels, read_run, write_qrels
from ance_ir.eval import evaluate

PASSAGES = {
    "c01": ("Cats", "the cat sat on the mat"),
    "c02": ("Dogs", "dogs chase cats in the park"),
    "c03": ("Baking", "a recipe for baking bread at home"),
    "c04": ("Bread", "bread flour water salt and yeast"),
    "c05": ("Markets", "the stock market fell sharply today"),
    "c06": ("Investing", "investors sold shares as markets dropped"),
    "c07": ("Puppies", "how to train a puppy to sit"),
    "c08": ("Rome", "the history of the roman empire"),
    "c09": ("Sailing", "wind and waves on an open sea voyage"),
    "c10": ("Gardens", "planting tomatoes in a sunny garden"),
    "c11": ("Chess", "an opening gambit sacrifices a pawn"),
    "c12": ("", "volcanoes erupt with lava and ash"),
}
QUERIES = {
    "q1": "cat on a mat",
    "q2": "how to bake bread",
    "q3": "stock market drop",
    "q4": "roman empire history",
    "q5": "sailing lessons",
    "q6": "a query nobody judged",
}
TEST_QRELS = {"q1": {"c01": 1, "c02": 1}, "q2": {"c03": 2, "c04": 1}, "q3": {"c05": 2, "c06": 1, "c09": 0}}
TRAIN_QRELS = {"q4": {"c08": 1}, "q5": {"c09": 1}}


def beir_qrels_text(qrels: dict[str, dict[str, int]]) -> str:
    return "query-id\tcorpus-id\tscore\n" + "".join(
        f"{q}\t{d}\t{g}\n" for q, judged in qrels.items() for d, g in judged.items())


def make_beir_folder(folder: Path) -> Path:
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(
        json.dumps({"_id": d, "title": title, "text": text, "metadata": {}}) + "\n"
        for d, (title, text) in PASSAGES.items()))
    (folder / "queries.jsonl").write_text("".join(
        json.dumps({"_id": q, "text": text, "metadata": {}}) + "\n" for q, text in QUERIES.items()))
    (folder / "qrels" / "test.tsv").write_text(beir_qrels_text(TEST_QRELS))
    (folder / "qrels" / "train.tsv").write_text(beir_qrels_text(TRAIN_QRELS))
    return folder


@pytest.fixture()
def beir_dir(tmp_path) -> Path:
    return make_beir_folder(tmp_path / "mini-beir")


def cli(module: str, *args: object, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "ANCE_IR_HOME": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=300)


def here(module: str, *args: object) -> subprocess.CompletedProcess:
    """``cli`` in this process (the test sets ``ANCE_IR_HOME``)."""
    return run_here(module, *map(str, args))


def ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, result.stderr
    return result


def assert_eval_matches(stdout: str, qrels: dict[str, dict[str, int]], run_path: Path, tmp_path: Path) -> None:
    """``eval --json`` means equal ``evaluate`` on the same run with a TREC-format copy of the qrels."""
    trec_copy = tmp_path / f"{run_path.stem}.qrels.txt"
    write_qrels(qrels, trec_copy)
    assert json.loads(stdout) == evaluate(read_qrels(trec_copy), read_run(run_path))


def test_beir_folder_through_bm25_encode_search_and_eval(beir_dir, tiny_bert_dir, tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("ANCE_IR_HOME", str(home))  # for the commands run in this process (each CLI runs once as one)
    index, run = tmp_path / "bm25.lucene", tmp_path / "bm25.trec"
    ok(cli("ance_ir.bm25", "index", "--corpus", beir_dir, "--output", index, home=home))
    ok(cli("ance_ir.bm25", "search", "--index", index, "--topics", beir_dir, "--output", run, home=home))
    bm25 = read_run(run)
    assert set(bm25) == set(TEST_QRELS)
    assert bm25["q2"][0][0] in {"c03", "c04"} and bm25["q3"][0][0] in {"c05", "c06"}
    assert {d for ranking in bm25.values() for d, _ in ranking} <= set(PASSAGES)
    result = ok(cli("ance_ir.eval", "--qrels", beir_dir, "--run", run, "--json", home=home))
    assert_eval_matches(result.stdout, TEST_QRELS, run, tmp_path)

    # DIR:train picks the train split for topics and qrels
    train_run = tmp_path / "bm25-train.trec"
    ok(here("ance_ir.bm25", "search", "--index", index, "--topics", f"{beir_dir}:train", "--output", train_run))
    assert set(read_run(train_run)) == set(TRAIN_QRELS)
    assert [d for d, _ in read_run(train_run)["q5"]] == ["c09"]  # "sailing" is only in c09's title
    result = ok(here("ance_ir.eval", "--qrels", f"{beir_dir}:train", "--run", train_run, "--json"))
    assert_eval_matches(result.stdout, TRAIN_QRELS, train_run, tmp_path)

    dense_index, dense_run = tmp_path / "dense", tmp_path / "dense.trec"
    ok(cli("ance_ir.encode", "--corpus", beir_dir, "--encoder", tiny_bert_dir, "--output", dense_index,
           "--quiet", "--device", "cpu", home=home))
    searched = ok(cli("ance_ir.search", "--topics", beir_dir, "--index", dense_index, "--output", dense_run,
                      "--hits", "12", "--device", "cpu", home=home))
    dense = read_run(dense_run)
    assert set(dense) == set(TEST_QRELS)
    assert all(sorted(d for d, _ in ranking) == sorted(PASSAGES) for ranking in dense.values())
    assert "ndcg" in searched.stdout.lower()  # the folder's test qrels go with its topics
    result = ok(here("ance_ir.eval", "--qrels", beir_dir, "--run", dense_run, "--json"))
    assert_eval_matches(result.stdout, TEST_QRELS, dense_run, tmp_path)


def write_tevatron_files(folder: Path) -> tuple[Path, Path, Path]:
    """The passages and test queries in Tevatron's JSONL, and the test qrels in TREC format."""
    corpus, queries, qrels = folder / "corpus.jsonl", folder / "queries.jsonl", folder / "qrels.txt"
    corpus.write_text("".join(json.dumps({"docid": d, "title": title, "text": text}) + "\n"
                              for d, (title, text) in PASSAGES.items()))
    queries.write_text("".join(json.dumps({"query_id": q, "query": QUERIES[q]}) + "\n" for q in TEST_QRELS))
    write_qrels(TEST_QRELS, qrels)
    return corpus, queries, qrels


def test_tevatron_jsonl_through_bm25_and_eval(tmp_path, monkeypatch):
    monkeypatch.setenv("ANCE_IR_HOME", str(tmp_path / "home"))
    corpus, queries, qrels = write_tevatron_files(tmp_path)
    index, run = tmp_path / "tev.lucene", tmp_path / "tev.trec"
    ok(here("ance_ir.bm25", "index", "--corpus", corpus, "--output", index))
    ok(here("ance_ir.bm25", "search", "--index", index, "--topics", queries, "--output", run))
    assert set(read_run(run)) == set(TEST_QRELS)
    assert read_run(run)["q2"][0][0] in {"c03", "c04"}
    result = ok(here("ance_ir.eval", "--qrels", qrels, "--run", run, "--json"))
    assert_eval_matches(result.stdout, TEST_QRELS, run, tmp_path)


def test_tevatron_training_data_trains_a_model_that_encodes_searches_and_evaluates(tiny_bert_dir, tmp_path,
                                                                                     monkeypatch):
    """Tevatron's training JSONL (a query with its positive and negative passages) as the groups data source,
    then the trained model through encode, search and eval on a Tevatron corpus and queries."""
    monkeypatch.setenv("ANCE_IR_HOME", str(tmp_path / "home"))
    corpus, queries, qrels = write_tevatron_files(tmp_path)

    def passage(docid: str) -> dict:
        return {"docid": docid, "title": PASSAGES[docid][0], "text": PASSAGES[docid][1]}

    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps({"query_id": q, "query": QUERIES[q],
                                         "positive_passages": [passage(d) for d in judged],
                                         "negative_passages": [passage("c11"), passage("c12")]}) + "\n"
                             for q, judged in TRAIN_QRELS.items()))
    model = tmp_path / "run"
    ok(here("ance_ir.train", "--corpus", corpus, "--model", tiny_bert_dir, "--data-source", "groups", "--groups",
            train, "--negatives", "groups", "--batch-size", "2", "--max-steps", "3", "--refresh-every", "0",
            "--no-refresh-final", "--log-every", "1", "--device", "cpu", "--no-progress", "--output", model))
    assert len([line for line in (model / "log.jsonl").read_text().splitlines() if '"loss"' in line]) == 3

    index, run = tmp_path / "dense", tmp_path / "dense.trec"
    ok(here("ance_ir.encode", "--corpus", corpus, "--encoder", model, "--output", index, "--quiet", "--device", "cpu"))
    ok(here("ance_ir.search", "--topics", queries, "--index", index, "--output", run, "--hits", "12",
            "--device", "cpu"))
    assert all(sorted(d for d, _ in ranking) == sorted(PASSAGES) for ranking in read_run(run).values())
    result = ok(here("ance_ir.eval", "--qrels", qrels, "--run", run, "--json"))
    assert_eval_matches(result.stdout, TEST_QRELS, run, tmp_path)


def assert_one_error(result: subprocess.CompletedProcess, prefix: str, message: str) -> None:
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors == result.stderr.strip().splitlines()[-1:], result.stderr
    assert errors[0].startswith(f"error: {prefix}"), errors[0]
    assert message in errors[0], errors[0]


def test_bad_beir_input_fails_cleanly(beir_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("ANCE_IR_HOME", str(tmp_path / "home"))
    out = tmp_path / "out"
    out.mkdir()

    corpus = beir_dir / "corpus.jsonl"
    good_corpus = corpus.read_text()
    corpus.write_text(good_corpus + json.dumps({"id": "c13", "contents": "pyserini fields"}) + "\n")
    assert_one_error(here("ance_ir.bm25", "index", "--corpus", beir_dir, "--output", out / "idx"),
                     f"{corpus}:13: ", 'missing or empty "_id"')
    corpus.write_text(good_corpus.replace('"_id": "c02"', '"_id": "c02",,'))
    assert_one_error(here("ance_ir.bm25", "index", "--corpus", beir_dir, "--output", out / "idx"),
                     f"{corpus}:2: ", "malformed JSON")
    corpus.write_text(good_corpus)

    qrels = beir_dir / "qrels" / "test.tsv"
    good_qrels = qrels.read_text()
    qrels.write_text(good_qrels.replace("corpus-id", "doc-id", 1))
    assert_one_error(here("ance_ir.bm25", "search", "--index", out / "none", "--topics", beir_dir,
                          "--output", out / "run.trec"),
                     f"{qrels}:1: ", "expected BEIR's header")
    qrels.write_text(good_qrels.replace("q2\tc03\t2\n", "q2\tc03\n"))
    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 c01 1 1.000000 x\n")
    assert_one_error(here("ance_ir.eval", "--qrels", beir_dir, "--run", run),
                     f"{qrels}:4: ", "expected 3 columns, found 2")
    qrels.write_text(good_qrels)

    queries = beir_dir / "queries.jsonl"
    good_queries = queries.read_text()
    queries.write_text(good_queries.replace('"text": "how to bake bread"', '"text": null'))
    assert_one_error(here("ance_ir.bm25", "search", "--index", out / "none", "--topics", beir_dir,
                          "--output", out / "run.trec"),
                     f"{queries}:2: ", 'missing or non-string "text"')
    queries.write_text(good_queries)

    corpus.unlink()
    assert_one_error(here("ance_ir.bm25", "index", "--corpus", beir_dir, "--output", out / "idx"),
                     f"{corpus}: ", "no such file")
    assert_one_error(here("ance_ir.encode", "--corpus", beir_dir, "--encoder", "unused", "--output", out / "dense"),
                     f"{corpus}: ", "no such file")
    assert_one_error(here("ance_ir.bm25", "search", "--index", out / "none", "--topics", f"{beir_dir}:dev",
                          "--output", out / "run.trec"),
                     f"{beir_dir / 'qrels' / 'dev.tsv'}: ", "splits here: test, train")
    assert sorted(p.name for p in out.iterdir()) == []
