"""ColBERT: MaxSim against a hand computation, query augmentation and punctuation masking, save/load, the ``colbert``
training task, the token index (encode -> search against exhaustive MaxSim), ColBERTv2 compression, reranking and
the CLIs' bad inputs."""

from __future__ import annotations

import io
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from conftest import (
    TOY_PASSAGES,
    TOY_TOPICS,
    Terminal,
    assert_refused,
    run_here,
    toy_sections,
    write_toy_collection,
)

from ance_ir.data import InputError, read_run
from ance_ir.index.compress import compress_index, decompress, pack, unpack
from ance_ir.index.records import folder_bytes
from ance_ir.index.token_index import load_token_index
from ance_ir.modeling import DenseEncoder
from ance_ir.modeling.colbert import ColBERT
from ance_ir.modeling.kinds import load_model, saved_kind
from ance_ir.search.tokens import TokenSearcher
from ance_ir.train import build_config, read_log, train

PUNCTUATION = [".", ",", "!", "?"]


@pytest.fixture(scope="module")
def bert(tmp_path_factory) -> Path:
    """A random 2-layer BERT (hidden 32, no dropout) whose vocabulary has the toy words and some punctuation."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    path = tmp_path_factory.mktemp("colbert") / "bert"
    path.mkdir()
    words = sorted({w for text in [*TOY_PASSAGES.values(), *TOY_TOPICS.values()] for w in text.split()})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words, *PUNCTUATION]
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizerFast(vocab=str(path / "vocab.txt"), do_lower_case=True).save_pretrained(path)
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
                         attention_probs_dropout_prob=0.0)).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def saved(bert, tmp_path_factory) -> Path:
    """A colbert model saved with its (random) projection: what encode, search and rerank take."""
    torch.manual_seed(3)
    path = tmp_path_factory.mktemp("colbert-saved") / "model"
    load_model(bert, "colbert", dim=16, query_max_length=8).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def collection(tmp_path_factory) -> Path:
    return write_toy_collection(tmp_path_factory.mktemp("toy"))


def test_maxsim_is_the_sum_over_query_tokens_of_the_best_passage_token(bert):
    from transformers import AutoTokenizer, BertModel

    torch.manual_seed(1)
    model = load_model(bert, "colbert", dim=8, query_max_length=10)
    assert isinstance(model, ColBERT) and model.fresh_head and model.index == "tokens"
    queries, passages = ["cat on a mat", "how to bake bread"], ["the cat, sat on the mat.", "bread flour water!"]
    scores = model.score_pairs(queries, passages)

    tokenizer, backbone = AutoTokenizer.from_pretrained(bert), BertModel.from_pretrained(bert).eval()
    weight = model.projection.weight.detach()
    skip = set(tokenizer.convert_tokens_to_ids(PUNCTUATION))

    def vectors(ids: list[int], attended: int) -> list[torch.Tensor]:
        mask = torch.tensor([[1] * attended + [0] * (len(ids) - attended)])
        with torch.no_grad():
            hidden = backbone(input_ids=torch.tensor([ids]), attention_mask=mask).last_hidden_state[0]
        out = []
        for h in hidden:
            v = weight @ h
            out.append(v / v.norm())
        return out

    for i, (query, passage) in enumerate(zip(queries, passages, strict=True)):
        ids = tokenizer(query)["input_ids"]
        q = vectors(ids + [tokenizer.mask_token_id] * (10 - len(ids)), len(ids))  # [MASK] padding, not attended
        doc_ids = tokenizer(passage)["input_ids"]
        d = [v for v, t in zip(vectors(doc_ids, len(doc_ids)), doc_ids, strict=True) if t not in skip]
        assert len(d) == len(doc_ids) - sum(t in skip for t in doc_ids) and len(d) < len(doc_ids)
        expected = 0.0
        for qv in q:
            best = -math.inf
            for dv in d:
                best = max(best, float(qv @ dv))
            expected += best
        assert scores[i] == pytest.approx(expected, abs=1e-4)


def test_queries_are_padded_with_mask_and_passages_lose_punctuation(bert):
    model = load_model(bert, "colbert", query_max_length=12)
    batch = model.tokenize_queries(["cat on a mat", "bread"])
    mask_id = model.tokenizer.mask_token_id
    assert batch["input_ids"].shape == (2, 12)
    for ids, attention in zip(batch["input_ids"].tolist(), batch["attention_mask"].tolist(), strict=True):
        real = sum(attention)
        assert ids[real:] == [mask_id] * (12 - real) and mask_id not in ids[:real]
    assert model.embed_queries(batch).shape == (2, 12, model.dim)  # every [MASK] position is a query vector
    passages = ["the cat, sat on the mat.", "bread"]
    encoded = model.encode_passages(passages)
    ids = [model.tokenizer(p)["input_ids"] for p in passages]
    assert [len(v) for v in encoded] == [len(ids[0]) - 2, len(ids[1])]  # comma and full stop, no padding
    assert all(np.allclose(np.linalg.norm(v, axis=1), 1, atol=1e-5) for v in encoded)


def test_save_load_round_trip_gives_identical_scores(bert, tmp_path):
    torch.manual_seed(2)
    model = load_model(bert, "colbert", dim=24, query_max_length=9, passage_max_length=40)
    model.save_pretrained(tmp_path / "a")
    assert saved_kind(tmp_path / "a") == "colbert"
    loaded = load_model(tmp_path / "a")
    assert isinstance(loaded, ColBERT) and not loaded.fresh_head
    assert loaded.settings == {"dim": 24, "query_max_length": 9, "passage_max_length": 40}
    queries, passages = list(TOY_TOPICS.values()), list(TOY_PASSAGES.values())[:3]
    assert np.array_equal(model.score_pairs(queries, passages), loaded.score_pairs(queries, passages))
    with pytest.raises(ValueError, match="is a 'colbert' model, expected a 'dense' model"):
        load_model(tmp_path / "a", "dense")
    with pytest.raises(ValueError, match="has dimension 24, not 16"):
        load_model(tmp_path / "a", dim=16)
    with pytest.raises(ValueError, match="pooling: not a setting of a colbert model"):
        load_model(bert, "colbert", pooling="mean")
    assert model.encode_passages([]) == [] and model.score_pairs([], []).shape == (0,)
    (tmp_path / "a" / "ance_ir_colbert.json").write_text("{bad")
    with pytest.raises(InputError, match="ance_ir_colbert.json:1: not valid JSON"):
        load_model(tmp_path / "a")


def settings(collection: Path, bert: Path, output: Path, **task) -> dict:
    return toy_sections(collection, output, {"model": {"name": str(bert), "dim": 16, "query_max_length": 8},
                                             "task": {"name": "colbert", "batch_size": 3, "n_negatives": 2, **task},
                                             "optim": {"max_steps": 60}})


@pytest.mark.parametrize("in_batch", [True, False])
def test_the_task_trains_and_its_loss_falls(bert, collection, tmp_path, in_batch):
    path = tmp_path / "colbert.yaml"
    path.write_text(yaml.safe_dump(settings(collection, bert, tmp_path / "run", in_batch=in_batch)))
    config = build_config(path, {})
    assert (config.model.kind, config.model.options) == ("colbert", {"dim": 16})
    train(config)
    losses = [r["loss"] for r in read_log(tmp_path / "run" / "log.jsonl") if "loss" in r]
    assert len(losses) == 60 and all(map(math.isfinite, losses))
    if in_batch:
        assert losses[0] == pytest.approx(math.log(9), rel=0.2)  # 9 passages a query: random scores at first
    assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:10])
    assert saved_kind(tmp_path / "run" / "final") == "colbert"


@pytest.mark.parametrize(("task", "setting", "message"), [
    ({"name": "colbert"}, "model.pooling", "is a dense dual-encoder setting"),
    ({"name": "contrastive"}, "model.kind", "'colbert' models train with task: colbert"),
])
def test_settings_a_colbert_task_cannot_train_with(bert, collection, tmp_path, task, setting, message):
    changed = settings(collection, bert, tmp_path / "run")
    changed["task"].update(task)
    if task["name"] == "colbert":
        changed["model"]["pooling"] = "mean"
    else:
        changed["model"] = {"name": str(bert), "kind": "colbert"}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(changed))
    with pytest.raises(ValueError, match=rf"c\.yaml:\d+: {setting}: {message}"):
        build_config(tmp_path / "c.yaml", {})


def test_the_example_config_loads():
    config = build_config(Path(__file__).resolve().parent.parent / "configs/rag24-mini/colbert.yaml", {})
    assert (config.task.name, config.model.kind, config.task.batch_size, config.task.n_negatives) == \
        ("colbert", "colbert", 16, 7)
    assert config.task.in_batch and config.negatives.name == "bm25" and config.optim.max_steps == 600


@pytest.fixture(scope="module")
def token_index(saved, collection, tmp_path_factory) -> Path:
    output = tmp_path_factory.mktemp("index") / "colbert"
    done = run_here("ance_ir.encode", "--corpus", str(collection / "corpus.jsonl"), "--encoder", str(saved),
                    "--output", str(output), "--chunk-size", "3", "--quiet")
    assert done.returncode == 0, done.stderr
    return output


def test_encoding_a_token_index_moves_a_bar_per_batch_on_a_terminal(saved, collection, tmp_path, monkeypatch):
    from ance_ir.encode.token_encoder import encode_tokens

    for stderr in (Terminal(), io.StringIO()):  # a terminal, a log file
        monkeypatch.setattr(sys, "stderr", stderr)
        encode_tokens(collection / "corpus.jsonl", load_model(saved), tmp_path / f"index-{stderr.isatty()}",
                      encoder_name=str(saved), batch_size=1, chunk_size=len(TOY_PASSAGES))
        bar = f"encode passages:   0%|          | 0/{len(TOY_PASSAGES)}"  # within the chunk
        assert (bar in stderr.getvalue()) == stderr.isatty()  # in a log file every redraw would be a new line


def test_too_many_centroids_keep_the_encoded_chunks_for_a_rerun(saved, collection, token_index, tmp_path):
    output, tokens = tmp_path / "index", load_token_index(token_index).meta["tokens"]
    args = ["--corpus", str(collection / "corpus.jsonl"), "--encoder", str(saved), "--output", str(output),
            "--chunk-size", "3", "--quiet"]
    refused = run_here("ance_ir.encode", *args, "--centroids", str(tokens + 1))
    assert refused.returncode == 2 and not output.exists()
    assert f"more than the corpus's {tokens} token vectors" in refused.stderr
    assert f"rerun with --centroids at most {tokens}" in refused.stderr
    chunks = sorted(p.name for p in output.with_name("index.partial").iterdir())
    done = run_here("ance_ir.encode", *args, "--centroids", "4")
    assert done.returncode == 0, done.stderr
    assert "resum" in done.stderr.lower() and len(load_token_index(output).centroids) == 4 and chunks


def test_a_build_interrupted_after_its_centroids_goes_on_from_them(saved, collection, tmp_path, monkeypatch):
    """Ctrl-C while tokens are assigned to centroids: the rerun trains no new centroids and writes the index an
    uninterrupted build writes."""
    import ance_ir.encode.token_encoder as token_encoder

    def build(output: Path) -> None:
        token_encoder.encode_tokens(collection / "corpus.jsonl", load_model(saved), output, encoder_name=str(saved),
                                    chunk_size=3, centroids=4, show_progress=False)

    trained, train = [], token_encoder.train_centroids
    monkeypatch.setattr(token_encoder, "train_centroids", lambda *args: trained.append(1) or train(*args))
    with monkeypatch.context() as patch:
        patch.setattr(token_encoder, "assign_centroids", lambda *args: (_ for _ in ()).throw(KeyboardInterrupt))
        with pytest.raises(KeyboardInterrupt, match="every chunk is finished and kept"):
            build(tmp_path / "index")
    assert trained == [1] and not (tmp_path / "index").exists()
    build(tmp_path / "index")
    assert trained == [1] and not (tmp_path / "index.partial").exists()
    build(tmp_path / "reference")
    resumed, reference = load_token_index(tmp_path / "index"), load_token_index(tmp_path / "reference")
    assert np.array_equal(resumed.centroids, reference.centroids) and np.array_equal(resumed.codes, reference.codes)


def test_encode_writes_a_token_index_of_the_kept_tokens(saved, collection, token_index):
    index = load_token_index(token_index)
    model = load_model(saved)
    expected = model.encode_passages(list(TOY_PASSAGES.values()))
    assert index.docids == list(TOY_PASSAGES) and index.doclens.tolist() == [len(v) for v in expected]
    assert index.meta["kind"] == "colbert" and index.meta["compression"] is None
    assert index.meta["encoder_config"] == model.settings and index.vectors.dtype == np.float16
    assert np.allclose(index.token_vectors(slice(None)), np.concatenate(expected), atol=2e-3)
    assert index.meta["centroids"] == len(index.centroids) <= index.meta["tokens"]
    assert not token_index.with_name(token_index.name + ".partial").exists()


def test_search_finds_the_exhaustive_maxsim_ranking(saved, collection, token_index, tmp_path, monkeypatch):
    index, model = load_token_index(token_index), load_model(saved)
    searcher = TokenSearcher(index, model)
    queries = model.encode_queries(list(TOY_TOPICS.values()))
    for query in queries:
        exhaustive = searcher.exhaustive(query)
        best = [index.docids[i] for i in np.argsort(-exhaustive, kind="stable")[:5]]
        assert [d for d, _ in searcher.rank(query, 5, nprobe=len(index.centroids))] == best
        assert [d for d, _ in searcher.rank(query, 5, nprobe=0)] == best
        assert len(searcher.rank(query, 5, nprobe=1)) <= 5
    texts = list(TOY_PASSAGES.values())
    pairs = model.score_pairs([TOY_TOPICS["q1"]] * len(texts), texts)
    assert np.allclose(searcher.exhaustive(queries[0]), pairs, atol=1e-2)  # fp16 storage

    everything = np.arange(len(index))
    for query in queries:  # PLAID's centroid interaction: MaxSim against each token's centroid, by hand
        by_hand = [max(float(q @ index.centroids[c]) for c in index.codes[index.offsets[p]:index.offsets[p + 1]])
                   for p in everything for q in query]
        assert np.allclose(searcher.centroid_scores(query, everything),
                           np.array(by_hand).reshape(len(index), len(query)).sum(axis=1), atol=1e-5)
        with monkeypatch.context() as patch:  # blocks of one passage give the same scores
            patch.setattr("ance_ir.search.tokens.SCAN_TOKENS", 1)
            blocked = searcher.centroid_scores(query, everything)
        assert np.array_equal(blocked, searcher.centroid_scores(query, everything))
        kept = set(np.argsort(-searcher.centroid_scores(query, everything), kind="stable")[:2])
        pruned = searcher.rank(query, 5, nprobe=len(index.centroids), ndocs=2)
        exact = dict(zip(index.docids, searcher.exhaustive(query), strict=True))
        assert {index.docids[p] for p in kept} == {d for d, _ in pruned}
        assert all(abs(score - exact[d]) < 1e-5 for d, score in pruned)
        assert searcher.rank(query, 5, nprobe=1, ndocs=len(index)) == searcher.rank(query, 5, nprobe=1)

    output = tmp_path / "run.trec"
    done = run_here("ance_ir.search", "--index", str(token_index), "--topics", str(collection / "topics.tsv"),
                      "--output", str(output), "--hits", "3", "--nprobe", "1000")
    assert done.returncode == 0, done.stderr
    run = read_run(output)
    for qid, query in zip(TOY_TOPICS, queries, strict=True):
        assert [d for d, _ in run[qid]] == [d for d, _ in searcher.rank(query, 3, nprobe=0)]


def test_a_token_search_of_more_than_one_batch_shows_a_bar_unless_quiet(saved, collection, token_index, tmp_path,
                                                                         capsys):
    from ance_ir.search.__main__ import main as search_main

    args = ["--index", str(token_index), "--topics", str(collection / "topics.tsv"), "--hits", "3"]
    assert search_main([*args, "--output", str(tmp_path / "one.trec")]) == 0
    assert "search:" not in capsys.readouterr().err
    assert search_main([*args, "--output", str(tmp_path / "each.trec"), "--batch-size", "1"]) == 0
    assert f"search: 100%|██████████| {len(TOY_TOPICS)}/{len(TOY_TOPICS)}" in capsys.readouterr().err
    assert read_run(tmp_path / "each.trec") == read_run(tmp_path / "one.trec")
    assert search_main([*args, "--output", str(tmp_path / "quiet.trec"), "--batch-size", "1", "--quiet"]) == 0
    assert "search:" not in capsys.readouterr().err


def test_compression_keeps_vectors_close_and_small(token_index, tmp_path):
    bits = np.random.default_rng(0).integers(0, 4, size=(5, 16)).astype(np.uint8)
    assert np.array_equal(unpack(pack(bits.astype(np.float32), np.array([0.5, 1.5, 2.5]), 2), 2, 16), bits)
    rng = np.random.default_rng(1)
    for b, dim in ((1, 16), (2, 16), (1, 12), (2, 10)):  # 12 and 10: the last byte padded
        packed = rng.integers(0, 256, size=(7, -(-dim * b // 8)), dtype=np.uint8)
        weights, centroids = rng.normal(size=2 ** b).astype(np.float32), rng.normal(size=(3, dim)).astype(np.float32)
        codes = rng.integers(0, 3, size=7)
        by_hand = np.array([[weights[int("".join(map(str, np.unpackbits(row)[d * b:(d + 1) * b])), 2)]
                             for d in range(dim)] for row in packed]) + centroids[codes]
        by_hand /= np.linalg.norm(by_hand, axis=1, keepdims=True)
        assert np.allclose(decompress(codes, packed, centroids, weights, b), by_hand, atol=1e-6)
    original = load_token_index(token_index)
    exact = original.token_vectors(slice(None))
    errors = {}
    for b in (1, 2):
        compressed = compress_index(token_index, tmp_path / f"{b}bit", b, show_progress=False)
        assert compressed.vectors is None and compressed.residuals.shape == (len(exact), 16 * b // 8)
        decoded = compressed.token_vectors(slice(None))
        cosines = (decoded * exact).sum(axis=1)
        errors[b] = float(np.mean(1 - cosines))
        assert np.mean(cosines) > 0.8
        assert load_token_index(tmp_path / f"{b}bit").meta["compression"]["bits"] == b
    assert errors[2] < errors[1]
    vectors_bytes = (token_index / "vectors.npy").stat().st_size
    residual_bytes = (tmp_path / "2bit" / "residuals.npy").stat().st_size
    assert residual_bytes - 128 < (vectors_bytes - 128) / 8 + 1  # 2 bits against 16 a dimension (minus headers)
    assert folder_bytes(tmp_path / "2bit") < folder_bytes(token_index)


def test_search_and_rerank_with_a_compressed_index_and_the_model(saved, collection, token_index, tmp_path):
    compress = run_here("ance_ir.index.compress", "--index", str(token_index), "--output", str(tmp_path / "c"),
                          "--bits", "2", "--quiet")
    assert compress.returncode == 0 and "ratio" in compress.stderr, compress.stderr
    first = tmp_path / "first.trec"
    done = run_here("ance_ir.search", "--index", str(tmp_path / "c"), "--topics", str(collection / "topics.tsv"),
                      "--output", str(first), "--hits", "8", "--nprobe", "0")
    assert done.returncode == 0, done.stderr
    assert all(len(hits) == 8 for hits in read_run(first).values())
    reranked = tmp_path / "rerank.trec"
    done = run_here("ance_ir.rerank", "--run", str(first), "--topics", str(collection / "topics.tsv"),
                      "--corpus", str(collection / "corpus.jsonl"), "--model", str(saved), "--depth", "8",
                      "--output", str(reranked), "--quiet", "--precision", "fp32")
    assert done.returncode == 0, done.stderr
    model = load_model(saved)
    for qid, hits in read_run(reranked).items():
        texts = [TOY_PASSAGES[d] for d, _ in hits]
        scores = model.score_pairs([TOY_TOPICS[qid]] * len(texts), texts)
        assert np.allclose([s for _, s in hits], scores, atol=1e-5)
        assert list(scores) == sorted(scores, reverse=True)


def test_bad_inputs_give_one_line(bert, saved, collection, token_index, tmp_path):
    output, topics, corpus = tmp_path / "out.trec", str(collection / "topics.tsv"), str(collection / "corpus.jsonl")
    dense = tmp_path / "dense"
    DenseEncoder.from_pretrained(bert).save_pretrained(dense)
    dense_index = tmp_path / "dense-index"
    assert run_here("ance_ir.encode", "--corpus", corpus, "--encoder", str(dense), "--output", str(dense_index),
                      "--quiet").returncode == 0
    first = tmp_path / "first.trec"
    first.write_text("".join(f"{q} Q0 {d} {i + 1} {10 - i} first\n" for q in TOY_TOPICS
                             for i, d in enumerate(TOY_PASSAGES)))

    def rerank(model: Path, *more: str) -> subprocess.CompletedProcess:
        return run_here("ance_ir.rerank", "--run", str(first), "--topics", topics, "--corpus", corpus, "--model",
                          str(model), "--output", str(output), "--quiet", *more)

    def search(index: Path, *more: str) -> subprocess.CompletedProcess:
        return run_here("ance_ir.search", "--index", str(index), "--topics", topics, "--output", str(output), *more)

    assert_refused(rerank(dense), "is a 'dense' model, which scores no (query, passage) pairs", output)
    assert_refused(rerank(saved, "--depth", "0"), "--depth must be at least 1, got 0", output)
    assert_refused(rerank(token_index), f"{token_index}: an index folder (meta.json), not a model", output)
    assert_refused(rerank(saved, "--max-length", "20"), "--max-length is a cross-encoder setting", output)
    assert_refused(search(token_index, "--encoder", str(dense)), "is a 'dense' model, expected a 'colbert' model",
                   output)
    assert_refused(search(dense_index, "--encoder", str(saved)), "is a 'colbert' model, expected a 'dense' model",
                   output)
    assert_refused(search(token_index, "--pooling", "mean"), "--pooling and --normalize are dense settings", output)
    assert_refused(search(token_index, "--nprobe", "-1"), "--nprobe must be 0 (exhaustive) or more", output)
    assert_refused(search(token_index, "--ndocs", "-1"), "--ndocs must be 0 (no pruning) or more", output)
    assert_refused(search(dense_index, "--ndocs", "8"), "--ndocs applies to a token index's candidates", output)
    assert_refused(search(token_index, "--ef-search", "8"), "--ef-search applies to an HNSW dense index", output)
    assert_refused(search(token_index, "--ndocs", "8", "--nprobe", "0"), "--nprobe 0 scores every passage", output)
    assert_refused(search(token_index, "--ndocs", "2", "--hits", "3"), "--ndocs 2 is below --hits 3", output)
    assert_refused(run_here("ance_ir.index.compress", "--index", str(dense_index), "--output", str(output)),
                   "not a token index", output)
    assert_refused(run_here("ance_ir.encode", "--corpus", corpus, "--encoder", str(saved), "--output", str(output),
                              "--shard", "0/2"), "a token index is encoded in one process", output)
    assert_refused(search(token_index, "--encoder", str(bert)), "has no trained colbert projection", output)
    copy = tmp_path / "copy"
    shutil.copytree(token_index, copy)
    assert_refused(run_here("ance_ir.index.compress", "--index", str(copy), "--output", str(copy), "--force"),
                   "is the input", output)
    codes = np.load(copy / "codes.npy")
    codes[0] = len(np.load(copy / "centroids.npy"))
    np.save(copy / "codes.npy", codes)
    assert_refused(search(copy), f"codes.npy: holds centroid id {codes[0]}, but the index has {codes[0]} centroids",
                   output)
    (copy / "codes.npy").write_bytes((copy / "codes.npy").read_bytes()[:200])  # cut short, as by a full disk
    assert_refused(search(copy), f"{copy / 'codes.npy'}: not a readable .npy array (", output)


def test_colbertv2_distils_a_teachers_scores_with_kl(bert, collection, tmp_path):
    from ance_ir.data import GroupPassage, TrainingGroup, write_groups

    groups = tmp_path / "groups.jsonl"
    teacher = {"q1": {"d1": 4.0, "d7": 1.0, "d8": -2.0}, "q2": {"d3": 4.0, "d7": -1.0, "d8": 0.5},
               "q3": {"d5": 4.0, "d7": 0.0, "d8": -3.0}}
    write_groups(groups, [TrainingGroup(q, TOY_TOPICS[q], (GroupPassage(pos, score=scores[pos]),),
                                        tuple(GroupPassage(d, score=s) for d, s in scores.items() if d != pos))
                          for (q, scores), pos in zip(teacher.items(), ("d1", "d3", "d5"), strict=True)])
    config = settings(collection, bert, tmp_path / "run")
    config["data"] = {**config["data"], "source": "groups", "groups": str(groups), "topics": None}
    config.update(negatives={"name": "groups"}, loss={"name": "kl"})
    path = tmp_path / "colbertv2.yaml"
    path.write_text(yaml.safe_dump(config))
    train(build_config(path, {}))
    losses = [r["loss"] for r in read_log(tmp_path / "run" / "log.jsonl") if "loss" in r]
    assert all(map(math.isfinite, losses)) and np.mean(losses[-10:]) < 0.5 * np.mean(losses[:10])
    model = load_model(tmp_path / "run" / "final")
    for qid, scores in teacher.items():  # the student orders each group as the teacher does
        docids = sorted(scores, key=scores.get, reverse=True)
        student = model.score_pairs([TOY_TOPICS[qid]] * 3, [TOY_PASSAGES[d] for d in docids])
        assert list(np.argsort(-np.asarray(student))) == [0, 1, 2], qid


def test_assigning_centroids_shows_a_bar_past_its_delay(monkeypatch, capsys):
    from ance_ir.index.token_index import assign_centroids

    rng = np.random.default_rng(0)
    vectors, centroids = rng.standard_normal((50, 8)).astype(np.float32), rng.standard_normal((4, 8)).astype(np.float32)
    quick = assign_centroids(vectors, centroids, show_progress=True)
    assert capsys.readouterr().err == ""
    assert np.array_equal(quick, np.argmax(vectors @ centroids.T, axis=1))
    monkeypatch.setattr("ance_ir.data.resume.BAR_DELAY_S", 0)
    monkeypatch.setattr("ance_ir.index.token_index._BLOCK", 16)
    assert np.array_equal(assign_centroids(vectors, centroids, show_progress=True), quick)
    assert "assign centroids: 100%|██████████| 50/50" in capsys.readouterr().err
