"""Dense index folders: faiss index types, Pyserini's layout, loading errors, search and merging."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import numpy as np
import pytest

from ance_ir.data import InputError
from ance_ir.index import (
    DenseIndex,
    build_index,
    load_dense_index,
    merge_indexes,
    single_vector_index,
    stored_vectors,
    write_dense_index,
)

N, DIM = 400, 32


@pytest.fixture(scope="module")
def vectors() -> np.ndarray:
    """Clustered vectors, as real passage embeddings are."""
    rng = np.random.default_rng(0)
    centers = rng.standard_normal((20, DIM))
    return (centers[rng.integers(0, 20, N)] + 0.5 * rng.standard_normal((N, DIM))).astype(np.float32)


@pytest.fixture(scope="module")
def queries(vectors) -> np.ndarray:
    rng = np.random.default_rng(1)
    return (vectors[rng.integers(0, N, 30)] + 0.5 * rng.standard_normal((30, DIM))).astype(np.float32)


DOCIDS = [f"doc{i}" for i in range(N)]


def exact_top_k(vectors: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, list[list[str]]]:
    scores = queries @ vectors.T
    rows = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(scores, rows, axis=1), [[DOCIDS[r] for r in row] for row in rows]


@pytest.mark.parametrize("index_type", ["flat", "hnsw", "ivfpq"])
def test_round_trip_keeps_docids_type_and_params(tmp_path, vectors, queries, index_type):
    written = write_dense_index(tmp_path / "ix", build_index(vectors, index_type), DOCIDS, {"encoder": "e"})
    assert sorted(p.name for p in (tmp_path / "ix").iterdir()) == ["docid", "index", "meta.json"]
    assert (tmp_path / "ix" / "docid").read_text() == "".join(f"{d}\n" for d in DOCIDS)
    loaded = load_dense_index(tmp_path / "ix")
    assert loaded.docids == DOCIDS and len(loaded) == N and loaded.dim == DIM
    assert loaded.meta == written.meta
    assert loaded.meta["encoder"] == "e" and loaded.meta["index_type"] == index_type
    assert loaded.meta["count"] == N and loaded.meta["dimension"] == DIM
    before, after = written.search(queries, 10), loaded.search(queries, 10)
    np.testing.assert_array_equal(before[0], after[0])
    assert before[1] == after[1]
    exact = exact_top_k(vectors, queries, 1)[1]
    assert np.mean([hit[0] == want[0] for hit, want in zip(after[1], exact, strict=True)]) >= 0.9


def test_flat_scores_are_exact_dot_products(vectors, queries):
    scores, docids = DenseIndex(build_index(vectors, "flat"), DOCIDS).search(queries, 10)
    want_scores, want_docids = exact_top_k(vectors, queries, 10)
    assert docids == want_docids
    np.testing.assert_allclose(scores, want_scores, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("index_type", "min_recall"), [("hnsw", 0.95), ("ivfpq", 0.6)])
def test_approximate_indexes_find_most_exact_neighbours(vectors, queries, index_type, min_recall):
    _, exact = exact_top_k(vectors, queries, 10)
    _, approx = DenseIndex(build_index(vectors, index_type), DOCIDS).search(queries, 10)
    recall = np.mean([len(set(a) & set(e)) / 10 for a, e in zip(approx, exact, strict=True)])
    assert recall > min_recall
    # the true nearest neighbour is nearly always among the top 10
    assert np.mean([e[0] in a for a, e in zip(approx, exact, strict=True)]) >= 0.9


def recall_with_each(index: DenseIndex, setting: Callable[[int], None], values: tuple[int, ...], queries: np.ndarray,
                     exact: list[list[str]]) -> dict[int, float]:
    """Recall@10 of ``index`` against ``exact`` with each of ``values`` applied by ``setting``."""
    recall = {}
    for value in values:
        setting(value)
        _, hits = index.search(queries, 10)
        recall[value] = float(np.mean([len(set(h) & set(e)) / 10 for h, e in zip(hits, exact, strict=True)]))
    return recall


def test_ef_search_sets_an_hnsw_index_recall_and_is_refused_by_others(vectors, queries):
    _, exact = exact_top_k(vectors, queries, 10)
    index = DenseIndex(build_index(vectors, "hnsw", m=4, ef_construction=16), DOCIDS)
    recall = recall_with_each(index, index.set_ef_search, (1, 400), queries, exact)
    assert index.ef_search == 400 and recall[400] >= 0.95 and recall[1] < 0.5
    flat = DenseIndex(build_index(vectors, "flat"), DOCIDS)
    assert flat.ef_search is None
    with pytest.raises(ValueError, match="ef_search applies to an HNSW index; this one is flat"):
        flat.set_ef_search(10)
    with pytest.raises(ValueError, match="at least 1"):
        index.set_ef_search(0)


def test_nprobe_sets_an_ivf_index_recall_and_is_refused_by_others(vectors):
    rng = np.random.default_rng(2)  # unclustered: a query's neighbours spread over many lists
    spread = rng.standard_normal((N, DIM)).astype(np.float32)
    queries = rng.standard_normal((30, DIM)).astype(np.float32)
    _, exact = exact_top_k(spread, queries, 10)
    index = DenseIndex(build_index(spread, "ivfpq", nlist=16, m=16), DOCIDS)
    recall = recall_with_each(index, index.set_nprobe, (1, 100), queries, exact)
    assert index.nprobe == 16 and recall[100] >= 0.8 and recall[1] < 0.5  # capped at the 16 lists
    with pytest.raises(ValueError, match="nprobe applies to an IVF index; this one is flat"):
        DenseIndex(build_index(vectors, "flat"), DOCIDS).set_nprobe(4)
    with pytest.raises(ValueError, match="at least 1"):
        index.set_nprobe(0)


def test_search_settings_survive_the_round_trip(tmp_path, vectors):
    write_dense_index(tmp_path / "h", build_index(vectors, "hnsw", m=16, ef_search=40), DOCIDS)
    write_dense_index(tmp_path / "p", build_index(vectors, "ivfpq", nlist=8, m=16, nprobe=3), DOCIDS)
    assert load_dense_index(tmp_path / "h").meta["index_params"] == {"m": 16, "ef_construction": 200,
                                                                      "ef_search": 40}
    ivfpq = load_dense_index(tmp_path / "p")
    assert ivfpq.index.nprobe == 3
    assert ivfpq.meta["index_params"] == {"nlist": 8, "m": 16, "nbits": 8, "nprobe": 3}


def test_small_ivfpq_scales_its_settings_down(capfd):
    index = build_index(np.random.default_rng(0).standard_normal((20, 12)).astype(np.float32), "ivfpq")
    assert (index.nlist, index.pq.M, index.pq.nbits) == (1, 3, 4)
    # 16 codes from 20 vectors: faiss would warn once per sub-quantizer that it wants 39 points a code
    assert "WARNING clustering" not in capfd.readouterr().err


@pytest.mark.parametrize(("args", "params", "message"), [
    ((np.zeros((4, 8), np.float32), "annoy"), {}, "unknown index type"),
    ((np.zeros((0, 8), np.float32), "flat"), {}, "non-empty"),
    ((np.zeros((4, 8), np.float32), "hnsw"), {"nlist": 4}, "unknown hnsw parameter"),
    ((np.zeros((4, 8), np.float32), "hnsw"), {"m": 0}, "positive integer"),
    ((np.zeros((300, 8), np.float32), "ivfpq"), {"m": 3}, "must divide"),
    ((np.zeros((100, 8), np.float32), "ivfpq"), {"nbits": 8}, "at least 256"),
    ((np.full((4, 8), np.nan, np.float32), "flat"), {}, "NaN"),
])
def test_build_rejects_bad_input(args, params, message):
    with pytest.raises(ValueError, match=message):
        build_index(*args, **params)


def test_faiss_searcher_reads_our_flat_index_and_agrees(tmp_path, vectors, queries):
    from pyserini.search.faiss import FaissSearcher

    ours = write_dense_index(tmp_path / "ix", build_index(vectors, "flat"), DOCIDS, {"encoder": "e"})
    searcher = FaissSearcher(str(tmp_path / "ix"), None)  # a non-str encoder is used as is; vectors need none
    assert (searcher.num_docs, searcher.dimension, searcher.docids) == (N, DIM, DOCIDS)
    scores, docids = ours.search(queries, 10)
    qids = [f"q{i}" for i in range(len(queries))]
    hits = searcher.batch_search(queries, qids, k=10)
    assert [[h.docid for h in hits[q]] for q in qids] == docids
    np.testing.assert_array_equal([[h.score for h in hits[q]] for q in qids], scores)
    single = searcher.search(queries[:1], k=10)
    assert [h.docid for h in single] == docids[0]


def test_wrong_query_dimension_is_a_clear_error(tmp_path, vectors):
    dense = write_dense_index(tmp_path / "ix", build_index(vectors, "flat"), DOCIDS)
    with pytest.raises(ValueError, match=rf"shape \(2, 16\).*{tmp_path / 'ix'} has dimension 32"):
        dense.search(np.zeros((2, 16), np.float32), 5)


def test_k_beyond_the_index_size_returns_every_document(vectors):
    scores, docids = DenseIndex(build_index(vectors[:5], "flat"), DOCIDS[:5]).search(vectors[0], 50)
    assert scores.shape == (1, 5) and sorted(docids[0]) == DOCIDS[:5]


def test_docid_count_mismatch_names_the_docid_file(tmp_path, vectors):
    write_dense_index(tmp_path / "ix", build_index(vectors, "flat"), DOCIDS)
    with open(tmp_path / "ix" / "docid", "a") as f:
        f.write("extra\n")
    with pytest.raises(InputError, match=rf"{tmp_path / 'ix' / 'docid'}: has {N + 1} docids.* {N} vectors"):
        load_dense_index(tmp_path / "ix")


def test_a_figure_of_one_vector_a_passage_refuses_an_mebert_index(tmp_path, vectors):
    write_dense_index(tmp_path / "m2", build_index(vectors, "flat"), DOCIDS[:N // 2], vectors_per_passage=2)
    assert len(load_dense_index(tmp_path / "m2").docids) == N
    with pytest.raises(InputError, match="meta.json: an index of 2 vectors a passage .ME-BERT."):
        single_vector_index(tmp_path / "m2")
    write_dense_index(tmp_path / "m1", build_index(vectors, "flat"), DOCIDS)
    assert single_vector_index(tmp_path / "m1").docids == DOCIDS


@pytest.mark.parametrize(("docid", "line", "message"), [
    ("doc1", 3, "docid 'doc1' repeated \\(first on line 2\\)"), ("", 3, "docid '' is empty"),
])
def test_a_docid_file_with_a_repeated_or_empty_docid_is_refused(tmp_path, vectors, docid, line, message):
    write_dense_index(tmp_path / "ix", build_index(vectors, "flat"), DOCIDS)
    lines = (tmp_path / "ix" / "docid").read_text().split("\n")
    lines[line - 1] = docid
    (tmp_path / "ix" / "docid").write_text("\n".join(lines))
    with pytest.raises(InputError, match=rf"docid:{line}: {message}"):
        load_dense_index(tmp_path / "ix")


@pytest.mark.parametrize(("broken", "message"), [
    ("index", "index: missing"), ("docid", "docid: missing"),
    ("garbage", "index: not a readable faiss index"), ("meta", "meta.json: says count 3"),
])
def test_broken_index_folders_are_reported_by_file(tmp_path, vectors, broken, message):
    folder = tmp_path / "ix"
    write_dense_index(folder, build_index(vectors, "flat"), DOCIDS)
    if broken in ("index", "docid"):
        (folder / broken).unlink()
    elif broken == "garbage":
        (folder / "index").write_bytes(b"not faiss")
    else:
        meta = json.loads((folder / "meta.json").read_text())
        (folder / "meta.json").write_text(json.dumps({**meta, "count": 3}))
    with pytest.raises(InputError, match=message):
        load_dense_index(folder)
    with pytest.raises(InputError, match="no such dense index folder"):
        load_dense_index(tmp_path / "absent")


@pytest.mark.parametrize(("docids", "message"), [
    (["a b", *DOCIDS[1:]], "whitespace"), (["", *DOCIDS[1:]], "empty"), (DOCIDS[:-1], "399 docids"),
    (["doc1", *DOCIDS[1:]], "more than once"),
])
def test_write_rejects_bad_docids_and_leaves_nothing(tmp_path, vectors, docids, message):
    with pytest.raises(ValueError, match=message):
        write_dense_index(tmp_path / "ix", build_index(vectors, "flat"), docids)
    assert list(tmp_path.iterdir()) == []


def write_shards(tmp_path, vectors, index_type, order=(0, 1, 2)):
    """Three shards of ``vectors`` as the encoder writes them, returned in the given order."""
    bounds = [0, 100, 250, N]
    folders = []
    for i in range(3):
        part = vectors[bounds[i]:bounds[i + 1]]
        meta = {"encoder": "e", "corpus_sha256": "abc", "shard": {"index": i, "count": 3}}
        docids = DOCIDS[bounds[i]:bounds[i + 1]]
        write_dense_index(tmp_path / f"shard{i}", build_index(part, index_type), docids, meta, vectors=part)
        folders.append(tmp_path / f"shard{i}")
    return [folders[i] for i in order]


@pytest.mark.parametrize("index_type", ["flat", "hnsw", "ivfpq"])
def test_merge_rebuilds_shards_in_shard_order(tmp_path, vectors, queries, index_type):
    shards = write_shards(tmp_path, vectors, index_type, order=(2, 0, 1))
    merged = merge_indexes(shards, tmp_path / "merged")
    assert merged.docids == DOCIDS and merged.meta["index_type"] == index_type
    assert merged.meta["encoder"] == "e" and "shard" not in merged.meta
    assert not (tmp_path / "merged" / "vectors.npy").exists()
    assert not list(tmp_path.glob(".merged*"))
    direct = DenseIndex(build_index(vectors, index_type), DOCIDS).search(queries, 10)
    assert load_dense_index(tmp_path / "merged").search(queries, 10)[1] == direct[1]


def test_merge_can_change_the_index_type(tmp_path, vectors, queries):
    merged = merge_indexes(write_shards(tmp_path, vectors, "ivfpq"), tmp_path / "merged", "flat")
    np.testing.assert_array_equal(stored_vectors(merged), vectors)
    assert merged.search(queries, 10)[1] == exact_top_k(vectors, queries, 10)[1]


def test_merge_refuses_incomplete_or_mismatched_shards(tmp_path, vectors):
    shards = write_shards(tmp_path, vectors, "flat")
    with pytest.raises(ValueError, match="complete set.*got 0/3, 2/3"):
        merge_indexes([shards[0], shards[2]], tmp_path / "merged")
    meta = json.loads((shards[1] / "meta.json").read_text())
    (shards[1] / "meta.json").write_text(json.dumps({**meta, "corpus_sha256": "other"}))
    with pytest.raises(InputError, match="shard1/meta.json: corpus_sha256 'other' differs"):
        merge_indexes(shards, tmp_path / "merged")
    assert not (tmp_path / "merged").exists()


def test_merge_needs_raw_vectors_for_lossy_indexes(tmp_path, vectors):
    shards = write_shards(tmp_path, vectors, "ivfpq")
    (shards[0] / "vectors.npy").unlink()
    with pytest.raises(InputError, match="no vectors.npy, and its ivfpq index cannot give back its vectors"):
        merge_indexes(shards, tmp_path / "merged")


def test_a_docid_file_that_is_not_utf8_is_refused_naming_its_line(tmp_path, vectors):
    write_dense_index(tmp_path / "ix", build_index(vectors, "flat"), DOCIDS)
    path = tmp_path / "ix" / "docid"
    path.write_bytes(path.read_bytes().replace(f"\n{DOCIDS[2]}\n".encode(), b"\ncaf\xe9\n"))
    with pytest.raises(InputError, match=r"docid:3: not UTF-8 text \(invalid continuation byte at byte 4"):
        load_dense_index(tmp_path / "ix")


@pytest.mark.parametrize(("key", "value", "message"), [
    ("encoder_config", "x", "encoder_config must be a JSON object of the encoder's settings, got 'x'"),
    ("encoder", 3, "encoder must be a string, got 3"),
])
def test_a_meta_json_setting_of_the_wrong_type_is_refused_naming_the_file(tmp_path, vectors, key, value, message):
    write_dense_index(tmp_path / "ix", build_index(vectors, "flat"), DOCIDS)
    meta = json.loads((tmp_path / "ix" / "meta.json").read_text())
    (tmp_path / "ix" / "meta.json").write_text(json.dumps({**meta, key: value}))
    with pytest.raises(InputError, match=rf"meta.json: {re.escape(message)}"):
        load_dense_index(tmp_path / "ix")


def test_building_shows_a_bar_past_its_delay_when_asked(vectors, monkeypatch, capsys):
    quiet = build_index(vectors, "hnsw", show_progress=True)  # quicker than BAR_DELAY_S: no bar
    assert capsys.readouterr().err == ""
    monkeypatch.setattr("ance_ir.data.resume.BAR_DELAY_S", 0)
    monkeypatch.setattr("ance_ir.index.faiss_index.ADD_BATCH", 100)
    shown = build_index(vectors, "hnsw", show_progress=True)
    assert f"build hnsw index: 100%|██████████| {N}/{N}" in capsys.readouterr().err
    assert shown.ntotal == quiet.ntotal == N
    build_index(vectors, "ivfpq", show_progress=True, nlist=4, m=8, nbits=4)
    err = capsys.readouterr().err
    assert "training IVF-PQ (4 lists, 8 sub-quantizers of 16 codes) ..." in err
    assert f"build ivfpq index: 100%|██████████| {N}/{N}" in err
    build_index(vectors, "flat")
    assert capsys.readouterr().err == ""


def test_a_mapped_index_is_checked_and_searched_as_a_read_one(vectors, queries, tmp_path):
    write_dense_index(tmp_path / "h", build_index(vectors, "hnsw", m=8), DOCIDS)
    read, mapped = load_dense_index(tmp_path / "h"), load_dense_index(tmp_path / "h", mmap=True)
    assert mapped.docids == read.docids and mapped.index.ntotal == N
    for got, expected in zip(mapped.search(queries, 10), read.search(queries, 10), strict=True):
        assert np.array_equal(np.asarray(got), np.asarray(expected))
    (tmp_path / "h" / "docid").write_text("\n".join(DOCIDS[:-1]) + "\n")
    with pytest.raises(InputError, match=f"has {N - 1} docids, but .* holds {N} vectors"):
        load_dense_index(tmp_path / "h", mmap=True)


def test_faiss_searches_beside_the_model_on_its_device(tmp_path):
    import torch

    from ance_ir.index.faiss_index import faiss_gpu

    assert faiss_gpu(torch.device("cpu")) is None and faiss_gpu(torch.device("cuda", 1)) == 1  # not GPU 0
    vectors = np.random.default_rng(0).standard_normal((20, 8)).astype(np.float32)
    index = DenseIndex(build_index(vectors), [f"d{i}" for i in range(20)])
    assert index.gpu == 0  # faiss's first GPU, when it sees one, unless told the model's device
    expected = index.search(vectors[:3], 5)
    index.use_device(torch.device("cpu"))
    assert index.gpu is None and index._searchable is None  # the copy of the other device is dropped
    scores, docids = index.search(vectors[:3], 5)
    assert np.array_equal(scores, expected[0]) and docids == expected[1]
