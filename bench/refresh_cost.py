"""ANCE refresh cost on rag24-mini: encode, index build, negative mining (and eval), against training time.

1. A short ANCE run of ``python -m ance_ir.train`` (``configs/rag24-mini/ance.yaml``'s settings, started from
   all-MiniLM-L6-v2, ``--refresh-mode sync`` so that refreshes and training never overlap): the timings of each
   refresh (``refresh/step-N.json``) and the training speed without pauses (``log.jsonl``).
2. The same refresh (``ance_ir.train.refresh.refresh_checkpoint``) of that run's last checkpoint, encoding the
   corpus in each precision (the ``refresh_precision`` setting), one after the other.

Training time per refresh interval = ``--interval`` steps (ance.yaml refreshes every 100) at the measured
seconds/step; the ratio says how much of an interval a refresh would take on the same CPU.

    flock /tmp/ance-ir-cpu.lock python -m bench.refresh_cost --output docs/bench.md
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
from pathlib import Path

import torch

from ance_ir.cli import child_env
from bench.common import device_label, load_average, provenance, publish, run_child

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("load_s", "encode_s", "index_s", "mine_s", "publish_s", "eval_s")
RUN_PRECISION = "fp32"  # the training run's own refreshes: the baseline the other precisions are compared with


def train_command(args: argparse.Namespace, output: Path) -> list[str]:
    return [sys.executable, "-m", "ance_ir.train", "--config", str(ROOT / "configs/rag24-mini/ance.yaml"),
            "--init-from", "none", "--model", args.model, "--output", str(output), "--refresh-mode", "sync",
            "--refresh-precision", RUN_PRECISION, "--refresh-every", str(args.refresh_every),
            "--max-steps", str(2 * args.refresh_every),
            "--log-every", str(args.log_every), "--threads", str(args.threads), "--device", args.device,
            "--no-progress", "--reencode-share", "1"]  # every refresh in full: the cost measured


def training_seconds_per_step(log: Path) -> tuple[float, int]:
    """Median seconds per training step over the log windows (their checkpoint and refresh pauses removed)."""
    records = [r for r in map(json.loads, log.read_text().splitlines()) if "steps_per_s" in r]
    per_step, previous = [], 0
    for r in records:
        steps, previous = r["step"] - previous, r["step"]
        per_step.append((steps / r["steps_per_s"] - r["pause_s"]) / steps)
    return statistics.median(per_step[1:] or per_step), len(records)


def precision_refreshes(args: argparse.Namespace, run_dir: Path) -> list[dict]:
    """Refresh the run's last checkpoint once per precision; the records."""
    import ance_ir  # noqa: F401
    from ance_ir.train import RefreshJob, TrainConfig, latest_checkpoint
    from ance_ir.train.layout import RunDir

    torch.set_num_threads(args.threads)
    config = TrainConfig.load(run_dir / "config.json")
    job = RefreshJob.from_config(config)
    checkpoint = latest_checkpoint(RunDir(run_dir))
    from ance_ir.train.refresh import refresh_checkpoint

    records = []
    for precision in args.precisions:
        with tempfile.TemporaryDirectory() as tmp:
            record = refresh_checkpoint(checkpoint, dataclasses.replace(job, precision=precision), RunDir(Path(tmp)),
                                        torch.device(args.device), "bench")
        records.append({"precision": precision, **record})
        print(precision, record["timings"], record.get("metrics"), flush=True)
    return records


def label(precision: str, device: str) -> str:
    from ance_ir.modeling import DenseEncoder, resolve_precision

    concrete = resolve_precision(precision, device, DenseEncoder.cpu_auto_precision)
    return precision if concrete == precision else f"{precision} (= {concrete})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--refresh-every", type=int, default=20, help="refresh interval of the short run")
    parser.add_argument("--interval", type=int, default=100, help="refresh interval to compare with (ance.yaml)")
    parser.add_argument("--log-every", type=int, default=5)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--precisions", nargs="+", default=["fp32", "auto", "int8"])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--output", help="Markdown file to update")
    args = parser.parse_args()

    load_before = load_average()
    env = child_env(OMP_NUM_THREADS=str(args.threads))
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "ance"
        wall, rss, _ = run_child(train_command(args, run_dir), env=env)
        run_records = [json.loads(p.read_text()) for p in sorted((run_dir / "refresh").glob("step-*.json"))]
        step_s, windows = training_seconds_per_step(run_dir / "log.jsonl")
        by_precision = precision_refreshes(args, run_dir)

    def row(label: str, record: dict) -> str:
        t = record["timings"]
        cells = " | ".join(f"{t.get(s, 0.0):.1f}" for s in STAGES)
        ndcg = (record.get("metrics") or {}).get("ndcg_cut_10")
        interval = args.interval * step_s
        return (f"| {label} | {cells} | **{record['total_s']:.1f}** | {record['total_s'] / interval:.2f} | "
                f"{'' if ndcg is None else f'{ndcg:.4f}'} |")

    head = ("| refresh | load (s) | encode (s) | index (s) | mine (s) | publish (s) | eval (s) | total (s) | "
            f"total / training time of {args.interval} steps | nDCG@10 (test) |\n" + "| --- " * 10 + "|\n")
    run_label = label(RUN_PRECISION, args.device)
    in_run = "\n".join(row(f"in the training run, step {r['step']} ({run_label})", r) for r in run_records)
    variants = "\n".join(row(f"step {r['step']}, passages in {label(r['precision'], args.device)}", r)
                          for r in by_precision)
    body = (f"### ANCE refresh cost, {device_label(args.device)}: rag24-mini ({run_records[0]['passages']} passages), "
            f"`{args.model}`\n\n"
            f"Training (ance.yaml: batch 8, 1 ANN negative, fp32, {args.threads} threads): "
            f"**{step_s:.2f} s/step** (median over {windows} log windows of {args.log_every} steps, pauses removed), "
            f"so a refresh interval of {args.interval} steps is **{args.interval * step_s:.0f} s** of training. "
            f"The short run ({2 * args.refresh_every} steps, sync refresh every {args.refresh_every}) took "
            f"{wall:.0f} s wall, peak RSS {rss:.0f} MiB. Mining searches each training query's top 200 (plus its "
            "judged passages, which are removed); eval searches and scores the test topics.\n\n"
            + head + in_run + "\n" + variants + "\n\n" + provenance(load_before))
    publish(body, args.output, f"refresh-cost {device_label(args.device)}")


if __name__ == "__main__":
    main()
