"""Corpus encoding throughput: ance-ir against Pyserini's AutoDocumentEncoder and sentence-transformers.

Every contender runs all-MiniLM-L6-v2 with mean pooling, L2 normalisation, max length 256 and the same batch
size on the first ``--limit`` passages of the corpus. Three measurements:

1. passages/s in this process: median of ``--repeats`` alternating runs, after a warm-up batch each;
2. peak RSS of a fresh process that loads the contender and encodes ``--rss-limit`` passages;
3. the two command lines end to end, start-up included: ``python -m ance_ir.encode`` (default precision)
   and ``python -m pyserini.encode`` (AutoDocumentEncoder, ``--pooling mean --l2-norm``), both writing a
   flat faiss index.

    flock /tmp/ance-ir-cpu.lock python -m bench.encode_throughput --output docs/bench.md
    python -m bench.encode_throughput --device cuda --output docs/bench.md     # on a GPU machine
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

import ance_ir  # noqa: F401  (bootstraps Java before Pyserini is imported)
from ance_ir.cli import child_env
from ance_ir.modeling import DenseEncoder, resolve_model_path, resolve_precision
from bench.common import (
    alternating_medians,
    device_label,
    first_passages,
    importable,
    load_average,
    peak_rss_mib,
    provenance,
    publish,
    run_child,
)

MAX_LENGTH = 256
PEERS = ("pyserini", "sentence-transformers")  # the ratio columns, those present; the first is the reference
Encode = Callable[[list[str]], np.ndarray]


def contenders(device: str) -> list[str]:
    """Names of the contenders that run on ``device`` (Pyserini's where it imports: a GPU machine may lack it)."""
    ours = ["ance-ir fp32", "ance-ir auto", *(["ance-ir int8"] if device == "cpu" else [])]
    peers = [name for name in PEERS if name != "pyserini" or importable("pyserini.encode")]
    return [*peers, "sentence-transformers bf16", *ours]


def make_encoder(name: str, model: str, device: str, batch_size: int) -> Encode:
    """Load contender ``name`` and return its ``texts -> vectors`` function (batches exactly as its CLI does)."""
    path = resolve_model_path(model)
    if name == "pyserini":
        from pyserini.encode import AutoDocumentEncoder

        pyserini = AutoDocumentEncoder(path, device=device, pooling="mean", l2_norm=True)

        def encode(texts: list[str]) -> np.ndarray:  # pyserini.encode's loop: corpus order, fixed-size batches
            return np.concatenate([pyserini.encode(texts=texts[i:i + batch_size], max_length=MAX_LENGTH,
                                                   fp16=False, add_sep=False)
                                   for i in range(0, len(texts), batch_size)])
        return encode
    if name.startswith("sentence-transformers"):
        from sentence_transformers import SentenceTransformer

        kwargs = {"model_kwargs": {"dtype": torch.bfloat16}} if name.endswith("bf16") else {}
        st = SentenceTransformer(path, device=device, **kwargs)
        st.max_seq_length = MAX_LENGTH
        return lambda texts: st.encode(texts, batch_size=batch_size, convert_to_numpy=True).astype(np.float32)
    precision = name.split()[-1]
    ours = DenseEncoder.from_pretrained(model, passage_max_length=MAX_LENGTH).to(device)
    resolve_precision(precision, device)
    return lambda texts: ours.encode_passages(texts, batch_size=batch_size, precision=precision)


def describe(name: str, device: str) -> str:
    """Table label: what the contender computes in."""
    if name == "pyserini":
        return "Pyserini AutoDocumentEncoder (pyserini.encode), fp32"
    if name == "sentence-transformers":
        return "sentence-transformers `encode`, fp32 (its default)"
    if name == "sentence-transformers bf16":
        return "sentence-transformers `encode`, model cast to bf16 (not its default)"
    precision = name.split()[-1]
    concrete = resolve_precision(precision, device, DenseEncoder.cpu_auto_precision)
    return f"ance-ir `encode_passages`, {precision}" + (f" (= {concrete}, the default)" if precision == "auto" else "")


def subset(corpus: str, limit: int) -> list[tuple[str, str]]:
    """The first ``limit`` (docid, text) pairs of the corpus."""
    return [(p.docid, p.text) for p in first_passages(corpus, limit)]


def write_subset(passages: list[tuple[str, str]], path: Path) -> None:
    """JSONL that both CLIs read the same: ``contents`` for ance-ir, ``text`` for ``pyserini.encode --fields text``."""
    with path.open("w", encoding="utf-8") as f:
        for docid, text in passages:
            f.write(json.dumps({"id": docid, "contents": text, "text": text}) + "\n")


def worker(args: argparse.Namespace) -> None:
    """Child process for the RSS column: load one contender, encode ``--rss-limit`` passages, report."""
    torch.set_num_threads(args.threads)
    texts = [t for _, t in subset(args.corpus, args.rss_limit)]
    encode = make_encoder(args.worker, args.model, args.device, args.batch_size)
    encode(texts)
    gpu = torch.cuda.max_memory_allocated(args.device) / 2**20 if args.device.startswith("cuda") else None
    print(json.dumps({"rss_mib": peak_rss_mib(), "gpu_mib": gpu}))


def measure_rss(args: argparse.Namespace, names: list[str]) -> dict[str, dict]:
    common = ["--corpus", args.corpus, "--model", args.model, "--device", args.device, "--batch-size",
              str(args.batch_size), "--threads", str(args.threads), "--rss-limit", str(args.rss_limit)]
    out = {}
    for name in names:
        _, _, stdout = run_child([sys.executable, "-m", "bench.encode_throughput", "--worker", name, *common],
                                 env=child_env())
        out[name] = json.loads(stdout.strip().splitlines()[-1])
    return out


def cli_commands(args: argparse.Namespace, corpus: Path, work: Path) -> dict[str, list[str]]:
    bs = str(args.batch_size)
    return {
        "python -m ance_ir.encode (default --precision auto)": [
            sys.executable, "-m", "ance_ir.encode", "--corpus", str(corpus), "--encoder", args.model,
            "--output", str(work / "ours"), "--batch-size", bs, "--device", args.device, "--quiet", "--force",
            "--threads", str(args.threads)],
        "python -m pyserini.encode (AutoDocumentEncoder)": [
            sys.executable, "-m", "ance_ir.pyserini", "pyserini.encode",
            "input", "--corpus", str(corpus), "--fields", "text",
            "output", "--embeddings", str(work / "pyserini"), "--to-faiss",
            "encoder", "--encoder", resolve_model_path(args.model), "--encoder-class", "auto", "--fields", "text",
            "--batch-size", bs, "--max-length", str(MAX_LENGTH), "--dimension", "384", "--device", args.device,
            "--pooling", "mean", "--l2-norm"],
    }


def measure_cli(args: argparse.Namespace, passages: list[tuple[str, str]]) -> dict[str, dict[str, float]]:
    """Alternating end-to-end runs of both command lines; median wall seconds and the largest peak RSS."""
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "subset.jsonl"
        write_subset(passages, corpus)
        commands = cli_commands(args, corpus, Path(tmp))
        times: dict[str, list[float]] = {k: [] for k in commands}
        rss: dict[str, float] = dict.fromkeys(commands, 0.0)
        for r in range(args.cli_repeats):
            for label in (commands if r % 2 == 0 else list(reversed(commands))):
                seconds, peak, _ = run_child(commands[label], env=child_env(OMP_NUM_THREADS=str(args.threads)))
                times[label].append(seconds)
                rss[label] = max(rss[label], peak)
    return {k: {"seconds": float(np.median(v)), "rss_mib": rss[k]} for k, v in times.items()}


def tables(args: argparse.Namespace, names: list[str], seconds: dict[str, float], rss: dict[str, dict],
           agreement: dict[str, float], cli: dict[str, dict[str, float]] | None, n: int) -> str:
    gpu = args.device.startswith("cuda")
    base = {k: n / seconds[k] for k in PEERS if k in names}
    head = ("| contender | passages/s | ms/passage | " + "".join(f"× {k} | " for k in base) + "peak RSS (MiB) |"
            + (" peak GPU mem (MiB) |" if gpu else "") + f" min cos vs {next(iter(base))} |\n")
    head += "| --- " * (5 + len(base) + gpu) + "|\n"
    rows = []
    for name in names:
        rate = n / seconds[name]
        row = (f"| {describe(name, args.device)} | {rate:.1f} | {1000 / rate:.1f} | "
               + "".join(f"{rate / b:.2f} | " for b in base.values()) + f"{rss[name]['rss_mib']:.0f} |")
        row += f" {rss[name]['gpu_mib']:.0f} |" if gpu else ""
        rows.append(row + f" {agreement[name]:.5f} |")
    default = n / seconds["ance-ir auto"]
    targets = {"pyserini": ("Pyserini", 2.0), "sentence-transformers": ("sentence-transformers", 1.5)}
    verdict = "\nAcceptance (the default, `auto`): " + "; ".join(
        f"≥ {target:g}× {label}: {'yes' if default / base[k] >= target else 'no'} ({default / base[k]:.2f}×)"
        for k, (label, target) in targets.items() if k in base) + ".\n"
    if "pyserini" not in base:
        verdict += "Pyserini is not installed on this machine, so its contender and command line are left out.\n"
    text = (f"### Encoding throughput, {device_label(args.device)}: first {n} rag24-mini passages\n\n"
            f"all-MiniLM-L6-v2, mean pooling, L2-normalised, max length {MAX_LENGTH}, batch size "
            f"{args.batch_size}, {args.threads} torch threads. passages/s: median of {args.repeats} alternating "
            f"in-process runs (model already loaded, one warm-up batch). Peak RSS: a fresh process loading the "
            f"contender and encoding {args.rss_limit} passages. Ratios are of medians from the same run.\n\n"
            + head + "\n".join(rows) + "\n" + verdict)
    if cli:
        ours, theirs = cli
        text += (f"\nThe command lines end to end on the same {n} passages (start-up, model loading and writing a "
                 f"flat faiss index included; median of {args.cli_repeats} alternating runs):\n\n"
                 "| command | wall (s) | passages/s | peak RSS (MiB) |\n| --- | --- | --- | --- |\n")
        text += "".join(f"| `{k}` | {v['seconds']:.1f} | {n / v['seconds']:.1f} | {v['rss_mib']:.0f} |\n"
                        for k, v in cli.items())
        ratio = cli[theirs]["seconds"] / cli[ours]["seconds"]
        text += f"\n`ance_ir.encode` / `pyserini.encode` end to end: **{ratio:.2f}×**.\n"
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="rag24-mini")
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--limit", type=int, default=1000, help="passages timed (the first N of the corpus)")
    parser.add_argument("--rss-limit", type=int, default=256, help="passages encoded by each RSS child process")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cli-repeats", type=int, default=3, help="0 skips the command-line comparison")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--output", help="Markdown file to update")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)

    torch.set_num_threads(args.threads)
    load_before = load_average()
    passages = subset(args.corpus, args.limit)
    texts = [t for _, t in passages]
    names = contenders(args.device)
    encoders = {name: make_encoder(name, args.model, args.device, args.batch_size) for name in names}
    vectors = {name: encode(texts[:args.batch_size]) for name, encode in encoders.items()}  # warm-up
    agreement = {name: float((v * vectors[names[0]]).sum(1).min()) for name, v in vectors.items()}
    seconds = alternating_medians({name: (lambda e=e: e(texts)) for name, e in encoders.items()}, args.repeats)
    del encoders
    rss = measure_rss(args, names)
    cli = measure_cli(args, passages) if args.cli_repeats and "pyserini" in names else None
    body = tables(args, names, seconds, rss, agreement, cli, len(texts))
    body += "\n" + provenance(load_before, ("pyserini", "sentence-transformers"))
    publish(body, args.output, f"encode-throughput {device_label(args.device)}")


if __name__ == "__main__":
    main()
