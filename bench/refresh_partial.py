"""Cheaper refreshes: re-encoding part of the corpus (``refresh.reencode_share``) or encoding shorter passages
(``refresh.passage_max_length``), their cost against a full re-encode, and how far their negatives drift.

A short sync ANCE run (``configs/rag24-mini/ance.yaml``'s settings from ``--model``, ``--steps`` steps, refreshed
at the start, halfway and at the end; ``--precision`` encoding) gives two checkpoints, A (halfway) and B (the end).
A full refresh of A leaves its corpus vectors and negatives; then B is refreshed once in full (the reference) and
once at each (share, priority depth, passage tokens), each starting from A's state: the training queries' top
``priority_depth`` A-negatives are re-encoded with B, then the passages encoded longest ago up to the share; the
others keep A's vectors. A row with fewer passage tokens than the model's (256) encodes B's passages cut there (A's
kept vectors are full length). bert-tiny trains with Table 1's bert-tiny settings, MiniLM with ance.yaml's.
Reported: the share re-encoded, the encoding time, the refresh time against the full one's, and the overlap of each
training query's mined top-200 negatives with the full refresh's (mean and 10th percentile over the 191 queries).

    flock /tmp/ance-ir-cpu.lock python -m bench.refresh_partial --output docs/bench.md
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

from bench.common import load_average, provenance, write_section

ROOT = Path(__file__).resolve().parents[1]
#: (reencode_share, priority_depth, passage_max_length) of the cheaper refreshes (None: the model's length)
CHEAPER = ((0.5, 20, None), (0.3, 20, None), (0.3, 5, None), (0.2, 5, None), (0.1, 5, None), (0.1, 0, None),
           (1.0, 0, 128), (1.0, 0, 64), (0.2, 5, 128))
#: the training run's settings beyond configs/rag24-mini/ance.yaml (MiniLM's): Table 1's bert-tiny family
FLAGS = {"bert-tiny": ("--temperature", "1.0", "--lr", "1e-4", "--batch-size", "16", "--pooling", "mean",
                       "--no-normalize")}


def overlap(mined: dict[str, list[str]], reference: dict[str, list[str]]) -> list[float]:
    """Per query, the share of the reference's negatives also among ``mined``'s."""
    return [len(set(mined.get(q, ())) & set(ranked)) / len(ranked) for q, ranked in reference.items() if ranked]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="bert-tiny")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--output", default="docs/bench.md")
    args = parser.parse_args()
    from ance_ir.train.arguments import TrainConfig
    from ance_ir.train.checkpoint import checkpoint_dir
    from ance_ir.train.layout import RunDir
    from ance_ir.train.refresh import RefreshJob, refresh_checkpoint
    from ance_ir.train.store import NegativesStore

    load = load_average()
    half = args.steps // 2
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        run = RunDir(Path(tmp) / "run")
        subprocess.run([sys.executable, "-m", "ance_ir.train", "--config", str(ROOT / "configs/rag24-mini/ance.yaml"),
                        "--init-from", "none", "--model", args.model, "--output", str(run.root), "--refresh-mode",
                        "sync", "--refresh-every", str(half), "--max-steps", str(args.steps), "--no-progress",
                        "--refresh-precision", args.precision, "--set", "refresh.eval_topics=null", "--set",
                        "refresh.final=false", "--reencode-share", "1", *FLAGS.get(args.model, ())], cwd=ROOT,
                       check=True, capture_output=True)
        job = dataclasses.replace(RefreshJob.from_config(TrainConfig.load(run.config)), eval_topics=None,
                                  reencode_share=0.5)
        device = torch.device("cpu")
        start = RunDir(Path(tmp) / "start")
        refresh_checkpoint(checkpoint_dir(run, half), job, start, device, "sync")  # A in full: vectors, negatives
        results = {}
        for share, depth, length in ((1.0, 0, None), *CHEAPER):
            scratch = RunDir(Path(tmp) / f"share-{share}-{depth}-{length}")
            shutil.copytree(start.root, scratch.root)
            cheaper = dataclasses.replace(job, reencode_share=share, priority_depth=depth, passage_max_length=length)
            record = refresh_checkpoint(checkpoint_dir(run, args.steps), cheaper, scratch, device, "sync")
            results[share, depth, length] = (record, NegativesStore(scratch.negatives).load(args.steps))
        full_record, full_negatives = results[1.0, 0, None]
        for (share, depth, length), (record, negatives) in results.items():
            shares = overlap(negatives, full_negatives)
            rows.append(f"| {share:g} | {depth if share < 1 else '–'} | {length or 'all'} | "
                        f"{record['reencoded']:.2f} | {record['timings']['encode_s']:.1f} | "
                        f"{record['total_s']:.1f} | {record['total_s'] / full_record['total_s']:.2f} | "
                        f"{statistics.fmean(shares):.3f} | {np.percentile(shares, 10):.3f} |")
    lines = ["| reencode_share | priority_depth | passage tokens | re-encoded | encode (s) | refresh (s) | against "
             "full | top-200 overlap with full (mean) | (10th percentile) |", "|" + " --- |" * 9, *rows]
    body = (f"## 10. Cheaper refreshes ({args.model}, checkpoints at steps {half} and {args.steps})\n\n"
            + __doc__.split("\n\n")[1] + "\n\n" + "\n".join(lines) + "\n\n" + provenance(load))
    write_section(args.output, f"bench-refresh-partial-{args.model}", body)


if __name__ == "__main__":
    main()
