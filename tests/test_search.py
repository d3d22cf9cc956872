"""Dense and hybrid search end to end on the toy collection with a tiny random BERT."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import assert_refused, assert_same_run, interrupt_at_call, run_here, run_main

from ance_ir.data import read_run, read_topics_tsv
from ance_ir.search.__main__ import main as search_main


@pytest.fixture()
def toy_dense_index(toy_collection, tiny_bert_dir, tmp_path):
    from ance_ir.encode.__main__ import main as encode_main

    out = tmp_path / "toy.dense"
    assert encode_main(["--corpus", str(toy_collection["corpus"]), "--encoder", str(tiny_bert_dir),
                        "--output", str(out), "--pooling", "mean", "--quiet"]) == 0
    return out


def test_search_writes_run_and_uses_meta_encoder(toy_dense_index, toy_collection, tmp_path, capsys):
    out = tmp_path / "dense.trec"
    assert search_main(["--topics", str(toy_collection["topics"]), "--index", str(toy_dense_index),
                        "--output", str(out), "--hits", "5", "--qrels", str(toy_collection["qrels"])]) == 0
    run = read_run(out)
    assert set(run) == {"q1", "q2", "q3"} and all(len(hits) == 5 for hits in run.values())
    assert out.read_text().split("\n")[0].endswith(" dense")
    assert "ndcg@10" in capsys.readouterr().out


def test_a_search_of_more_than_one_batch_shows_a_bar_unless_quiet(toy_dense_index, toy_collection, tmp_path,
                                                                   capsys):
    args = ["--topics", str(toy_collection["topics"]), "--index", str(toy_dense_index), "--hits", "5"]
    assert search_main([*args, "--output", str(tmp_path / "one.trec")]) == 0  # 3 queries, one batch: no bar
    assert "search:" not in capsys.readouterr().err
    assert search_main([*args, "--output", str(tmp_path / "three.trec"), "--batch-size", "1"]) == 0
    assert "search: 100%" in capsys.readouterr().err
    assert_same_run(read_run(tmp_path / "three.trec"), read_run(tmp_path / "one.trec"))
    assert search_main([*args, "--output", str(tmp_path / "quiet.trec"), "--batch-size", "1", "--quiet"]) == 0
    assert "search:" not in capsys.readouterr().err


def test_ef_search_sets_an_hnsw_index_and_is_refused_for_a_flat_one(toy_dense_index, toy_collection, tiny_bert_dir,
                                                                    tmp_path, capsys):
    from ance_ir.encode.__main__ import main as encode_main

    hnsw = tmp_path / "toy.hnsw"
    assert encode_main(["--corpus", str(toy_collection["corpus"]), "--encoder", str(tiny_bert_dir), "--output",
                        str(hnsw), "--pooling", "mean", "--index-type", "hnsw", "--quiet"]) == 0
    topics, out = str(toy_collection["topics"]), tmp_path / "hnsw.trec"
    code, err = run_main(search_main, "--topics", topics, "--index", str(hnsw), "--output", str(out), "--hits", "5",
                         "--ef-search", "64", capsys=capsys)
    assert code == 0 and "note:" not in err, err
    flat = tmp_path / "flat.trec"
    assert search_main(["--topics", topics, "--index", str(toy_dense_index), "--output", str(flat), "--hits", "5"]) == 0
    ranked = {q: [d for d, _ in hits] for q, hits in read_run(out).items()}
    assert ranked == {q: [d for d, _ in hits] for q, hits in read_run(flat).items()}  # the whole toy graph: exact
    code, err = run_main(search_main, "--topics", topics, "--index", str(hnsw), "--output", str(out), "--hits", "5",
                         "--ef-search", "2", capsys=capsys)
    assert code == 0 and "searched with ef_search 2, below --hits 5" in err, err
    refused = tmp_path / "refused.trec"
    assert_refused(run_main(search_main, "--topics", topics, "--index", str(toy_dense_index), "--output",
                            str(refused), "--ef-search", "8", capsys=capsys),
                   "ef_search applies to an HNSW index; this one is flat", refused)


def test_pyserini_faiss_searcher_returns_the_same_top10(toy_dense_index, toy_collection, tiny_bert_dir, tmp_path):
    from pyserini.search.faiss import FaissSearcher

    from ance_ir.modeling.pyserini_adapters import AnceIrQueryEncoder

    out = tmp_path / "ours.trec"
    search_main(["--topics", str(toy_collection["topics"]), "--index", str(toy_dense_index),
                 "--output", str(out), "--hits", "10"])
    ours = read_run(out)
    topics = read_topics_tsv(toy_collection["topics"])
    searcher = FaissSearcher(str(toy_dense_index), AnceIrQueryEncoder(str(tiny_bert_dir), pooling="mean"))
    theirs = searcher.batch_search(list(topics.values()), list(topics), k=10)
    for qid in topics:
        assert [h.docid for h in theirs[qid]] == [d for d, _ in ours[qid]]
        assert [float(h.score) for h in theirs[qid]] == pytest.approx([s for _, s in ours[qid]], abs=1e-5)
        single = searcher.search(topics[qid], k=10)
        assert [h.docid for h in single] == [d for d, _ in ours[qid]]


def test_hybrid_interpolation_and_rrf(toy_dense_index, toy_collection, tmp_path, capsys):
    from ance_ir.bm25 import build_lucene_index

    lucene = build_lucene_index(toy_collection["corpus"], tmp_path / "toy.lucene")
    base = ["--topics", str(toy_collection["topics"]), "--index", str(toy_dense_index), "--hits", "8"]
    search_main([*base, "--output", str(tmp_path / "dense.trec")])
    search_main([*base, "--output", str(tmp_path / "bm25only.trec"), "--bm25-index", str(lucene),
                 "--alpha", "1.0"])
    search_main([*base, "--output", str(tmp_path / "rrf.trec"), "--bm25-index", str(lucene), "--fusion", "rrf"])
    dense, bm25_only, rrf = (read_run(tmp_path / f"{n}.trec") for n in ("dense", "bm25only", "rrf"))
    assert bm25_only["q2"][0][0] == "d3"  # alpha=1 keeps only BM25's scores: "bread" is lexical
    assert {d for d, _ in rrf["q1"]} >= {d for d, _ in dense["q1"]} & {d for d, _ in bm25_only["q1"]}
    assert all(0 < s < 2 / 61 for hits in rrf.values() for _, s in hits)

    # --alpha means the same in both CLIs: search's hybrid equals fusion of the BM25 run (first) and the dense run
    from ance_ir.bm25.__main__ import main as bm25_main
    from ance_ir.fusion.__main__ import main as fusion_main

    bm25_main(["search", "--index", str(lucene), "--topics", str(toy_collection["topics"]), "--hits", "8",
               "--output", str(tmp_path / "bm25.trec")])
    search_main([*base, "--output", str(tmp_path / "hybrid.trec"), "--bm25-index", str(lucene), "--alpha", "0.3"])
    fusion_main(["--runs", str(tmp_path / "bm25.trec"), str(tmp_path / "dense.trec"), "--method", "interpolation",
                 "--alpha", "0.3", "--hits", "8", "--output", str(tmp_path / "fused.trec")])
    hybrid, fused = read_run(tmp_path / "hybrid.trec"), read_run(tmp_path / "fused.trec")
    for qid, ranking in hybrid.items():
        assert dict(fused[qid]) == pytest.approx(dict(ranking), abs=2e-6)
    # and with BM25 settings of its own: the same as bm25 search with them
    bm25_main(["search", "--index", str(lucene), "--topics", str(toy_collection["topics"]), "--hits", "8",
               "--k1", "1.5", "--b", "0.9", "--output", str(tmp_path / "bm25.tuned.trec")])
    search_main([*base, "--output", str(tmp_path / "hybrid.tuned.trec"), "--bm25-index", str(lucene),
                 "--alpha", "1.0", "--k1", "1.5", "--b", "0.9"])
    tuned = read_run(tmp_path / "bm25.tuned.trec")
    assert tuned != read_run(tmp_path / "bm25.trec")
    for qid, ranking in read_run(tmp_path / "hybrid.tuned.trec").items():  # alpha 1: BM25's scores
        assert {d: s for d, s in ranking if d in dict(tuned[qid])} == pytest.approx(dict(tuned[qid]), abs=2e-6)

    # a BM25 index of another corpus (the same passages but one, renamed) is refused, not fused
    other = tmp_path / "other.jsonl"
    other.write_text(toy_collection["corpus"].read_text().replace('"d1"', '"x1"'))
    other_lucene = build_lucene_index(other, tmp_path / "other.lucene")
    assert_refused(run_main(search_main, *base, "--output", str(tmp_path / "mixed.trec"), "--bm25-index",
                            str(other_lucene), capsys=capsys),
                   f"{other_lucene}: has no document 'd1', which {toy_dense_index} retrieved", tmp_path / "mixed.trec")


def test_pooling_and_normalize_flags_for_an_index_without_meta(toy_dense_index, toy_collection, tiny_bert_dir,
                                                                tmp_path, capsys):
    import shutil

    pyserini_like = tmp_path / "pyserini.dense"  # what Pyserini writes: index + docid, no meta.json
    pyserini_like.mkdir()
    for name in ("index", "docid"):
        shutil.copy(toy_dense_index / name, pyserini_like / name)
    base = ["--topics", str(toy_collection["topics"]), "--hits", "8"]

    def search(index, name, *flags):
        search_main([*base, "--index", str(index), "--output", str(tmp_path / name), *flags])
        return read_run(tmp_path / name)

    with_meta = search(toy_dense_index, "meta.trec")  # meta.json: this encoder, mean pooling, not normalised
    base += ["--encoder", str(tiny_bert_dir)]
    capsys.readouterr()
    mean = search(pyserini_like, "mean.trec", "--pooling", "mean")
    cls = search(pyserini_like, "cls.trec", "--pooling", "cls")
    normalized = search(pyserini_like, "norm.trec", "--pooling", "mean", "--normalize")
    assert "warning" not in capsys.readouterr().err  # no meta.json, nothing to disagree with
    for qid, ranking in with_meta.items():
        assert [d for d, _ in mean[qid]] == [d for d, _ in ranking]
        assert [s for _, s in mean[qid]] == pytest.approx([s for _, s in ranking], abs=1e-5)
    assert cls != mean and normalized != mean  # the flags reach the query encoder

    # an index with a meta.json that says otherwise: the flags win, with one warning line naming both values
    overridden = search(toy_dense_index, "override.trec", "--pooling", "cls", "--no-normalize")
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, err
    assert "meta.json" in warnings[0] and "pooling mean" in warnings[0] and "--pooling cls" in warnings[0]
    assert "normalize" not in warnings[0].split("meta.json:")[1]  # --no-normalize agrees with the index
    assert overridden == cls
    search(toy_dense_index, "both.trec", "--pooling", "cls", "--normalize")
    warning = next(line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:"))
    assert "pooling mean, normalize false; searching with --pooling cls, --normalize" in warning


def test_the_encoder_named_searches_with_the_index_settings_and_a_bad_tag_is_refused_first(
        toy_dense_index, toy_collection, tiny_bert_dir, tmp_path, capsys):
    base = ["--topics", str(toy_collection["topics"]), "--index", str(toy_dense_index), "--hits", "8"]
    assert search_main([*base, "--output", str(tmp_path / "meta.trec")]) == 0
    assert search_main([*base, "--encoder", str(tiny_bert_dir), "--output", str(tmp_path / "named.trec")]) == 0
    assert read_run(tmp_path / "named.trec") == read_run(tmp_path / "meta.trec")  # mean pooling, as encoded
    spaced = tmp_path / "my run.trec"
    assert_refused(run_main(search_main, *base, "--index", "/nonexistent", "--output", str(spaced), capsys=capsys),
                   "run tag 'my run' must be non-empty and contain no whitespace", spaced)


def test_missing_index_and_offline_prebuilt_name(toy_collection, tmp_path):
    args = ["ance_ir.search", "--topics", str(toy_collection["topics"]), "--output", str(tmp_path / "x.trec"),
            "--index"]
    missing = run_here(*args, str(tmp_path / "nope"))
    assert missing.returncode == 2 and f"{tmp_path / 'nope'}: no such index folder" in missing.stderr
    prebuilt = subprocess.run([sys.executable, "-m", *args, "msmarco-v1-passage.tct_colbert-v2-hnp", "--encoder",
                               "minilm"], capture_output=True, text=True,
                              env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert prebuilt.returncode == 2, prebuilt.stderr[-500:]
    assert "could not download Pyserini prebuilt index" in prebuilt.stderr
    assert not (tmp_path / "x.trec").exists()


def test_an_interrupted_search_resumes_to_the_run_of_an_uninterrupted_one(toy_dense_index, toy_collection, tmp_path,
                                                                          monkeypatch, capsys):
    from ance_ir.data import InputError
    from ance_ir.search.dense import DenseSearcher

    monkeypatch.setattr("ance_ir.negatives.resume.QUERY_CHUNK", 1)  # a chunk a query
    args = ["--topics", str(toy_collection["topics"]), "--index", str(toy_dense_index), "--hits", "5"]
    output = tmp_path / "run.trec"
    with monkeypatch.context() as patch:
        interrupt_at_call(patch, DenseSearcher, "search", 2)
        with pytest.raises(KeyboardInterrupt, match="1 of 3 queries retrieved are kept in .*run.trec.partial"):
            search_main([*args, "--output", str(output)])
    assert not output.exists() and (tmp_path / "run.trec.partial" / "ranking-00000.jsonl").is_file()
    with pytest.raises(InputError, match="holds an unfinished retrieval with a different depth"):
        search_main([*args[:-1], "6", "--output", str(output)])
    from ance_ir.bm25 import build_lucene_index

    lucene = build_lucene_index(toy_collection["corpus"], tmp_path / "toy.lucene")
    with pytest.raises(InputError, match="holds an unfinished retrieval with a different bm25_index"):
        search_main([*args, "--bm25-index", str(lucene), "--output", str(output)])  # hybrid is not switched on
    calls = interrupt_at_call(monkeypatch, DenseSearcher, "search")
    assert search_main([*args, "--output", str(output)]) == 0
    assert len(calls) == 2 and "resuming from the chunks retrieved" in capsys.readouterr().err
    assert not (tmp_path / "run.trec.partial").exists()
    assert search_main([*args, "--output", str(tmp_path / "whole.trec")]) == 0
    assert output.read_bytes() == (tmp_path / "whole.trec").read_bytes().replace(b" whole", b" run")


def test_the_resume_record_of_an_index_without_meta_json_follows_its_files(toy_dense_index, tmp_path, tiny_bert_dir):
    """A Pyserini-built index has no meta.json: its files' sizes and times identify it, so one encoded again in place
    is not taken for the one an interrupted search began with."""
    import os
    import shutil

    from ance_ir.modeling.kinds import load_model
    from ance_ir.search.__main__ import _index_record

    folder = tmp_path / "pyserini-like"
    shutil.copytree(toy_dense_index, folder)
    (folder / "meta.json").unlink()
    model = load_model(tiny_bert_dir)
    first = _index_record(folder, model)
    assert set(first["index_files"]) == {"docid", "index"} and _index_record(folder, model) == first
    stat = (folder / "index").stat()
    os.utime(folder / "index", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # written again
    assert _index_record(folder, model) != first
    assert "index_meta_sha256" in _index_record(toy_dense_index, model)


def test_a_setting_the_index_records_wrongly_is_named_in_its_meta_json(toy_dense_index, toy_collection, tmp_path):
    """An encoder setting of the wrong value in meta.json: the error names that file (not a bare model error)."""
    import json
    import shutil

    from ance_ir.data import InputError

    index = tmp_path / "index"
    shutil.copytree(toy_dense_index, index)
    meta = json.loads((index / "meta.json").read_text())
    meta["encoder_config"]["pooling"] = 5
    (index / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(InputError, match=r"meta\.json: pooling must be one of \('cls', 'mean'\), got 5"):
        search_main(["--topics", str(toy_collection["topics"]), "--index", str(index),
                     "--output", str(tmp_path / "run.trec")])
    assert not (tmp_path / "run.trec").exists()
