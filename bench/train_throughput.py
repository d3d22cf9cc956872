"""Training throughput: ``python -m ance_ir.train`` against sentence-transformers' MultipleNegativesRankingLoss.

Same model (all-MiniLM-L6-v2), batch size, sequence lengths (queries are cut at 64 tokens by ance-ir and at
256 by sentence-transformers; no rag24-mini training query is that long), one random negative per query plus
in-batch negatives (what MNRL does with (anchor, positive, negative) triples), scale 20 (temperature 0.05),
AdamW (lr 2e-5, weight decay 0.01, gradient clipping at 1.0), no warm-up, no evaluation or refresh. The
sentence-transformers run trains on exactly the triples ance-ir draws (same pair order and negatives), in its
own shuffled order.

examples/s is measured per window of ``--log-every`` steps (ance-ir's ``log.jsonl`` ``examples_per_s``; a
step-end callback for sentence-transformers); the first window of every run is warm-up and is dropped. The
median over the windows of ``--repeats`` alternating runs (each a fresh process) is reported, with the largest
peak RSS of those processes.

    flock /tmp/ance-ir-cpu.lock python -m bench.train_throughput --output docs/bench.md
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from ance_ir.cli import child_env
from bench.common import importable, load_average, provenance, publish, run_child


def settings(args: argparse.Namespace) -> dict[str, str]:
    """ance_ir.train flags shared by every run."""
    return {"model": args.model, "corpus": args.corpus, "train-topics": args.topics, "train-qrels": args.topics,
            "min-positive-grade": "2", "negatives": "random", "n-negatives": "1", "batch-size": str(args.batch_size),
            "max-steps": str(args.steps), "refresh-every": "0", "log-every": str(args.log_every), "lr": "2e-5",
            "weight-decay": "0.01", "max-grad-norm": "1.0", "temperature": "0.05", "seed": "42",
            "query-max-length": "64", "passage-max-length": "256", "threads": str(args.threads)}


def triples(args: argparse.Namespace) -> list[tuple[str, str, str]]:
    """The (query, positive, negative) texts of the ance-ir run's steps, drawn as its trainer draws them."""
    from ance_ir.train.arguments import build_config
    from ance_ir.train.contrastive import GroupDraws
    from ance_ir.train.dataset import TrainData
    from ance_ir.train.negatives import NEGATIVE_STRATEGIES

    flags = {k.replace("-", "_"): v for k, v in settings(args).items()}
    config = build_config(None, {**flags, "output": "unused", "in_batch": True})
    data = TrainData.load(config)
    draws = GroupDraws(data, NEGATIVE_STRATEGIES["random"](data.docids), config.seed, 1)
    return [(data.queries[g.qid], data.texts[g.positive], data.texts[g.negatives[0]])
            for _ in range(args.steps) for g in draws.draw(args.batch_size)]


def st_worker(args: argparse.Namespace) -> None:
    """Child process: train sentence-transformers with MNRL; print the examples/s of each window."""
    from datasets import Dataset
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.losses import MultipleNegativesRankingLoss
    from transformers import TrainerCallback

    import ance_ir  # noqa: F401
    from ance_ir.modeling import resolve_model_path

    torch.set_num_threads(args.threads)
    rows = triples(args)
    dataset = Dataset.from_dict({"anchor": [r[0] for r in rows], "positive": [r[1] for r in rows],
                                 "negative": [r[2] for r in rows]})
    model = SentenceTransformer(resolve_model_path(args.model), device=args.device)
    model.max_seq_length = 256
    stamps: list[float] = []

    class Clock(TrainerCallback):
        def on_train_begin(self, *a, **k):
            stamps.append(time.perf_counter())

        def on_step_end(self, *a, **k):
            stamps.append(time.perf_counter())

    with tempfile.TemporaryDirectory() as tmp:
        training = SentenceTransformerTrainingArguments(
            output_dir=tmp, per_device_train_batch_size=args.batch_size, max_steps=args.steps, learning_rate=2e-5,
            weight_decay=0.01, max_grad_norm=1.0, warmup_steps=0, lr_scheduler_type="linear", seed=42,
            bf16=args.precision == "bf16", use_cpu=args.device == "cpu", save_strategy="no", report_to="none",
            logging_steps=10**6, disable_tqdm=True, dataloader_num_workers=0)
        trainer = SentenceTransformerTrainer(model=model, args=training, train_dataset=dataset,
                                             loss=MultipleNegativesRankingLoss(model, scale=20.0),
                                             callbacks=[Clock()])
        trainer.train()
    w = args.log_every
    rates = [args.batch_size * w / (stamps[i + w] - stamps[i]) for i in range(0, len(stamps) - w, w)]
    print(json.dumps({"examples_per_s": rates}))


def ours(args: argparse.Namespace, precision: str, output: Path) -> list[str]:
    """The ance_ir.train command of one run."""
    flags = [x for k, v in settings(args).items() for x in (f"--{k}", v)]
    command = [sys.executable, "-m", "ance_ir.train", *flags, "--in-batch", "--precision", precision,
               "--device", args.device, "--no-progress", "--output", str(output)]
    return command


def run(args: argparse.Namespace, name: str, work: Path) -> tuple[list[float], float]:
    """One fresh training process: its windows' examples/s (first dropped) and its peak RSS."""
    env = child_env(OMP_NUM_THREADS=str(args.threads))
    system, precision = name.split()
    if system == "ance-ir":
        output = work / f"ours-{precision}-{time.time_ns()}"
        _, rss, _ = run_child(ours(args, precision, output), env=env)
        records = [json.loads(line) for line in (output / "log.jsonl").read_text().splitlines()]
        rates = [r["examples_per_s"] for r in records if "examples_per_s" in r]
    else:
        own = [x for k in ("model", "corpus", "topics", "batch_size", "steps", "log_every", "threads", "device")
               for x in (f"--{k.replace('_', '-')}", str(getattr(args, k)))]
        _, rss, out = run_child([sys.executable, "-m", "bench.train_throughput", *own, "--st-worker",
                                 "--precision", precision], env=env)
        rates = json.loads(out.strip().splitlines()[-1])["examples_per_s"]
    return rates[1:], rss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--corpus", default="rag24-mini")
    parser.add_argument("--topics", default="rag24-mini-train", help="training topics and qrels")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--log-every", type=int, default=5)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--precisions", nargs="+", default=["fp32", "bf16"])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--output", help="Markdown file to update")
    parser.add_argument("--st-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--precision", default="fp32", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.st_worker:
        return st_worker(args)

    load_before = load_average()
    systems = ("ance-ir", "sentence-transformers") if importable("datasets") else ("ance-ir",)
    names = [f"{system} {p}" for p in args.precisions for system in systems]
    rates: dict[str, list[float]] = {n: [] for n in names}
    rss: dict[str, float] = dict.fromkeys(names, 0.0)
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            for name in (names if r % 2 == 0 else names[::-1]):
                windows, peak = run(args, name, Path(tmp))
                rates[name] += windows
                rss[name] = max(rss[name], peak)
                print(name, [round(x, 2) for x in windows], f"{peak:.0f} MiB", flush=True)
    verdicts = []
    lines = ["| trainer | precision | examples/s (median of windows) | ance-ir / sentence-transformers | "
             "peak RSS (MiB) | windows |", "| --- " * 6 + "|"]
    for p in args.precisions:
        a = statistics.median(rates[f"ance-ir {p}"])
        if len(systems) == 1:
            lines.append(f"| `python -m ance_ir.train` | {p} | {a:.2f} | – | {rss[f'ance-ir {p}']:.0f} | "
                         f"{len(rates[f'ance-ir {p}'])} |")
            continue
        b = statistics.median(rates[f"sentence-transformers {p}"])
        lines.append(f"| `python -m ance_ir.train` | {p} | {a:.2f} | **{a / b:.2f}×** | {rss[f'ance-ir {p}']:.0f} | "
                     f"{len(rates[f'ance-ir {p}'])} |")
        verdicts.append(f"{p}: {'yes' if a >= b else 'no'} ({a / b:.2f}×)")
        lines.append(f"| sentence-transformers MNRL | {p} | {b:.2f} | 1.00 | "
                     f"{rss[f'sentence-transformers {p}']:.0f} | {len(rates[f'sentence-transformers {p}'])} |")
    verdict = ("Acceptance, `ance_ir.train` examples/s ≥ sentence-transformers: " + "; ".join(verdicts) + "."
               if verdicts else "sentence-transformers' trainer needs `datasets`, which is not installed here.")
    body = (f"### Training throughput, {args.device}: `{args.model}` on {args.topics}\n\n"
            f"Batch size {args.batch_size} queries, each with its positive and 1 random negative, in-batch negatives "
            f"(every query against all {2 * args.batch_size} passages of the batch), scale 20; {args.steps} steps "
            f"per run, windows of {args.log_every} steps, first window dropped; {args.repeats} alternating runs "
            f"per row, {args.threads} threads. An example is one query with its passages.\n\n"
            + "\n".join(lines) + "\n\n" + verdict + "\n\n"
            + provenance(load_before, ("sentence-transformers", "accelerate")))
    publish(body, args.output, f"train-throughput {args.device}")


if __name__ == "__main__":
    main()
