"""A BERT's last layer run for its first tokens alone (eval mode): the cross-encoder's score, a CLS-pooled dense
encoder's vectors and ME-BERT's first m passage vectors are those of the whole forward (training mode; the toy
BERT has no dropout), with padding in the batch, in fp32, bf16 and int8 (int8 within its own noise)."""

from __future__ import annotations

import shutil
from collections.abc import Callable

import numpy as np
import pytest
import torch

from ance_ir.modeling.first_tokens import first_token_bert
from ance_ir.modeling.inference import running
from ance_ir.modeling.kinds import load_model

QUERIES = ["cat on a mat", "how to bake bread", "stock market drop", "cat"]
PASSAGES = ["the cat sat on the mat", "bread", "investors sold shares as markets dropped after the news",
            "the history of the roman empire"]  # of different lengths: batches with padding


def assert_same_in_eval_and_training(model: torch.nn.Module, forward: Callable[[torch.nn.Module], torch.Tensor]):
    for precision in ("fp32", "bf16", "int8"):
        with running(model, precision) as inference, torch.no_grad():
            first_tokens = forward(inference.eval())
            whole = forward(inference.train())
            inference.eval()
        tolerance = 1e-5 if precision == "fp32" else 5e-2
        assert first_tokens.shape == whole.shape
        assert torch.allclose(first_tokens.float(), whole.float(), atol=tolerance), (precision, first_tokens, whole)


@pytest.mark.parametrize("classifier", [False, True])
def test_cross_encoder_scores(toy_bert, tmp_path, classifier):
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    torch.manual_seed(3)
    if classifier:
        BertForSequenceClassification(BertConfig.from_pretrained(toy_bert, num_labels=1)).save_pretrained(tmp_path)
        AutoTokenizer.from_pretrained(toy_bert).save_pretrained(tmp_path)
    model = load_model(tmp_path if classifier else toy_bert, "cross-encoder").eval()
    assert first_token_bert(model, model.backbone) is (model.backbone.bert if classifier else model.backbone)
    batch = model.collate(model.tokenize_pairs(QUERIES, PASSAGES), range(len(QUERIES)))
    assert (batch["attention_mask"] == 0).any()  # padded
    assert_same_in_eval_and_training(model, lambda m: m(batch))


def test_cls_pooled_dense_vectors(toy_bert):
    model = load_model(toy_bert, "dense", pooling="cls").eval()
    assert first_token_bert(model, model.passage_tower.backbone) is model.passage_tower.backbone
    batch = model.tokenize_passages(PASSAGES)
    assert (batch["attention_mask"] == 0).any()
    assert_same_in_eval_and_training(model, lambda m: m.embed_passages(batch))
    queries = model.tokenize_queries(QUERIES)
    assert_same_in_eval_and_training(model, lambda m: m.embed_queries(queries))


@pytest.mark.parametrize("m", [2, 40])  # 40: more than any passage's tokens (CLS copies fill the rest)
def test_mebert_first_m_vectors(toy_bert, m):
    model = load_model(toy_bert, "mebert", m=m).eval()
    batch = model.tokenize_passages(PASSAGES)
    assert batch["input_ids"].shape[1] < 40
    assert_same_in_eval_and_training(model, lambda model: model.embed_passages(batch))


def test_training_and_other_architectures_run_whole(toy_bert):
    from transformers import BertConfig, BertModel, DistilBertConfig, DistilBertModel

    model = load_model(toy_bert, "dense", pooling="cls")
    assert first_token_bert(model.train(), model.passage_tower.backbone) is None
    assert first_token_bert(model.eval(), model.passage_tower.backbone) is not None
    assert first_token_bert(model, model.passage_tower.backbone.train()) is None  # a backbone set to train itself
    model.eval()
    distil = DistilBertModel(DistilBertConfig(vocab_size=30, dim=16, n_layers=1, n_heads=2, hidden_dim=32))
    assert first_token_bert(model, distil) is None
    relative = BertConfig.from_pretrained(toy_bert)
    relative.position_embedding_type = "relative_key"
    assert first_token_bert(model, BertModel(relative)) is None


@pytest.mark.parametrize("kind", ["cross-encoder", "dense", "mebert"])
def test_a_tokenizer_saved_to_pad_on_the_left_pads_on_the_right(toy_bert, tmp_path, kind):
    """Position 0 holds the CLS state only with right padding (the backbone gets no position ids), so a checkpoint
    whose tokenizer says left is loaded to pad right: a text in a padded batch scores as it does alone."""
    from transformers import AutoTokenizer

    folder = tmp_path / "left"
    shutil.copytree(toy_bert, folder)
    AutoTokenizer.from_pretrained(toy_bert, padding_side="left").save_pretrained(folder)
    model = load_model(folder, kind).eval()
    assert model.tokenizer.padding_side == "right"
    if kind == "cross-encoder":
        batched = model.score_pairs(QUERIES, PASSAGES, batch_size=4, precision="fp32")
        alone = np.concatenate([model.score_pairs([q], [p], precision="fp32") for q, p in zip(QUERIES, PASSAGES,
                                                                                              strict=True)])
    else:
        batched = model.encode_passages(PASSAGES, batch_size=4, precision="fp32")
        alone = np.concatenate([model.encode_passages([p], precision="fp32") for p in PASSAGES])
    assert np.allclose(batched, alone, atol=1e-5)
