"""Shared fixtures and helpers: tiny random BERTs with their tokenizer, a small toy collection, and running the
CLIs (in this process or as ``python -m``) with the one-line refusal every bad input must get."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

TOY_PASSAGES = {
    "d1": "the cat sat on the mat",
    "d2": "dogs chase cats in the park",
    "d3": "a recipe for baking bread at home",
    "d4": "bread flour water salt and yeast",
    "d5": "the stock market fell sharply today",
    "d6": "investors sold shares as markets dropped",
    "d7": "how to train a puppy to sit",
    "d8": "the history of the roman empire",
}
TOY_TOPICS = {"q1": "cat on a mat", "q2": "how to bake bread", "q3": "stock market drop"}
TOY_QRELS = {"q1": {"d1": 2, "d2": 1}, "q2": {"d3": 2, "d4": 1}, "q3": {"d5": 2, "d6": 2}}


def write_toy_collection(root: Path) -> Path:
    """``corpus.jsonl``, ``topics.tsv`` and ``qrels.txt`` of the toy collection, written into ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps({"id": d, "contents": t}) + "\n"
                                               for d, t in TOY_PASSAGES.items()))
    (root / "topics.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in TOY_TOPICS.items()))
    (root / "qrels.txt").write_text("".join(f"{q} 0 {d} {g}\n" for q, j in TOY_QRELS.items() for d, g in j.items()))
    return root


def toy_sections(collection: Path, output: Path, *layers: dict) -> dict:
    """A sectioned training config on the toy collection in ``collection`` writing ``output`` (random negatives,
    NLL, lr 1e-3), with each of ``layers`` merged into it in turn, section by section (None removes a setting)."""
    config: dict = {
        "output": str(output), "seed": 3, "device": "cpu", "threads": 1, "progress": False, "log_every": 1,
        "data": {"corpus": str(collection / "corpus.jsonl"), "topics": str(collection / "topics.tsv"),
                 "qrels": str(collection / "qrels.txt"), "min_positive_grade": 1},
        "negatives": {"name": "random"}, "loss": {"name": "nll"}, "optim": {"lr": 1e-3},
    }
    for layer in layers:
        for key, value in layer.items():
            merged = {**config.get(key, {}), **value} if isinstance(value, dict) else value
            config[key] = {k: v for k, v in merged.items() if v is not None} if isinstance(merged, dict) else merged
    return config


def load_sections(path: Path, settings: dict):
    """The training config of ``settings``, written to ``path`` as YAML and read back."""
    import yaml

    from ance_ir.train import build_config

    path.write_text(yaml.safe_dump(settings))
    return build_config(path, {})


class Terminal(io.StringIO):
    """A stderr that says it is a terminal: what tqdm draws there (bars shown on a terminal only) is kept."""

    def isatty(self) -> bool:
        return True


def run_module(*args: str) -> subprocess.CompletedProcess:
    """``python -m ARGS`` in a fresh interpreter, its output captured as text."""
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=600)


def module_main(module: str) -> Callable:
    """The ``main`` that ``python -m MODULE`` runs: its package's ``__main__``'s, or a module file's own
    (``ance_ir.index.compress``)."""
    import importlib

    try:
        return importlib.import_module(f"{module}.__main__").main
    except ModuleNotFoundError as e:
        if e.name != f"{module}.__main__":
            raise
        return importlib.import_module(module).main


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (for a torchrun or process group's master)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_here(module: str, *args: str) -> subprocess.CompletedProcess:
    """``python -m MODULE ARGS`` run in this process (its ``main`` through ``run_cli``), its exit status and its
    stdout and stderr captured as :func:`run_module` captures them; for a CLI whose behaviour under test needs no
    fresh interpreter (saves the seconds each interpreter spends importing torch)."""
    import contextlib

    from ance_ir.cli import run_cli

    main = module_main(module)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exit_:
        run_cli(main, list(args))
    return subprocess.CompletedProcess([module, *args], exit_.value.code or 0, out.getvalue(), err.getvalue())


def run_main(main: Callable[[list[str] | None], int | None], *args: str,
             capsys: pytest.CaptureFixture) -> tuple[int, str]:
    """Run a CLI's ``main`` in this process as ``python -m`` runs it: its exit status and its stderr."""
    from ance_ir.cli import run_cli

    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        run_cli(main, list(args))
    return exit_.value.code, capsys.readouterr().err


def interrupt_at_call(patch: pytest.MonkeyPatch, owner: type, name: str, call: int = 0) -> list[list[str]]:
    """Patch the method ``owner.name`` (taking queries first) to raise KeyboardInterrupt at its ``call``-th call
    (from 1; 0: never) and otherwise run as before; returns the list of each call's query ids."""
    original, calls = getattr(owner, name), []

    def counted(self, queries, *args, **kwargs):
        calls.append(list(queries))
        if len(calls) == call:
            raise KeyboardInterrupt
        return original(self, queries, *args, **kwargs)

    patch.setattr(owner, name, counted)
    return calls


def assert_refused(done: tuple[int, str] | subprocess.CompletedProcess, message: str, output: Path) -> None:
    """Exit status 2, one ``error: ...`` line containing ``message``, and ``output`` not written."""
    code, err = (done.returncode, done.stderr) if isinstance(done, subprocess.CompletedProcess) else done
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], err
    assert not output.exists()


def assert_same_run(run: dict, expected: dict, rtol: float = 1e-5) -> None:
    """The same queries and rankings with scores equal to rounding: queries encoded in other batches are padded
    to other lengths, which moves float32 sums in the last digits on some CPUs' kernels."""
    assert {q: [d for d, _ in hits] for q, hits in run.items()} == {q: [d for d, _ in hits]
                                                                   for q, hits in expected.items()}
    for qid, hits in run.items():
        assert [s for _, s in hits] == pytest.approx([s for _, s in expected[qid]], rel=rtol)


@pytest.fixture(autouse=True)
def keep_torch_threads():
    """A test training in-process with ``threads: 1`` must not slow down the tests after it."""
    import torch

    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory) -> Path:
    """A randomly initialised 2-layer BERT (hidden size 32) saved in Hugging Face layout."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    path = tmp_path_factory.mktemp("tiny-bert")
    words = sorted({w for text in [*TOY_PASSAGES.values(), *TOY_TOPICS.values()] for w in text.split()})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizerFast(str(path / "vocab.txt"), do_lower_case=True).save_pretrained(path)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=512)
    BertModel(config).save_pretrained(path)
    return path


@pytest.fixture()
def toy_collection(tmp_path) -> dict[str, Path]:
    """Corpus JSONL, topics TSV and qrels for 8 passages and 3 queries."""
    write_toy_collection(tmp_path)
    return {"corpus": tmp_path / "corpus.jsonl", "topics": tmp_path / "topics.tsv", "qrels": tmp_path / "qrels.txt"}


@pytest.fixture(scope="session")
def rag24_home(tmp_path_factory) -> Path:
    """An ``$ANCE_IR_HOME`` with rag24-mini fetched (reuses the user's download cache when present)."""
    import os

    from ance_ir.datasets import fetch
    from ance_ir.datasets.home import ance_ir_home

    downloads = ance_ir_home() / "downloads"
    home = tmp_path_factory.mktemp("ance_ir_home")
    if downloads.is_dir():
        (home / "downloads").symlink_to(downloads)
    previous = os.environ.get("ANCE_IR_HOME")
    os.environ["ANCE_IR_HOME"] = str(home)
    fetch("rag24-mini")
    yield home
    if previous is None:
        os.environ.pop("ANCE_IR_HOME")
    else:
        os.environ["ANCE_IR_HOME"] = previous


def make_tiny_bert(path: Path, dropout: float = 0.1) -> Path:
    """A random 3-layer BERT (hidden 32) with a vocabulary covering the toy texts (one layer per third)."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    path.mkdir(parents=True, exist_ok=True)
    words = sorted({w for text in [*TOY_PASSAGES.values(), *TOY_TOPICS.values()] for w in text.split()})
    (path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    BertTokenizerFast(vocab=str(path / "vocab.txt"), do_lower_case=True).save_pretrained(path)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(words) + 5, hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=dropout,
                        attention_probs_dropout_prob=dropout)
    BertModel(config).save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def toy(tmp_path_factory) -> Path:
    """Toy corpus/topics/qrels plus tiny BERTs with (``bert``) and without (``bert-nodrop``) dropout."""
    root = write_toy_collection(tmp_path_factory.mktemp("train-toy"))
    make_tiny_bert(root / "bert")
    make_tiny_bert(root / "bert-nodrop", dropout=0.0)
    return root


@pytest.fixture(scope="module")
def toy_bert(tmp_path_factory) -> Path:
    """The tests' tiny random BERT without dropout, with a tokenizer that knows the toy words."""
    return make_tiny_bert(tmp_path_factory.mktemp("toy-bert") / "bert", dropout=0.0)
