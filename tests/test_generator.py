"""The query generator (model kind ``generator``, ``task: generator``): warm-starting from a BERT, saving and loading
through the one loader, seeded top-k/nucleus sampling, perplexity, training with exact resume, and a public
sequence-to-sequence checkpoint loading as it is."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import TOY_PASSAGES, TOY_QRELS, TOY_TOPICS
from test_train_run import assert_same_training, toy_config, training_records
from transformers import BertModel

from ance_ir.modeling.generator import QueryGenerator, sample_keys, sample_tokens, uniforms
from ance_ir.modeling.inference import weights_sha256
from ance_ir.modeling.kinds import load_model, saved_kind
from ance_ir.train import train
from ance_ir.train.layout import RunDir

TEXTS = list(TOY_PASSAGES.values())
SETTINGS = {"ance": False, "task.name": "generator", "model": None, "batch_size": 2, "lr": 3e-3, "pooling": None,
            "query_max_length": 12, "passage_max_length": 16}
PAIRS = [(TOY_PASSAGES[d], TOY_TOPICS[q]) for q, judged in TOY_QRELS.items() for d in judged]


@pytest.fixture(scope="module")
def generator(toy_bert) -> QueryGenerator:
    torch.manual_seed(0)
    return load_model(toy_bert, "generator", query_max_length=12)


def test_a_bert_warm_starts_an_encoder_decoder_that_saves_and_loads_as_a_generator(generator, toy_bert, tmp_path):
    assert isinstance(generator, QueryGenerator) and generator.fresh
    assert type(generator.model).__name__ == "EncoderDecoderModel"
    assert generator.model.config.decoder.is_decoder and generator.model.config.decoder.add_cross_attention
    bert = BertModel.from_pretrained(toy_bert).state_dict()
    for half in (generator.model.encoder, generator.model.decoder.bert):  # both start from the checkpoint
        weights = half.state_dict()
        assert all(torch.equal(weights[k], bert[k]) for k in weights if "crossattention" not in k)
    assert (generator.start_id, generator.eos_id) == (generator.tokenizer.cls_token_id,
                                                      generator.tokenizer.sep_token_id)
    generator.save_pretrained(tmp_path / "gen")
    assert saved_kind(tmp_path / "gen") == "generator"
    again = load_model(tmp_path / "gen")
    assert isinstance(again, QueryGenerator) and not again.fresh
    assert again.settings == generator.settings == {"query_max_length": 12, "passage_max_length": 64}
    mine, theirs = generator.state_dict(), again.state_dict()
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)
    assert weights_sha256(again.model) == weights_sha256(generator.model)
    assert again.generate(TEXTS, n=2, seed=1) == generator.generate(TEXTS, n=2, seed=1)
    with pytest.raises(ValueError, match="is a 'generator' model, expected a 'dense' model"):
        load_model(tmp_path / "gen", "dense")
    with pytest.raises(ValueError, match="pooling: not a setting of a generator"):
        load_model(tmp_path / "gen", pooling="mean")


def test_sampling_is_reproducible_from_the_seed_and_independent_of_the_batch(generator):
    first = generator.generate(TEXTS, n=3, seed=7, max_length=6)
    assert len(first) == len(TEXTS) and all(len(queries) == 3 for queries in first)
    assert generator.generate(TEXTS, n=3, seed=7, max_length=6) == first
    assert generator.generate(TEXTS, n=3, seed=7, max_length=6, batch_size=1) == first
    assert generator.generate(TEXTS[::-1], n=3, seed=7, max_length=6, batch_size=3)[::-1] == first
    assert generator.generate(TEXTS[:2], n=3, seed=7, max_length=6) == first[:2]  # its own text decides
    assert generator.generate(TEXTS, n=3, seed=8, max_length=6) != first
    assert generator.generate([TEXTS[0], TEXTS[0]], n=2, seed=7, max_length=6) == [first[0][:2]] * 2
    for queries in first:
        assert all(q and len(generator.tokenizer(q, add_special_tokens=False)["input_ids"]) <= 6 for q in queries)


def test_greedy_limits_and_the_top_k_top_p_cuts(generator):
    greedy = generator.generate(TEXTS[:3], n=2, seed=0, top_k=1)
    assert greedy == generator.generate(TEXTS[:3], n=2, seed=5, top_p=1e-9, top_k=0)  # the most likely token
    assert all(a == b for a, b in greedy)
    logits = torch.log(torch.tensor([[0.2, 0.5, 0.3], [0.2, 0.5, 0.3], [0.2, 0.5, 0.3], [0.2, 0.5, 0.3]]))
    u = torch.tensor([0.4, 0.6, 0.85, 0.99], dtype=torch.float64)
    assert sample_tokens(logits, u, 0, 1.0, 1.0).tolist() == [1, 2, 0, 0]  # cumulative 0.5, 0.8, 1.0 best first
    assert sample_tokens(logits, u, 2, 1.0, 1.0).tolist() == [1, 1, 2, 2]  # 0.625, 1.0 after the top-2 cut
    assert sample_tokens(logits, u, 0, 0.7, 1.0).tolist() == [1, 1, 2, 2]  # 0.5 + 0.3 reach 0.7: two kept
    assert sample_tokens(logits, u, 0, 0.5, 1.0).tolist() == [1, 1, 1, 1]
    keys = sample_keys(["a", "b"], 2, 0)
    assert len(set(keys.tolist())) == 4 and keys.tolist() == sample_keys(["a", "b"], 2, 0).tolist()
    draws = uniforms(keys, 3)
    assert ((draws >= 0) & (draws < 1)).all() and not (draws == uniforms(keys, 4)).any()
    with pytest.raises(ValueError, match="top_p in"):
        generator.generate(TEXTS, top_p=0.0)
    with pytest.raises(ValueError, match="at most the decoder's 64 positions, got 65"):
        generator.generate(TEXTS, max_length=65)


def test_perplexity_is_finite_and_falls_with_training(toy, tmp_path):
    torch.manual_seed(0)
    before = load_model(toy / "bert-nodrop", "generator", query_max_length=12, passage_max_length=16)
    start = before.perplexity(PAIRS)
    assert math.isfinite(start) and start > 1
    assert before.perplexity(PAIRS, batch_size=1) == pytest.approx(start, rel=1e-5)
    run = tmp_path / "run"
    train(toy_config(toy, run, **{**SETTINGS, "model": str(toy / "bert-nodrop"), "max_steps": 30}))
    losses = [r["loss"] for r in training_records(run)]
    assert len(losses) == 30 and all(map(math.isfinite, losses)) and sum(losses[-5:]) < sum(losses[:5])
    trained = load_model(RunDir(run).final)
    assert isinstance(trained, QueryGenerator) and saved_kind(RunDir(run).final) == "generator"
    assert trained.perplexity(PAIRS) < 0.5 * start
    card = (RunDir(run).final / "README.md").read_text()
    assert "pipeline_tag: text2text-generation" in card and "python -m ance_ir.expand --corpus CORPUS" in card


def test_the_task_resumes_exactly(toy, tmp_path):
    settings = {**SETTINGS, "model": str(toy / "bert"), "max_steps": 6}  # with dropout: the RNG is resumed too
    paused = tmp_path / "paused"
    train(toy_config(toy, paused, stop_at=2, **settings))
    train(toy_config(toy, paused, **settings))
    train(toy_config(toy, tmp_path / "straight", **settings))
    assert_same_training(paused, tmp_path / "straight")


@pytest.mark.parametrize(("change", "message"), [
    ({"in_batch": True}, "task.in_batch: is set .* but not used: a generator is trained on"),
    ({"eval_topics": "topics.tsv"}, "refresh.eval_topics: is set .* but not used: a generator retrieves nothing"),
    ({"pooling": "mean"}, "model.pooling: is a dual-encoder setting"),
    ({"kind": "dense"}, "task 'generator' trains 'generator' models"),
    ({"loss": "bce"}, "loss.name: task 'generator' trains with its own loss"),
])
def test_the_task_refuses_what_a_generator_cannot_train_with(toy, tmp_path, change, message):
    settings = {**SETTINGS, "model": str(toy / "bert"), **change}
    with pytest.raises(ValueError, match=message):
        toy_config(toy, tmp_path / "run", **settings)


def test_a_seq2seq_checkpoint_loads_as_it_is(toy_bert, tmp_path):
    """A public doc2query model (castorini/doc2query-t5-base-msmarco) is an AutoModelForSeq2SeqLM: a tiny random T5
    with the toy tokenizer stands in for it."""
    from transformers import AutoTokenizer, T5Config, T5ForConditionalGeneration

    tokenizer = AutoTokenizer.from_pretrained(toy_bert)
    config = T5Config(vocab_size=len(tokenizer), d_model=16, d_ff=32, d_kv=8, num_layers=1, num_heads=2,
                      decoder_start_token_id=tokenizer.pad_token_id, pad_token_id=tokenizer.pad_token_id,
                      eos_token_id=tokenizer.sep_token_id)
    torch.manual_seed(0)
    T5ForConditionalGeneration(config).save_pretrained(tmp_path / "t5")
    tokenizer.save_pretrained(tmp_path / "t5")
    model = load_model(tmp_path / "t5", "generator")
    assert type(model.model).__name__ == "T5ForConditionalGeneration" and not model.fresh
    assert (model.start_id, model.eos_id, model.pad_id) == (0, tokenizer.sep_token_id, 0)
    queries = model.generate(TEXTS[:2], n=2, seed=3, max_length=5)
    assert queries == model.generate(TEXTS[:2], n=2, seed=3, max_length=5, batch_size=1)
    model.model.generation_config.repetition_penalty = 10.0  # a checkpoint's own generation settings do not apply
    model.model.generation_config.no_repeat_ngram_size = 1
    assert model.generate(TEXTS[:2], n=2, seed=3, max_length=5) == queries
    assert model.model.generation_config.repetition_penalty == 10.0
    assert math.isfinite(model.perplexity(PAIRS))
    model.save_pretrained(tmp_path / "t5-saved")
    assert load_model(tmp_path / "t5-saved").generate(TEXTS[:2], n=2, seed=3, max_length=5) == queries
