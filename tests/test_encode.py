"""``python -m ance_ir.encode``: end to end on the toy corpus, resuming, sharding and bad input."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TOY_PASSAGES, free_port

from ance_ir.cli import run_cli
from ance_ir.data import InputError
from ance_ir.encode import Shard
from ance_ir.encode.__main__ import main
from ance_ir.index import load_dense_index, stored_vectors
from ance_ir.modeling import DenseEncoder, model_precision

DOCIDS = list(TOY_PASSAGES)
REPO = Path(__file__).resolve().parent.parent


def encode(corpus, model, output, *extra: str) -> None:
    main(["--corpus", str(corpus), "--encoder", str(model), "--output", str(output), "--quiet", *extra])


def vectors_of(folder) -> np.ndarray:
    return stored_vectors(load_dense_index(folder))


@pytest.fixture()
def count_encoded(monkeypatch):
    """Record each ``encode_passages`` call's passage count; raise Ctrl-C on call number ``spy.stop``."""
    calls: list[int] = []
    original = DenseEncoder.encode_passages

    def spy(self, texts, *args, **kwargs):
        if len(calls) == spy.stop:
            raise KeyboardInterrupt
        calls.append(len(texts))
        return original(self, texts, *args, **kwargs)

    spy.stop = None
    monkeypatch.setattr(DenseEncoder, "encode_passages", spy)
    return calls, spy


def test_encode_writes_a_pyserini_index_with_meta(tmp_path, toy_collection, tiny_bert_dir):
    out = tmp_path / "indexes" / "toy"
    encode(toy_collection["corpus"], tiny_bert_dir, out, "--chunk-size", "3", "--pooling", "mean")
    assert sorted(p.name for p in out.iterdir()) == ["docid", "index", "meta.json"]
    assert sorted(p.name for p in out.parent.iterdir()) == ["toy"]  # work folder gone
    dense = load_dense_index(out)
    assert dense.docids == DOCIDS
    meta = json.loads((out / "meta.json").read_text())
    assert meta["encoder"] == str(tiny_bert_dir.resolve()) and meta["pooling"] == "mean"
    assert meta["normalize"] is False and meta["dimension"] == 32 and meta["count"] == len(DOCIDS)
    assert meta["corpus"] == str(toy_collection["corpus"].resolve()) and len(meta["corpus_sha256"]) == 64
    assert meta["index_type"] == "flat" and meta["shard"] is None
    encoder = DenseEncoder.from_pretrained(str(tiny_bert_dir), pooling="mean")
    assert meta["precision"] == model_precision(encoder, "auto")  # what auto meant on this machine, not "auto"
    passages = list(TOY_PASSAGES.values())
    # the CLI's default precision, chunk by chunk as the CLI encodes (int8, auto on CPUs without native bf16, scales
    # each batch's activations as a whole)
    expected = np.concatenate([encoder.encode_passages(passages[i:i + 3], precision="auto")
                               for i in range(0, len(passages), 3)])
    np.testing.assert_allclose(vectors_of(out), expected, rtol=1e-5, atol=1e-5)


def test_passage_max_length_overrides_the_encoders_and_is_recorded(tmp_path, toy_collection, tiny_bert_dir):
    out = tmp_path / "short"
    encode(toy_collection["corpus"], tiny_bert_dir, out, "--pooling", "mean", "--passage-max-length", "3")
    assert json.loads((out / "meta.json").read_text())["encoder_config"]["passage_max_length"] == 3
    encoder = DenseEncoder.from_pretrained(str(tiny_bert_dir), pooling="mean", passage_max_length=3)
    cut = encoder.encode_passages(list(TOY_PASSAGES.values()), precision="auto")
    whole = DenseEncoder.from_pretrained(str(tiny_bert_dir), pooling="mean").encode_passages(
        list(TOY_PASSAGES.values()), precision="auto")
    np.testing.assert_allclose(vectors_of(out), cut, rtol=1e-5, atol=1e-5)
    assert not np.allclose(cut, whole, atol=1e-3)  # [CLS] + 1 token + [SEP]: the cut changed the vectors


def test_interrupted_run_resumes_from_finished_chunks(tmp_path, toy_collection, tiny_bert_dir, count_encoded,
                                                      capsys):
    calls, spy = count_encoded
    corpus, out = toy_collection["corpus"], tmp_path / "toy"
    partial = tmp_path / "toy.partial"
    spy.stop = 1  # Ctrl-C while encoding the second of three chunks
    kept = f"interrupted: 3 of {len(DOCIDS)} passages encoded are kept in {partial}; rerun the same command to resume"
    with pytest.raises(KeyboardInterrupt, match=re.escape(kept)):
        encode(corpus, tiny_bert_dir, out, "--chunk-size", "3")
    assert not out.exists()
    assert sorted(p.name for p in partial.iterdir()) == ["chunk-00000.docid", "chunk-00000.npy", "job.json"]
    assert json.loads((partial / "job.json").read_text())["device"] == "cpu"  # a resume on a GPU is another job

    spy.stop = None
    calls.clear()
    capsys.readouterr()
    encode(corpus, tiny_bert_dir, out, "--chunk-size", "3")
    assert calls == [3, 2]  # only the unfinished chunks were encoded
    said = capsys.readouterr().err
    assert f"resuming from the chunks encoded in {partial}" in said and \
        f"reused 3 of {len(DOCIDS)} passages already encoded" in said
    assert not partial.exists() and load_dense_index(out).docids == DOCIDS

    encode(corpus, tiny_bert_dir, tmp_path / "uninterrupted", "--chunk-size", "3")
    np.testing.assert_array_equal(vectors_of(out), vectors_of(tmp_path / "uninterrupted"))


def test_interrupted_while_building_the_index_keeps_every_chunk(tmp_path, toy_collection, tiny_bert_dir,
                                                                count_encoded, monkeypatch):
    import ance_ir.encode.corpus_encoder as corpus_encoder

    calls, _ = count_encoded
    corpus, out, partial = toy_collection["corpus"], tmp_path / "toy", tmp_path / "toy.partial"

    def interrupted(*_, **__):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(corpus_encoder, "build_index", interrupted)  # Ctrl-C inside faiss, after the last chunk
        kept = (f"interrupted while building the flat index: every chunk is finished and kept in {partial}; rerun "
                "the same command to go on from them")
        with pytest.raises(KeyboardInterrupt, match=re.escape(kept)):
            encode(corpus, tiny_bert_dir, out, "--chunk-size", "3")
    assert not out.exists() and (partial / "chunk-00001.npy").is_file()
    calls.clear()
    encode(corpus, tiny_bert_dir, out, "--chunk-size", "3")
    assert calls == [] and load_dense_index(out).docids == DOCIDS  # nothing encoded again


def test_resume_refuses_a_different_job(tmp_path, toy_collection, tiny_bert_dir, count_encoded, capsys):
    import torch
    from transformers import BertModel

    calls, spy = count_encoded
    corpus, out = toy_collection["corpus"], tmp_path / "toy"
    spy.stop = 1
    with pytest.raises(KeyboardInterrupt):
        encode(corpus, tiny_bert_dir, out, "--chunk-size", "3")
    spy.stop = None
    with pytest.raises(InputError, match=r"toy.partial: holds an unfinished job with a different encoder_co"):
        encode(corpus, tiny_bert_dir, out, "--chunk-size", "3", "--normalize")
    with pytest.raises(InputError, match="different chunk_size"):
        encode(corpus, tiny_bert_dir, out, "--chunk-size", "4")
    with pytest.raises(InputError, match="different batch_size"):  # batch-mates change int8 and bf16 vectors
        encode(corpus, tiny_bert_dir, out, "--chunk-size", "3", "--batch-size", "5")
    trained_again = tmp_path / "trained-again"
    shutil.copytree(tiny_bert_dir, trained_again)
    calls.clear()
    spy.stop = 1
    with pytest.raises(KeyboardInterrupt):
        encode(corpus, trained_again, tmp_path / "again", "--chunk-size", "3")
    spy.stop = None
    model = BertModel.from_pretrained(trained_again)
    with torch.no_grad():
        model.encoder.layer[0].output.dense.bias.add_(1.0)
    model.save_pretrained(trained_again)  # the same folder, other weights
    with pytest.raises(InputError, match="again.partial: holds an unfinished job with a different weights_sha256"):
        encode(corpus, trained_again, tmp_path / "again", "--chunk-size", "3")
    with open(corpus, "a") as f:
        f.write(json.dumps({"id": "d9", "contents": "a new passage"}) + "\n")
    argv = ["--corpus", str(corpus), "--encoder", str(tiny_bert_dir), "--output", str(out), "--chunk-size=3"]
    with pytest.raises(SystemExit) as exit_info:
        run_cli(main, argv)
    assert exit_info.value.code == 2
    assert "different corpus_sha256" in capsys.readouterr().err
    assert not out.exists() and (tmp_path / "toy.partial" / "chunk-00000.npy").is_file()


def test_shards_merge_into_the_unsharded_index(tmp_path, toy_collection, tiny_bert_dir):
    corpus = toy_collection["corpus"]
    encode(corpus, tiny_bert_dir, tmp_path / "full", "--chunk-size", "2")
    for i in (1, 0):
        encode(corpus, tiny_bert_dir, tmp_path / f"shard{i}", "--chunk-size", "2", "--shard", f"{i}/2")
    shard1 = load_dense_index(tmp_path / "shard1")
    assert shard1.docids == DOCIDS[4:]
    assert shard1.meta["shard"] == {"index": 1, "count": 2, "start": 4, "stop": 8, "batch_size": 32, "chunk_size": 2,
                                    "device": "cpu"}
    assert (tmp_path / "shard1" / "vectors.npy").is_file()

    shards = [str(tmp_path / "shard1"), str(tmp_path / "shard0")]
    main(["merge", "--inputs", *shards, "--output", str(tmp_path / "m")])
    merged, full = load_dense_index(tmp_path / "m"), load_dense_index(tmp_path / "full")
    assert merged.docids == full.docids == DOCIDS
    assert merged.meta["corpus_sha256"] == full.meta["corpus_sha256"]
    np.testing.assert_array_equal(stored_vectors(merged), stored_vectors(full))

    main(["merge", "--inputs", *shards, "--output", str(tmp_path / "h"), "--index-type", "hnsw"])
    assert load_dense_index(tmp_path / "h").meta["index_type"] == "hnsw"


def test_a_finished_shard_is_reused_only_from_the_same_weights_and_batches(tmp_path, toy_collection, tiny_bert_dir):
    from ance_ir.encode.distributed import finished_shard
    from ance_ir.modeling.inference import weights_sha256
    from ance_ir.modeling.kinds import load_model

    corpus, out = toy_collection["corpus"], tmp_path / "shard0"
    encode(corpus, tiny_bert_dir, out, "--shard", "0/2")
    encoder = load_model(tiny_bert_dir)
    encoder.inference_precision = "auto"  # the CLI's default (int8 on some CPUs)
    assert load_dense_index(out).meta["weights_sha256"] == weights_sha256(encoder)
    name = str(tiny_bert_dir.resolve())
    sizes = {"batch_size": 32, "chunk_size": 2048}  # the CLI's defaults
    assert finished_shard(out, Shard(0, 2), corpus, name, encoder, **sizes)
    assert not finished_shard(out, Shard(1, 2), corpus, name, encoder, **sizes)
    assert not finished_shard(out, Shard(0, 2), corpus, name, encoder, **{**sizes, "batch_size": 2})
    assert not finished_shard(out, Shard(0, 2), corpus, name, encoder, **{**sizes, "chunk_size": 3})
    with torch.no_grad():  # trained again in place: same folder, config and precision, other weights
        next(encoder.parameters()).add_(1.0)
    assert not finished_shard(out, Shard(0, 2), corpus, name, encoder, **sizes)


def test_shard_positions_cover_the_corpus_once():
    assert [list(Shard(i, 3).positions(8)) for i in range(3)] == [[0, 1], [2, 3, 4], [5, 6, 7]]
    assert Shard.parse("2/4") == Shard(2, 4)


@pytest.mark.parametrize("spec", ["2/2", "1", "a/b", "1/-2", "0/0", "1/2/3"])
def test_bad_shard_spec_is_rejected(tmp_path, toy_collection, tiny_bert_dir, capsys, spec):
    with pytest.raises(SystemExit) as exit_info:
        encode(toy_collection["corpus"], tiny_bert_dir, tmp_path / "x", "--shard", spec)
    assert exit_info.value.code == 2
    assert "argument --shard: shard" in capsys.readouterr().err


@pytest.mark.parametrize(("lines", "message"), [
    (['{"id": "a", "contents": "x"}', '{"id": "b", "contents": "y"}', "{not json"], ":3: malformed JSON"),
    (['{"id": "a", "contents": "x"}', '{"id": "a", "contents": "y"}'], ":2: duplicate id 'a'"),
    (['{"id": "a b", "contents": "x"}'], ":1: id 'a b' contains whitespace"),
])
def test_bad_corpus_fails_with_one_line_and_leaves_nothing(tmp_path, tiny_bert_dir, capsys, lines, message):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n".join(lines) + "\n")
    argv = ["--corpus", str(corpus), "--encoder", str(tiny_bert_dir), "--output", str(tmp_path / "ix" / "x")]
    with pytest.raises(SystemExit) as exit_info:
        run_cli(main, argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"error: {corpus}{message}")
    assert not (tmp_path / "ix").exists()


def test_missing_corpus_and_existing_output_are_errors(tmp_path, toy_collection, tiny_bert_dir):
    with pytest.raises(InputError, match="absent.jsonl: no such corpus file"):
        encode(tmp_path / "absent.jsonl", tiny_bert_dir, tmp_path / "ix")
    (tmp_path / "ix").mkdir()
    with pytest.raises(ValueError, match="already exists; pass --force"):
        encode(toy_collection["corpus"], tiny_bert_dir, tmp_path / "ix")
    encode(toy_collection["corpus"], tiny_bert_dir, tmp_path / "ix", "--force")
    assert load_dense_index(tmp_path / "ix").docids == DOCIDS


def _torchrun(*args: str, nproc: int = 2) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc),
                           "--master-addr", "127.0.0.1", "--master-port", str(free_port()), "-m", "ance_ir.encode",
                           *args],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def test_torchrun_ranks_encode_shards_and_rank0_merges(tmp_path, toy_collection, tiny_bert_dir):
    corpus = toy_collection["corpus"]
    common = ["--corpus", str(corpus), "--encoder", str(tiny_bert_dir), "--pooling", "mean", "--chunk-size", "3",
              "--precision", "fp32", "--quiet"]
    done = _torchrun(*common, "--output", str(tmp_path / "ddp"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.count("wrote ") == 1  # rank 0 alone merges and reports
    encode(corpus, tiny_bert_dir, tmp_path / "single", "--pooling", "mean", "--chunk-size", "3", "--precision", "fp32")

    ddp, single = load_dense_index(tmp_path / "ddp"), load_dense_index(tmp_path / "single")
    assert ddp.docids == single.docids == DOCIDS
    np.testing.assert_allclose(stored_vectors(ddp), stored_vectors(single), rtol=1e-5, atol=1e-5)
    assert ddp.meta == single.meta  # the same meta.json as a one-process run (shard: null, no merged_from)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("ddp")) == ["ddp"]  # shards removed

    again = _torchrun(*common, "--output", str(tmp_path / "ddp"))  # existing output: one error line, exit != 0
    assert again.returncode != 0
    errors = [line for line in again.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: {tmp_path / 'ddp'} already exists; pass --force to replace it"], again.stderr[-3000:]


def test_torchrun_bad_corpus_is_one_error_line_and_no_output(tmp_path, tiny_bert_dir):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": "a", "contents": "x"}\n{"id": "b", "contents": "y"}\n{not json\n')
    done = _torchrun("--corpus", str(corpus), "--encoder", str(tiny_bert_dir), "--output", str(tmp_path / "ix" / "x"))
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(f"error: {corpus}:3: malformed JSON"), done.stderr[-3000:]
    assert not (tmp_path / "ix" / "x").exists()


def test_launch_from_env(monkeypatch):
    from ance_ir.encode.distributed import Launch

    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    assert Launch.from_env() is None
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert Launch.from_env() is None
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert Launch.from_env().shard == Shard(3, 4)
    monkeypatch.delenv("RANK")
    with pytest.raises(ValueError, match="launch with torchrun"):
        Launch.from_env()


def test_the_corpus_check_before_encoding_shows_a_bar_past_its_delay(tmp_path, toy_collection, tiny_bert_dir,
                                                                     monkeypatch, capsys):
    args = ["--corpus", str(toy_collection["corpus"]), "--encoder", str(tiny_bert_dir)]
    assert main([*args, "--output", str(tmp_path / "a")]) == 0
    assert "check corpus" not in capsys.readouterr().err  # quicker than BAR_DELAY_S
    monkeypatch.setattr("ance_ir.data.resume.BAR_DELAY_S", 0)
    assert main([*args, "--output", str(tmp_path / "b")]) == 0
    assert f"check corpus: {len(DOCIDS)}passage [" in capsys.readouterr().err
    assert main([*args, "--output", str(tmp_path / "c"), "--quiet"]) == 0
    assert "check corpus" not in capsys.readouterr().err


def test_the_encode_command_loads_torch_only_once_its_command_line_is_checked():
    """Importing ``python -m ance_ir.encode``'s module loads no torch: a Ctrl-C while it starts is one line, and a bad
    flag is refused at once."""
    code = "import sys, ance_ir.encode.__main__; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
