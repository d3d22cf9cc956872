"""Training throughput of each training task against the DPR row's, on bert-tiny and rag24-mini.

Every task trains from its committed config (``configs/rag24-mini/NAME.yaml``; DPR: ``configs/presets/bert-tiny.yaml``,
BM25 top-200 negative + in-batch) for ``--steps`` steps of 16 queries in a fresh process, on the same CPU threads,
with what it needs from earlier work: a bert-tiny dense index of the corpus (STAR's static negatives, ADORE's fixed
index; encoded here when missing), the training groups scored by the MiniLM cross-encoder and the cross-encoder
itself (TAS-B, Margin-MSE, KL, RocketQA, RocketQAv2's ranker; ``python -m experiments.rag24_distill teacher`` makes
them). examples/s is ``log.jsonl``'s per window of 10 steps; the first window (start-up, first batches) is dropped
and the median of the others is reported, with its ratio to DPR's. What one step computes differs: passages per
query, in-batch scoring, ADORE's retrieval at every step, RocketQAv2's cross-encoder forward and backward.

``--group pretraining`` measures the pretraining tasks of ``configs/rag24-mini/pretrain-*.yaml`` the same way (16
pairs a step, MLM 16 passages), against a DPR run of the same invocation; they need nothing but the corpus.

    flock /tmp/ance-ir-cpu.lock python -m bench.task_throughput --output docs/bench.md
    flock /tmp/ance-ir-cpu.lock python -m bench.task_throughput --group pretraining --output docs/bench.md
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import load_average, provenance, write_section

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "train-runs" / "bench-tasks"
GROUPS = ROOT / "train-runs" / "distill" / "groups.minilm-ce.jsonl.gz"
TEACHER = ROOT / "train-runs" / "rag24-mini" / "cross-encoder-minilm" / "final"
INDEX = WORK / "bert-tiny-index"
BM25_INDEX = WORK / "bm25-index"

#: label, config, --set overrides (the index, groups and ranker paths filled in)
TASKS = [
    ("DPR (contrastive, BM25 + in-batch, NLL)", "presets/bert-tiny",
     ("data.corpus=rag24-mini", "data.topics=rag24-mini-train", "data.qrels=rag24-mini-train",
      "data.min_positive_grade=2", f"negatives.bm25_index={BM25_INDEX}")),
    ("STAR (static hard + in-batch, RankNet)", "rag24-mini/star", (f"negatives.index={INDEX}",)),
    ("ADORE (query tower, retrieval every step)", "rag24-mini/adore", (f"task.index={INDEX}",)),
    ("Margin-MSE (1 scored negative)", "rag24-mini/margin-mse", (f"data.groups={GROUPS}",)),
    ("KL (7 scored negatives)", "rag24-mini/kl", (f"data.groups={GROUPS}",)),
    ("TAS-B (Margin-MSE + in-batch, topic batches)", "rag24-mini/tas-b", (f"data.groups={GROUPS}",)),
    ("RocketQA (denoised groups + in-batch)", "rag24-mini/rocketqa",
     (f"data.groups={GROUPS}", "negatives.denoise_above=5.0")),
    ("RocketQAv2 (retriever + MiniLM ranker, lists of 4)", "rag24-mini/rocketqa-v2",
     (f"data.groups={GROUPS}", f"task.ranker={TEACHER}")),
    ("gradient cache (batch 16 in chunks of 4)", "rag24-mini/gradcache",
     (f"negatives.bm25_index={BM25_INDEX}", "task.batch_size=16", "task.grad_cache_chunk=4")),
]
#: label, config name pretrain-NAME, --set overrides (besides 16 pairs a step)
PRETRAINING = [
    ("ICT (sentence, rest of its passage)", "ict", ()),
    ("BFS (first-segment sentence, other segment)", "bfs", ()),
    ("WLP (title-link pairs)", "wlp", ()),
    ("Spider (windows, + same-document negative)", "spider", ()),
    ("SimCSE (a passage's first 32 words, twice)", "simcse", ()),
    ("Contriever, in-batch (two crops of up to 256 tokens)", "contriever", ()),
    ("Contriever, MoCo (queue 2048, momentum encoder)", "contriever-moco", ()),
    ("MLM (passages of 256 tokens)", "mlm", ()),
    ("ICT + joint MLM of its passages (task.mlm_weight 1)", "ict", ("task.mlm_weight=1",)),
]
PRETRAINING_TASKS = [TASKS[0], *[(label, f"rag24-mini/pretrain-{name}", ("task.batch_size=16", *sets))
                                 for label, name, sets in PRETRAINING]]
GROUPS_OF_TASKS = {
    "supervised": ("bench-task-throughput", "15. Training throughput of each task", TASKS),
    "pretraining": ("bench-pretrain-throughput", "16. Training throughput of each pretraining task",
                    PRETRAINING_TASKS),
}


def prepare(group: str) -> None:
    """The indexes the tasks read, made when missing (the BM25 index; the supervised group's bert-tiny index) and
    the supervised group's teacher files, checked."""
    for path in (GROUPS, TEACHER) if group == "supervised" else ():
        if not path.exists():
            raise SystemExit(f"missing {path}: run python -m experiments.rag24_distill teacher first")
    python = [sys.executable, "-m"]
    if group == "supervised" and not (INDEX / "meta.json").is_file():
        subprocess.run([*python, "ance_ir.encode", "--corpus", "rag24-mini", "--encoder", "bert-tiny", "--output",
                        str(INDEX), "--pooling", "mean", "--no-normalize", "--quiet"], cwd=ROOT, check=True)
    if not BM25_INDEX.is_dir():
        subprocess.run([*python, "ance_ir.bm25", "index", "--corpus", "rag24-mini", "--output", str(BM25_INDEX)],
                       cwd=ROOT, check=True)


def examples_per_s(config: str, sets: tuple[str, ...], steps: int, threads: int) -> float:
    """The median examples/s over the windows of a fresh training run (the first window dropped)."""
    with tempfile.TemporaryDirectory() as tmp:
        flags = [a for s in (*sets, f"optim.max_steps={steps}") for a in ("--set", s)]
        subprocess.run([sys.executable, "-m", "ance_ir.train", "--config", f"configs/{config}.yaml", "--output",
                        str(Path(tmp) / "run"), "--no-progress", "--log-every", "10", "--threads", str(threads),
                        *flags], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        lines = (Path(tmp) / "run" / "log.jsonl").read_text().splitlines()
        rates = [r["examples_per_s"] for r in map(json.loads, lines) if "examples_per_s" in r]
    return statistics.median(rates[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=50, help="steps per run (windows of 10; the first dropped)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--output", default="docs/bench.md")
    parser.add_argument("--group", choices=sorted(GROUPS_OF_TASKS), default="supervised")
    args = parser.parse_args()
    marker, title, tasks = GROUPS_OF_TASKS[args.group]
    prepare(args.group)
    load = load_average()
    rates = {label: examples_per_s(config, sets, args.steps, args.threads) for label, config, sets in tasks}
    dpr = rates[TASKS[0][0]]
    lines = ["| task | examples/s (queries, pairs or passages) | against DPR |", "| --- | --- | --- |"]
    lines += [f"| {label} | {rate:.1f} | {rate / dpr:.2f}x |" for label, rate in rates.items()]
    paragraphs = __doc__.split("\n\n")
    body = (f"## {title} (bert-tiny, rag24-mini)\n\n" + paragraphs[1 if args.group == "supervised" else 2]
            + "\n\n" + "\n".join(lines) + "\n\n" + provenance(load))
    write_section(args.output, marker, body)


if __name__ == "__main__":
    main()
