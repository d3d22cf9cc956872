"""Dataset registry: the rag24-mini build from the ir-axioms sdist, its split, and name resolution."""

from __future__ import annotations

import pytest

from ance_ir.data import InputError, load_corpus
from ance_ir.datasets import rag24, resolve_corpus, resolve_qrels, resolve_topics
from ance_ir.datasets.__main__ import main as datasets_main
from ance_ir.datasets.anserini import canonical


def test_split_is_every_third_sorted_id():
    ids = [f"t{i:02d}" for i in range(10)][::-1]
    train, test = rag24.split_topics(ids)
    assert test == ["t00", "t03", "t06", "t09"]
    assert train == ["t01", "t02", "t04", "t05", "t07", "t08"]


def test_rag24_mini_fetch_and_resolution(rag24_home, capsys):
    corpus = load_corpus(resolve_corpus("rag24-mini"))
    assert len(corpus) == 6011
    train, test = resolve_topics("rag24-mini-train"), resolve_topics("rag24-mini-test")
    assert (len(train), len(test)) == (200, 101)
    assert not set(train) & set(test)
    assert sorted([*train, *test])[0::3] == list(test)
    docids = {p.docid for p in corpus}
    for name, topics in (("rag24-mini-train", train), ("rag24-mini-test", test), ("rag24-mini-test-nist", test)):
        qrels = resolve_qrels(name)
        assert set(qrels) <= set(topics)
        assert all(d in docids for judged in qrels.values() for d in judged)
    assert len(resolve_qrels("rag24-mini-test-nist")) < len(resolve_qrels("rag24-mini-test"))
    datasets_main(["list"])
    listing = capsys.readouterr().out
    assert "rag24-mini" in listing and "[fetched]" in listing


def test_aliases_and_paths(tmp_path):
    assert canonical("dl19") == "dl19-passage"
    assert canonical("beir-v1.0.0-scifact-test") == "beir-v1.0.0-scifact-test"
    assert canonical("nonsense") is None
    with pytest.raises(InputError, match="no such corpus file or dataset name"):
        resolve_corpus(str(tmp_path / "missing.jsonl"))
    with pytest.raises(InputError, match="no such file"):
        resolve_topics(str(tmp_path / "missing.tsv"))


@pytest.mark.slow
def test_dl19_offline_fallback_to_pyserini_wheel(rag24_home):
    topics, qrels = resolve_topics("dl19"), resolve_qrels("dl19-passage")
    assert len(topics) == 43 and len(qrels) == 43
    assert topics["156493"] == "do goldfish grow"
