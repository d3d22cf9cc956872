"""Where negatives come from, beyond ANCE (issue 14): STAR, ADORE, RocketQA and RocketQAv2 on rag24-mini.

    python -m experiments.rag24_distill teacher            # the MiniLM cross-encoder (RocketQA rows)
    python -m experiments.rag24_negatives run --family bert-tiny --seeds 1 2 3 [--only star adore]
    python -m experiments.rag24_negatives report --family bert-tiny --seeds 1 2 3 --output docs/negatives-rag24.md

Every row starts where Table 1's continuation rows (BM25 → Rand, ANCE) of the family start, the step-W checkpoint of
its BM25 Neg row of the same seed (trained here with Table 1's exact command and ``--stop-at W`` when missing), and
trains with the family's schedule for C steps (bert-tiny: W = C = 300 steps of 16 queries; minilm: 50 of 8, the
configs' bert-tiny settings replaced by the family's):

* STAR: static hard negatives, the warm model's top 200 (its index, judged passages removed), one per query and
  step, plus the batch's other passages as random negatives; RankNet, ``L_static + 0.1 L_random``
  (``configs/rag24-mini/star.yaml``).
* ADORE: the warm model's index fixed, only the query tower trains on the passages it retrieves at each step
  (``configs/rag24-mini/adore.yaml``); STAR → ADORE: ADORE on STAR's index for another C steps (twice the budget).
* hard / denoised (RocketQA): the warm model's top-30 negatives scored by the MiniLM cross-encoder, one per query
  plus in-batch negatives, NLL; denoised leaves out those scored above the median score of the judged positives
  (``configs/rag24-mini/rocketqa.yaml``).
* hard-kl: a distilled student from the same start: 7 of those negatives a query plus in-batch negatives, KL to the
  cross-encoder's scores over the query's own group plus NLL over every passage (``loss.label_weight``: 1).
* RocketQAv2: the retriever and the MiniLM cross-encoder trained together on lists of the positive and 3 of those
  negatives (``configs/rag24-mini/rocketqa-v2.yaml``), both models under bf16 autocast: the ranker's forward and
  backward over 64 pairs are the step's cost (1.2 queries/s in fp32, ``docs/bench.md``, section 15).
  rocketqa-v2-mixed: the same on v2's hybrid instances, each negative drawn from the denoised list (RocketQA's
  threshold) with probability 0.5, else from the undenoised one (``negatives.denoised_share``).
  A checkpoint every 20 steps (the newest 2 kept): a 72-minute seed survives a killed job. ``run --precision fp32``
  trains in fp32 instead, on a CPU that emulates bf16 (no AVX-512 BF16, no AMX), where autocast is ~4x slower.

Indexes are encoded with ``ance_ir.encode --precision auto`` unless ``run --encode-precision`` names one: ``auto`` is
bf16 on a CPU with AMX (seeds 1-2) and int8 on one without, which changes 3.5% of the warm model's mined negatives;
``--encode-precision bf16`` encodes as the committed rows' indexes were (emulated bf16, on a CPU without native bf16,
comes close to the AMX Xeon's vectors but not bit for bit: ``docs/negatives-rag24.md``).

Each final model searches the 101 test topics (100 hits) against its own index (ADORE: the fixed index it trained
against), committed under ``runs/rag24/negatives/FAMILY/`` with its training log; RocketQAv2's trained ranker also
reranks the top 100 of the BM25 + MiniLM hybrid (``*.ranker-hybrid.test.trec.gz``). Every step is a package CLI,
printed as it runs; finished steps are skipped. ``report`` compares them with Table 1's committed ANCE and DPR runs.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
from dataclasses import dataclass
from pathlib import Path

from ance_ir.data import read_groups
from bench.common import write_section
from experiments.comparison import comparison_table, left_out, which_seeds
from experiments.rag24_distill import TEACHER
from experiments.rag24_table1 import COMMON, FAMILIES, ROOT, py, sh
from experiments.rag24_table1 import work as table1_work

WORK = ROOT / "train-runs" / "negatives"
RUNS = ROOT / "runs" / "rag24" / "negatives"
#: each family's flags on top of the (bert-tiny) configs: Table 1's settings of the family, C steps
FAMILY_FLAGS = {
    "bert-tiny": ("--max-steps", "300"),
    "minilm": ("--temperature", "0.05", "--lr", "2e-5", "--batch-size", "8", "--precision", "bf16", "--normalize",
               "--max-steps", "50"),
}


@dataclass(frozen=True)
class Row:
    """``configs/rag24-mini/CONFIG.yaml`` from the model ``start`` (``warm`` or another row's name); ``groups``: on
    the warm model's hard negatives scored by the cross-encoder teacher (``denoise``: RocketQA's threshold);
    ``flags``: the row's own ``ance_ir.train`` flags, after the family's."""

    name: str
    label: str
    config: str
    start: str = "warm"
    groups: bool = False
    denoise: bool = False
    flags: tuple[str, ...] = ()


#: RocketQAv2's autocast and checkpoints: a seed takes 72-96 minutes on a 2-core CPU
V2_FLAGS = ("--precision", "bf16", "--save-every", "20", "--keep-checkpoints", "2")
ROWS = [
    Row("star", "STAR (static hard + in-batch random, RankNet)", "star"),
    Row("adore", "ADORE (query tower on the warm model's index)", "adore"),
    Row("star-adore", "STAR → ADORE (+C query-tower steps)", "adore", start="star"),
    Row("hard", "warm model's top-30 hard negatives + in-batch (NLL; cross-batch under torchrun)", "rocketqa",
        groups=True),
    Row("denoised", "RocketQA: the same, denoised by the cross-encoder", "rocketqa", groups=True, denoise=True),
    # a distilled student on the same footing: 7 of the hard negatives, KL to the teacher's scores + in-batch NLL
    Row("hard-kl", "the same hard negatives (7) + in-batch, KL to the cross-encoder (distilled)", "rocketqa",
        groups=True, flags=("--set", "loss.name=kl", "--set", "task.n_negatives=7", "--set", "loss.label_weight=1")),
    Row("rocketqa-v2", "RocketQAv2: joint listwise distillation with the cross-encoder", "rocketqa-v2",
        groups=True, flags=V2_FLAGS),
    Row("rocketqa-v2-mixed", "RocketQAv2 on v2's hybrid negatives (each from the denoised list with probability 0.5)",
        "rocketqa-v2", groups=True, denoise=True, flags=(*V2_FLAGS, "--set", "negatives.denoised_share=0.5")),
]


def run_file(family: str, row: str, seed: int) -> Path:
    if row in ("ance", "dpr"):
        return ROOT / "runs" / "rag24" / "table1" / family / f"{row}.seed{seed}.test.trec.gz"
    return RUNS / family / f"{row}.seed{seed}.test.trec.gz"


def warm_model(family: str, seed: int) -> Path:
    """Table 1's BM25 Neg warm-up of ``seed`` (its step-W checkpoint), trained first when missing."""
    spec = FAMILIES[family]
    run = table1_work(family, f"bm25.seed{seed}")
    checkpoint = run / "checkpoints" / f"step-{spec.warmup:08d}"
    if not checkpoint.is_dir():
        bm25_index = table1_work(family, "bm25-index")
        if not bm25_index.is_dir():
            sh(py("ance_ir.bm25", "index", "--corpus", "rag24-mini", "--output", str(bm25_index)))
        sh(py("ance_ir.train", *COMMON, *spec.flags, "--negatives", "bm25", "--output", str(run), "--seed",
              str(seed), "--max-steps", str(spec.warmup + spec.cont), "--refresh-every", "0", "--model",
              spec.model, "--save-every", str(spec.warmup), "--bm25-index", str(bm25_index),
              "--stop-at", str(spec.warmup)))
    return checkpoint


def model_dir(family: str, row: str, seed: int) -> Path:
    """The run folder ``ance_ir.train`` writes for ``row`` (its ``final/`` model; RocketQAv2's ``ranker/``)."""
    return WORK / family / f"{row}.seed{seed}"


def index_of(family: str, model: Path, name: str, precision: str = "auto") -> Path:
    """The dense index of ``model``, encoded under ``precision`` when missing."""
    index = WORK / family / "indexes" / name
    if not (index / "meta.json").is_file():
        sh(py("ance_ir.encode", "--corpus", "rag24-mini", "--encoder", str(model), "--output", str(index),
              "--precision", precision, "--quiet"))
    return index


def train_row(family: str, row: Row, seed: int, precision: str | None = None, encode_precision: str = "auto") -> None:
    """Train one row for one seed, search the test topics, keep the run and the training log; ``precision``
    replaces the family's and the row's autocast (fp32 where the CPU emulates bf16), ``encode_precision`` is the
    indexes' (``ance_ir.encode --precision``)."""
    out = run_file(family, row.name, seed)
    if out.is_file():
        return
    if row.start == "warm":
        start = warm_model(family, seed)
        start_index = index_of(family, start, f"warm.seed{seed}", encode_precision)
    else:
        train_row(family, next(r for r in ROWS if r.name == row.start), seed, precision, encode_precision)
        start = model_dir(family, row.start, seed) / "final"
        start_index = index_of(family, start, f"{row.start}.seed{seed}", encode_precision)
    model = model_dir(family, row.name, seed)
    adore = row.config == "adore"
    if not (model / "final").is_dir():
        where = ["--set", f"task.index={start_index}", "--model", str(start)] if adore else [
            "--set", f"negatives.index={start_index}", "--init-from", str(start)]
        if row.groups:
            groups = scored_groups(family, start_index, seed)
            where = ["--set", f"data.groups={groups}", "--init-from", str(start), "--set",
                     f"negatives.denoise_above={denoise_threshold(groups) if row.denoise else 'null'}"]
            if row.config == "rocketqa-v2":
                where += ["--set", f"task.ranker={TEACHER / 'final'}"]
        sh(py("ance_ir.train", "--config", f"configs/rag24-mini/{row.config}.yaml", "--seed", str(seed),
              "--output", str(model), "--no-progress", *FAMILY_FLAGS[family], *row.flags, *where,
              *(("--precision", precision) if precision else ())))
    index = start_index if adore else index_of(family, model / "final", f"{row.name}.seed{seed}", encode_precision)
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(model / "log.jsonl", out.with_name(f"{row.name}.seed{seed}.log.jsonl"))
    sh(py("ance_ir.search", "--topics", "rag24-mini-test", "--index", str(index), "--encoder", str(model / "final"),
          "--hits", "100", "--output", str(out), "--run-tag", f"negatives-{row.name}"))


def scored_groups(family: str, index: Path, seed: int) -> Path:
    """The warm model's top-30 hard negatives of each training query, every passage scored by the teacher."""
    groups = WORK / family / f"groups.warm.seed{seed}.jsonl.gz"
    scored = WORK / family / f"groups.warm.seed{seed}.minilm-ce.jsonl.gz"
    if not scored.is_file():
        if not (TEACHER / "final").is_dir():
            raise SystemExit(f"no teacher at {TEACHER}: run python -m experiments.rag24_distill teacher")
        sh(py("ance_ir.negatives", "--topics", "rag24-mini-train", "--qrels", "rag24-mini-train", "--corpus",
              "rag24-mini", "--source", "dense", "--index", str(index), "--depth", "30", "--min-positive-grade", "2",
              "--output", str(groups)))
        sh(py("ance_ir.rerank", "--groups", str(groups), "--corpus", "rag24-mini", "--model", str(TEACHER),
              "--output", str(scored), "--quiet"))
    return scored


def denoise_threshold(groups: Path) -> float:
    """RocketQA's cut: the median teacher score of the judged positives (a negative scored above it is more
    likely an unjudged positive than a negative)."""
    return round(statistics.median(p.score for g in read_groups(groups) for p in g.positives), 3)


def search_warm(family: str, seed: int, encode_precision: str = "auto") -> None:
    """The warm-up model itself (BM25 Neg at step W), the start of every row."""
    out = run_file(family, "warm", seed)
    if not out.is_file():
        index = index_of(family, warm_model(family, seed), f"warm.seed{seed}", encode_precision)
        out.parent.mkdir(parents=True, exist_ok=True)
        sh(py("ance_ir.search", "--topics", "rag24-mini-test", "--index", str(index), "--hits", "100", "--output",
              str(out), "--run-tag", "negatives-warm"))


def rerank_with_ranker(family: str, seed: int) -> None:
    """RocketQAv2's trained ranker reranking the top 100 of the best first stage (the committed BM25 + MiniLM
    hybrid of ``docs/retrieval-rag24.md``), as ``docs/rerank-rag24.md`` reranks it with the teacher."""
    out = RUNS / family / f"rocketqa-v2.seed{seed}.ranker-hybrid.test.trec.gz"
    if not out.is_file():
        sh(py("ance_ir.rerank", "--run", str(ROOT / "runs" / "rag24" / "hybrid.test.trec.gz"), "--topics",
              "rag24-mini-test", "--corpus", "rag24-mini", "--model",
              str(model_dir(family, "rocketqa-v2", seed) / "ranker"), "--depth", "100", "--hits", "100",
              "--quiet", "--output", str(out)))


def run(family: str, seeds: list[int], only: list[str] | None, precision: str | None,
        encode_precision: str = "auto") -> None:
    for seed in seeds:
        search_warm(family, seed, encode_precision)
        for row in ROWS:
            if only is None or row.name in only:
                train_row(family, row, seed, precision, encode_precision)
                if row.name == "rocketqa-v2":
                    rerank_with_ranker(family, seed)


def report(family: str, seeds: list[int], output: str) -> None:
    warmup = FAMILIES[family].warmup
    ance = [run_file(family, "ance", s) for s in seeds]
    rows = [(f"BM25 Neg warm-up (step {warmup}, the rows' start)", [run_file(family, "warm", s) for s in seeds]),
            ("ANCE (BM25 warm-up, Table 1)", ance),
            ("DPR (BM25 + in-batch, Table 1)", [run_file(family, "dpr", s) for s in seeds]),
            *[(r.label, [run_file(family, r.name, s) for s in seeds]) for r in ROWS]]
    seeds_text = " ".join(map(str, seeds))
    which = which_seeds(seeds)
    body = (f"### {family}, {which}\n\n" + "\n".join(comparison_table(rows, {"ANCE": ance})) + left_out(rows)
            + "\n\nPaired two-sided t-test over the 101 test topics of each row's per-topic nDCG@10 (mean over seeds) "
              "against ANCE's.\n\n"
              f"```bash\npython -m experiments.rag24_negatives run --family {family} --seeds {seeds_text}\n"
              f"python -m experiments.rag24_negatives report --family {family} --seeds {seeds_text} "
              f"--output {output}\n```")
    write_section(output, f"negatives-{family}-seeds-{'-'.join(map(str, seeds))}", body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="train, encode and search the rows")
    run_parser.add_argument("--only", nargs="+", choices=[r.name for r in ROWS])
    run_parser.add_argument("--precision", choices=["fp32", "bf16"],
                            help="train every row under this autocast instead of its own (RocketQAv2 and the "
                                 "minilm family: bf16, which a CPU without AVX-512 BF16 or AMX emulates ~4x slower)")
    run_parser.add_argument("--encode-precision", choices=["auto", "fp32", "bf16", "int8"], default="auto",
                            help="the indexes' ance_ir.encode --precision (auto: bf16 on a CPU with AMX, int8 on "
                                 "one without)")
    report_parser = commands.add_parser("report", help="write the results table")
    report_parser.add_argument("--output", default="docs/negatives-rag24.md")
    for sub in (run_parser, report_parser):
        sub.add_argument("--family", choices=sorted(FAMILY_FLAGS), default="bert-tiny")
        sub.add_argument("--seeds", type=int, nargs="+", default=[1])
    args = parser.parse_args()
    if args.command == "run":
        run(args.family, args.seeds, args.only, args.precision, args.encode_precision)
    else:
        report(args.family, args.seeds, args.output)


if __name__ == "__main__":
    main()
