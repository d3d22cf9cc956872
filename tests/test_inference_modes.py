"""Precision modes of DenseEncoder.encode_*: close to fp32, same shape and order, clear errors."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from conftest import TOY_PASSAGES, TOY_TOPICS, run_here

from ance_ir.modeling import PRECISIONS, DenseEncoder, model_precision, quantize_int8, resolve_precision
from ance_ir.modeling.inference import native_bf16, resolve_device

PASSAGES = list(TOY_PASSAGES.values())
QUERIES = list(TOY_TOPICS.values())


@pytest.fixture(scope="module")
def tiny(tiny_bert_dir) -> DenseEncoder:
    return DenseEncoder.from_pretrained(tiny_bert_dir, pooling="mean", normalize=True)


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.mark.parametrize(("precision", "bound"), [("bf16", 0.99), ("int8", 0.9),
                                                   ("auto", 0.99 if native_bf16("cpu") else 0.9)])
@pytest.mark.parametrize("side", ["passages", "queries"])
def test_modes_are_close_to_fp32_in_input_order(tiny, precision, bound, side):
    texts = PASSAGES if side == "passages" else QUERIES
    encode = getattr(tiny, f"encode_{side}")
    reference = encode(texts, batch_size=3)
    vectors = encode(texts, batch_size=3, precision=precision)
    assert vectors.shape == reference.shape and vectors.dtype == np.float32
    cosines = _cosines(vectors, reference)
    assert cosines.min() > bound
    # row i is text i: each vector is nearest to its own fp32 vector (the texts are all different)
    assert (np.argmax(vectors @ reference.T, axis=1) == np.arange(len(texts))).all()


def test_fp32_is_the_default_and_exact(tiny):
    assert np.array_equal(tiny.encode_passages(PASSAGES), tiny.encode_passages(PASSAGES, precision="fp32"))


def test_inference_precision_attribute_sets_the_default(tiny_bert_dir):
    model = DenseEncoder.from_pretrained(tiny_bert_dir, pooling="mean")
    bf16 = model.encode_passages(PASSAGES, precision="bf16")
    model.inference_precision = "bf16"
    assert np.array_equal(model.encode_passages(PASSAGES), bf16)
    assert not np.array_equal(model.encode_passages(PASSAGES, precision="fp32"), bf16)


def test_modes_leave_the_model_in_fp32_and_its_training_state(tiny_bert_dir):
    model = DenseEncoder.from_pretrained(tiny_bert_dir).train()
    for precision in ("bf16", "int8"):
        model.encode_passages(PASSAGES, precision=precision)
    assert model.training
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert all(type(m) is torch.nn.Linear for m in model.modules() if isinstance(m, torch.nn.Linear))


def test_int8_copy_follows_weight_updates(tiny_bert_dir):
    model = DenseEncoder.from_pretrained(tiny_bert_dir, pooling="mean")
    before = model.encode_passages(PASSAGES, precision="int8")
    assert np.array_equal(model.encode_passages(PASSAGES, precision="int8"), before)  # cached copy
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1.5)  # an in-place update, like an optimizer step
    after = model.encode_passages(PASSAGES, precision="int8")
    assert _cosines(after, model.encode_passages(PASSAGES)).min() > 0.9
    assert not np.allclose(after, before, atol=1e-3)


def test_int8_has_one_weight_scale_per_output_channel(tiny):
    quantised = [m for m in quantize_int8(tiny).modules() if type(m).__name__ == "Linear" and callable(m.weight)]
    assert quantised and all(m.weight().qscheme() == torch.per_channel_affine for m in quantised)
    scales = quantised[0].weight().q_per_channel_scales()
    assert len(scales) == quantised[0].out_features and len(set(scales.tolist())) > 1


def test_auto_without_native_bf16_is_int8_for_normalised_vectors_only(tiny, tiny_bert_dir):
    from ance_ir.modeling.kinds import load_model

    assert model_precision(tiny, "auto") == ("bf16" if native_bf16("cpu") else "int8")
    assert model_precision(tiny) == "fp32"  # the library default stays exact
    assert resolve_precision("auto", "cpu") == ("bf16" if native_bf16("cpu") else "fp32")
    assert load_model(tiny_bert_dir, "dense", pooling="cls", normalize=True).cpu_auto_precision == "int8"
    for kind, settings in (("dense", {"pooling": "mean", "normalize": False}), ("dense", {"pooling": "cls"}),
                           ("mebert", {}), ("poly-encoder", {})):  # unnormalised vectors
        model = load_model(tiny_bert_dir, kind, **settings)
        assert model.cpu_auto_precision == "fp32", (kind, settings)
        assert model_precision(model, "auto") == ("bf16" if native_bf16("cpu") else "fp32"), kind


def test_kernels_capped_to_avx2_count_as_no_native_bf16():
    code = ("from ance_ir.modeling import native_bf16, resolve_precision; "
            "print(native_bf16('cpu'), resolve_precision('auto', 'cpu', 'int8'))")
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "avx2"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["False", "int8"]


def test_bf16_on_a_cpu_without_it_is_noted_once():
    code = ("import torch; from ance_ir.train.optim import Precision; "
            "from ance_ir.modeling.inference import note_emulated_bf16; "
            "[note_emulated_bf16(p, 'cpu') for p in ('fp32', 'int8', 'auto')]; Precision('fp32', torch.device('cpu')); "
            "Precision('bf16', torch.device('cpu'))")
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "avx2"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert result.stderr.count("note: this CPU has no native bf16") == 1, result.stderr


def test_commands_check_precision_resolves_and_notes_emulated_bf16_once():
    code = ("from ance_ir.modeling.inference import check_precision; "
            "print([check_precision(p, 'cpu') for p in ('fp32', 'auto', 'bf16')])")
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "avx2"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "['fp32', 'fp32', 'bf16']"
    assert result.stderr.count("note: this CPU has no native bf16") == 1, result.stderr


def test_unknown_mode_errors_clearly(tiny):
    with pytest.raises(ValueError, match=r"unknown precision 'fp8'; choose from auto, fp32, bf16, fp16, int8"):
        tiny.encode_passages(PASSAGES, precision="fp8")
    with pytest.raises(ValueError, match="unknown precision"):
        tiny.encode_queries(QUERIES, precision="half")


def test_device_specific_modes():
    assert resolve_precision("fp32", "cpu") == "fp32"
    assert resolve_precision("int8", "cpu") == "int8"
    assert resolve_precision("auto", "cpu") == ("bf16" if native_bf16("cpu") else "fp32")
    with pytest.raises(ValueError, match="fp16 needs a CUDA device"):
        resolve_precision("fp16", "cpu")
    with pytest.raises(ValueError, match="int8 .* CPU only"):
        resolve_precision("int8", "cuda")
    assert set(PRECISIONS) == {"auto", "fp32", "bf16", "fp16", "int8"}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("precision", ["fp16", "auto"])
def test_gpu_half_precision_is_close_to_fp32(tiny_bert_dir, precision):
    model = DenseEncoder.from_pretrained(tiny_bert_dir, pooling="mean").to("cuda")
    assert _cosines(model.encode_passages(PASSAGES, precision=precision), model.encode_passages(PASSAGES)).min() > 0.99


def test_device_defaults_to_cuda_only_where_torch_sees_it():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(None).type == ("cuda" if torch.cuda.is_available() else "cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal where torch sees no GPU")
@pytest.mark.parametrize("cli", ["encode", "search", "rerank", "expand"])
def test_every_model_cli_refuses_a_cuda_device_without_a_gpu_before_reading(cli):
    """Each command names a missing input; the device is refused first, with the one-line error of a bad input."""
    args = {"encode": "--corpus missing.jsonl --encoder minilm --output x",
            "search": "--topics missing.tsv --index missing --output x.trec",
            "rerank": "--run missing.trec --topics missing.tsv --corpus missing.jsonl --model minilm --output x.trec",
            "expand": "--corpus missing.jsonl --generator missing --output x.jsonl"}[cli]
    done = run_here(f"ance_ir.{cli}", *args.split(), "--device", "cuda")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["error: device cuda: torch sees no CUDA GPU"]


def test_encode_cli_rejects_a_bad_precision_before_reading(capsys):
    from ance_ir.encode.__main__ import main

    with pytest.raises(ValueError, match="unknown precision 'fp9'"):
        main(["--corpus", "missing.jsonl", "--encoder", "minilm", "--output", "x", "--precision", "fp9"])
    with pytest.raises(ValueError, match="fp16 needs a CUDA device"):
        main(["--corpus", "missing.jsonl", "--encoder", "minilm", "--output", "x", "--precision", "fp16",
              "--device", "cpu"])
