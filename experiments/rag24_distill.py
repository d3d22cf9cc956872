"""Negatives and teachers on rag24-mini (issue 14): distilled students against Table 1's DPR row.

    python -m experiments.rag24_distill teacher
    python -m experiments.rag24_distill run --seeds 1 2 3 [--only margin-mse kl] [--family minilm]
    python -m experiments.rag24_distill report --seeds 1 2 3 --output docs/distill-rag24.md [--family minilm]
    python -m experiments.rag24_distill run --teacher dense --seeds 1 2 3
    python -m experiments.rag24_distill report --teacher dense --seeds 1 2 3 --output docs/distill-rag24.md

``teacher`` writes the training groups every distilled row reads: each training topic's positives (grade >= 2)
and 30 BM25 negatives (from the committed BM25 train run, judged passages removed), every passage scored by the
cross-encoder ``train-runs/rag24-mini/cross-encoder-minilm`` (trained by the command in docs/rerank-rag24.md,
trained here first when it is missing). ``run`` trains each row from the family's backbone with the budget of its
Table 1 rows (bert-tiny: 600 steps of 16 queries, lr 1e-4, mean pooling, unnormalised dot products,
``configs/presets/bert-tiny.yaml``; minilm: 100 steps of 8 queries, lr 2e-5, normalised vectors, temperature 0.05,
bf16), encodes the corpus with the final model and writes 100 hits a query for the 101 test topics to
``runs/rag24/distill/FAMILY/`` (committed, with the training logs). Every step is a package CLI, printed as it
runs; finished steps are skipped. ``report`` evaluates the committed runs against Table 1's DPR runs of the same
family and seeds (paired t-test over topics).

``--teacher dense`` runs the rows whose teacher is zero-shot all-MiniLM-L6-v2, a dense model (``loss.teacher_index``:
its index of the corpus, ``train-runs/distill/minilm-index``, encoded first when it is missing): Table 1's DPR row
itself for bert-tiny (its flags, ``--negatives dpr``, 600 steps unless a row sets more) with the loss of
``configs/rag24-mini/kl-dense-teacher.yaml`` (a row without a config: DPR alone). ``agreement`` measures how close
each of their students comes to the teacher (KL over the teacher's top 100, share of its top 10).
"""

from __future__ import annotations

import argparse
import functools
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import write_section
from experiments.comparison import comparison_table, left_out, which_seeds
from experiments.rag24_table1 import BM25_RUNS, COMMON, FAMILIES, ROOT, py, sh, work

WORK = ROOT / "train-runs" / "distill"
RUNS = ROOT / "runs" / "rag24" / "distill"
TEACHER = ROOT / "train-runs" / "rag24-mini" / "cross-encoder-minilm"
GROUPS = WORK / "groups.bm25.jsonl.gz"
SCORED = WORK / "groups.minilm-ce.jsonl.gz"
DENSE_TEACHER = WORK / "minilm-index"
# each replaces the DPR flags' BM25 negatives (so their index is cleared: the check refuses settings nothing reads)
TEACHER_NEGATIVES = ("negatives.name=candidates", "negatives.depth=30", "negatives.source=dense",
                     f"negatives.index={DENSE_TEACHER}", "negatives.bm25_index=null", "task.in_batch=true")
PSEUDO = WORK / "groups.msmarco-dev.minilm.jsonl.gz"
WITH_PSEUDO = WORK / "groups.bm25-and-msmarco-dev.jsonl.gz"
# the training topics' groups (30 BM25 negatives) and the MS MARCO dev queries labelled by the teacher; the groups
# bring the topics and their positives (the qrels still keep judged passages out of the negatives)
PSEUDO_GROUPS = ("data.source=groups", f"data.groups={WITH_PSEUDO}", "data.topics=null", "data.min_positive_grade=1",
                 "negatives.name=groups", "negatives.depth=30", "negatives.bm25_index=null", "task.in_batch=true")
#: each family's flags on top of the (bert-tiny) configs: Table 1's settings of the family, W + C steps
STUDENT_FLAGS = {
    "bert-tiny": ("--model", "bert-tiny", "--pooling", "mean", "--no-normalize", "--temperature", "1.0", "--lr",
                  "1e-4", "--batch-size", "16", "--warmup-ratio", "0.1", "--max-steps", "600", "--refresh-every", "0",
                  "--no-progress"),
    "minilm": ("--model", "minilm", "--pooling", "mean", "--normalize", *FAMILIES["minilm"].flags, "--max-steps",
               str(FAMILIES["minilm"].warmup + FAMILIES["minilm"].cont), "--refresh-every", "0", "--no-progress"),
}


@dataclass(frozen=True)
class Row:
    """A student trained from ``configs/rag24-mini/CONFIG.yaml`` with the bert-tiny budget and ``sets`` on top;
    ``teacher``: the cross-encoder's scored groups, or the dense teacher with Table 1's DPR flags."""

    name: str
    label: str
    config: str | None  # None: Table 1's DPR command alone (dense rows)
    sets: tuple[str, ...] = ()
    teacher: str = "cross-encoder"


ROWS = [
    Row("margin-mse", "Margin-MSE (1 BM25 negative)", "margin-mse"),
    Row("mse", "MSE on the scores (1 BM25 negative)", "margin-mse", ("loss.name=mse",)),
    Row("kl", "KL, listwise (7 BM25 negatives)", "kl"),
    # TAS-B's dual supervision: the teacher's margins on the own group plus NLL over the batch's passages (as DPR)
    Row("margin-mse-inbatch", "Margin-MSE + in-batch NLL", "margin-mse", ("task.in_batch=true", "loss.label_weight=1")),
    Row("kl-inbatch", "KL + in-batch NLL (7 BM25 negatives)", "kl", ("task.in_batch=true", "loss.label_weight=1")),
    # the same loss on topic-aware (k-means, one topic a batch), margin-balanced (10 bins) batches
    Row("tas-b", "TAS-B: Margin-MSE + in-batch NLL, topic and margin-balanced batches", "tas-b"),
    # DPR with a dense teacher scoring all 32 passages of each batch; DPR itself trained again, its model kept
    Row("dpr-again", "DPR trained again here (no teacher)", None, teacher="dense"),
    Row("kl-dense", "DPR + KL to zero-shot MiniLM over the batch", "kl-dense-teacher", teacher="dense"),
    Row("kl-dense-only", "KL to zero-shot MiniLM over the batch, no NLL", "kl-dense-teacher",
        ("loss.label_weight=0",), teacher="dense"),
    # the negative drawn from the teacher's own top 30 (judged passages removed) instead of BM25's top 200
    Row("kl-dense-hard", "DPR + KL to MiniLM, negatives from MiniLM's top 30", "kl-dense-teacher",
        TEACHER_NEGATIVES, teacher="dense"),
    Row("kl-dense-hard-only", "KL to MiniLM, negatives from MiniLM's top 30, no NLL", "kl-dense-teacher",
        (*TEACHER_NEGATIVES, "loss.label_weight=0"), teacher="dense"),
    # more queries than the 191 training topics: 6,980 MS MARCO dev queries without labels, each with MiniLM's top
    # passage as its positive and its next 30 as negatives, trained on along with the training topics
    Row("kl-dense-pseudo", "DPR + KL to MiniLM, plus 6,980 MS MARCO queries labelled by MiniLM", "kl-dense-teacher",
        PSEUDO_GROUPS, teacher="dense"),
    Row("kl-dense-pseudo-only", "KL to MiniLM, plus the MiniLM-labelled MS MARCO queries, no NLL",
        "kl-dense-teacher", (*PSEUDO_GROUPS, "loss.label_weight=0"), teacher="dense"),
    # budget or capacity? DPR and DPR + KL trained four times as long
    Row("dpr-4x", "DPR, 4x the steps (2,400)", None, ("optim.max_steps=2400",), teacher="dense"),
    Row("kl-dense-4x", "DPR + KL to zero-shot MiniLM over the batch, 4x the steps (2,400)", "kl-dense-teacher",
        ("optim.max_steps=2400",), teacher="dense"),
]
TEACHERS = ("cross-encoder", "dense")


def run_file(row: str, seed: int, family: str = "bert-tiny") -> Path:
    if row in ("dpr", "ance"):
        return ROOT / "runs" / "rag24" / "table1" / family / f"{row}.seed{seed}.test.trec.gz"
    return RUNS / family / f"{row}.seed{seed}.test.trec.gz"


def family_work(family: str) -> Path:
    """Where the family's students and their indexes go (bert-tiny's, the first family's, at the top)."""
    return WORK if family == "bert-tiny" else WORK / family


def teacher_model() -> Path:
    """The MiniLM cross-encoder trained on the training topics (``docs/rerank-rag24.md``)."""
    if not (TEACHER / "final").is_dir():
        sh(py("ance_ir.train", "--config", "configs/rag24-mini/cross-encoder.yaml", "--set", "model.name=minilm",
              "--set", "task.n_negatives=3", "--set", "optim.lr=3e-5", "--set", "optim.max_steps=300",
              "--save-every", "50", "--output", str(TEACHER), "--no-progress"))
    return TEACHER / "final"


def dense_teacher() -> Path:
    """Zero-shot all-MiniLM-L6-v2's index of the corpus: the dense teacher's passage vectors."""
    if not (DENSE_TEACHER / "meta.json").is_file():
        sh(py("ance_ir.encode", "--corpus", "rag24-mini", "--encoder", "minilm", "--output", str(DENSE_TEACHER),
              "--quiet"))
    return DENSE_TEACHER


def pseudo_groups() -> Path:
    """The training topics' groups of BM25 negatives and MS MARCO's dev queries labelled by the dense teacher
    (its top passage of the corpus the positive, the next 30 the negatives), in one groups file."""
    from ance_ir.data import read_groups, write_groups

    if not PSEUDO.is_file():
        sh(py("ance_ir.negatives", "--topics", "msmarco-dev", "--corpus", "rag24-mini", "--source", "dense", "--index",
              str(dense_teacher()), "--hits", "31", "--depth", "30", "--pseudo-positives", "1", "--output",
              str(PSEUDO)))
    if not WITH_PSEUDO.is_file():
        write_groups(WITH_PSEUDO, [*read_groups(bm25_groups()), *read_groups(PSEUDO)])
    return WITH_PSEUDO


def student_args(row: Row, family: str) -> list[str]:
    """The ``ance_ir.train`` arguments of a student: the scored groups with the family's budget, or Table 1's
    bert-tiny DPR flags, with the dense teacher's index when the row has a config."""
    if row.teacher == "cross-encoder":
        return [*STUDENT_FLAGS[family], "--set", f"data.groups={SCORED}"]
    family = FAMILIES["bert-tiny"]
    return [*COMMON, *family.flags, "--model", family.model, "--negatives", "dpr", "--bm25-index",
            str(work("bert-tiny", "bm25-index")), "--max-steps", str(family.warmup + family.cont), "--refresh-every",
            "0", *(["--teacher-index", str(dense_teacher())] if row.config else [])]


def bm25_groups() -> Path:
    """Each training topic's positives (grade >= 2) and 30 BM25 negatives (judged passages removed)."""
    if not GROUPS.is_file():
        WORK.mkdir(parents=True, exist_ok=True)
        sh(py("ance_ir.negatives", "--topics", "rag24-mini-train", "--qrels", "rag24-mini-train", "--corpus",
              "rag24-mini", "--source", "run", "--run", BM25_RUNS["train"], "--depth", "30",
              "--min-positive-grade", "2", "--output", str(GROUPS)))
    return GROUPS


def teacher() -> None:
    """The groups of BM25 negatives, scored by the cross-encoder."""
    teacher_model()
    bm25_groups()
    if not SCORED.is_file():
        sh(py("ance_ir.rerank", "--groups", str(GROUPS), "--corpus", "rag24-mini", "--model", str(TEACHER),
              "--output", str(SCORED), "--quiet"))


def train_row(row: Row, seed: int, family: str) -> None:
    """Train, encode and search one row for one seed; keep its run and training log."""
    out = run_file(row.name, seed, family)
    if out.is_file():
        return
    model = family_work(family) / f"{row.name}.seed{seed}"
    if not (model / "final").is_dir():
        sets = [a for s in row.sets for a in ("--set", s)]
        config = ["--config", f"configs/rag24-mini/{row.config}.yaml"] if row.config else []
        sh(py("ance_ir.train", *config, "--seed", str(seed), "--output", str(model), *student_args(row, family),
              *sets))
    index = family_work(family) / "indexes" / f"{row.name}.seed{seed}"
    if not (index / "meta.json").is_file():
        sh(py("ance_ir.encode", "--corpus", "rag24-mini", "--encoder", str(model / "final"), "--output", str(index),
              "--quiet", *FAMILIES[family].encoder_flags))
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(model / "log.jsonl", out.parent / f"{row.name}.seed{seed}.log.jsonl")
    sh(py("ance_ir.search", "--topics", "rag24-mini-test", "--index", str(index), "--hits", "100", "--output",
          str(out), "--run-tag", f"distill-{row.name}"))


def run(seeds: list[int], only: list[str] | None, kind: str, family: str) -> None:
    if kind == "cross-encoder":
        teacher()
    elif only is None or any("pseudo" in name for name in only):
        pseudo_groups()
    for seed in seeds:
        for row in ROWS:
            if row.teacher == kind and (only is None or row.name in only):
                train_row(row, seed, family)


def report(seeds: list[int], output: str, kind: str, family: str) -> None:
    rows = [("DPR (BM25 + in-batch, Table 1)", [run_file("dpr", s, family) for s in seeds]),
            ("ANCE (BM25 warm-up, Table 1)", [run_file("ance", s, family) for s in seeds]),
            *[(r.label, [run_file(r.name, s, family) for s in seeds]) for r in ROWS if r.teacher == kind]]
    lines = comparison_table(rows, {"DPR": rows[0][1]})
    selection = " ".join(map(str, seeds)) + ("" if family == "bert-tiny" else f" --family {family}")
    which = which_seeds(seeds)
    body = (f"### {family}, {which}\n\n" + "\n".join(lines) + left_out(rows)
            + "\n\nPaired two-sided t-test over the 101 test topics of each row's per-topic nDCG@10 (mean over seeds) "
              "against DPR's.\n\n```bash\n"
              + ("python -m experiments.rag24_distill teacher\n" if kind == "cross-encoder" else "")
              + f"python -m experiments.rag24_distill run --teacher {kind} --seeds {selection}\n"
              f"python -m experiments.rag24_distill report --teacher {kind} --seeds {selection} "
              f"--output {output}\n```")
    seeds_marker = "-".join(map(str, seeds))
    write_section(output, f"distill-{family if kind == 'cross-encoder' else 'dense'}-seeds-{seeds_marker}", body)


@functools.cache
def dense_teacher_scores(topics: str) -> tuple[list[str], list[str], Any]:
    """The dense teacher's scores of every corpus passage for ``topics``: query ids, docids and the ``[Q, P]`` scores
    (computed once for all the rows ``agreement`` measures)."""
    import torch

    from ance_ir.datasets import resolve_topics
    from ance_ir.train.teacher import DenseTeacher

    queries = resolve_topics(topics)
    teacher = DenseTeacher(str(DENSE_TEACHER), queries, [], torch.device("cpu"))
    qids, docids = sorted(queries), list(teacher.row)
    return qids, docids, teacher.scores(qids, docids)


def teacher_agreement(index: Path, topics: str, depth: int = 100,
                      teacher_temperature: float = 0.05) -> tuple[float, float]:
    """How close the student (``index``) comes to the dense teacher on ``topics``, mean over the topics: KL(teacher ||
    student) over each query's top ``depth`` passages by the teacher (the teacher's cosines over
    ``teacher_temperature`` against the student's dot products: the distributions the rows' loss matches, so the
    student's score scale counts too), and the share of the teacher's top 10 of the corpus in the student's (scale
    free)."""
    import torch

    from ance_ir.datasets import resolve_topics
    from ance_ir.train.teacher import DenseTeacher

    qids, docids, teacher = dense_teacher_scores(topics)
    teacher = teacher / teacher_temperature
    student = DenseTeacher(str(index), resolve_topics(topics), [], torch.device("cpu")).scores(qids, docids)
    top = teacher.topk(depth, dim=1).indices
    log_t = torch.log_softmax(teacher.gather(1, top), 1)
    log_s = torch.log_softmax(student.gather(1, top), 1)
    kl = float((log_t.exp() * (log_t - log_s)).sum(1).mean())
    mine = student.topk(10, dim=1).indices
    overlap = float((top[:, :10, None] == mine[:, None, :]).any(2).float().mean())
    return kl, overlap


def agreement(seeds: list[int], output: str) -> None:
    """How closely each dense-teacher row's student matches the teacher on the training topics (what it was fitted
    to) and on the test topics, beside its test nDCG@10."""
    import statistics

    from experiments.rag24_interaction_report import per_query_of

    lines = ["| row | seed | KL(teacher ‖ student): training topics | test topics | teacher's top 10 in the "
             "student's: training topics | test topics | test nDCG@10 |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for row in (r for r in ROWS if r.teacher == "dense"):
        for seed in seeds:
            index = WORK / "indexes" / f"{row.name}.seed{seed}"
            if not (index / "meta.json").is_file():  # a section with rows left out would replace the committed one
                raise SystemExit(f"error: {index}: missing; `run` encodes it when the row's run file is not "
                                 "committed (set that file aside), or encode the row's model into it")
            ndcg = statistics.fmean(v[0] for v in per_query_of([run_file(row.name, seed)])["ndcg_cut_10"].values())
            (kl_train, top_train), (kl_test, top_test) = (teacher_agreement(index, t) for t in
                                                          ("rag24-mini-train", "rag24-mini-test"))
            lines.append(f"| {row.label} | {seed} | {kl_train:.3f} | {kl_test:.3f} | {top_train:.3f} | "
                         f"{top_test:.3f} | {ndcg:.4f} |")
    seeds_text = " ".join(map(str, seeds))
    body = ("\n".join(lines) + "\n\nKL over each query's top 100 passages by the teacher (its cosines / 0.05, the "
            "student's dot products); top 10s over the whole corpus; means over the topics.\n\n```bash\n"
            f"python -m experiments.rag24_distill agreement --seeds {seeds_text} --output {output}\n```")
    write_section(output, "distill-dense-agreement", body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("teacher", help="write the scored training groups")
    run_parser = commands.add_parser("run", help="train, encode and search the rows")
    run_parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    run_parser.add_argument("--only", nargs="+", choices=[r.name for r in ROWS])
    report_parser = commands.add_parser("report", help="write the results table")
    report_parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    report_parser.add_argument("--output", default="docs/distill-rag24.md")
    for sub in (run_parser, report_parser):
        sub.add_argument("--teacher", choices=TEACHERS, default="cross-encoder", help="the rows of this teacher")
        sub.add_argument("--family", choices=STUDENT_FLAGS, default="bert-tiny",
                         help="the students' backbone and Table 1 budget (the dense teacher's rows: bert-tiny only)")
    agreement_parser = commands.add_parser("agreement", help="the dense-teacher rows' KL to the teacher")
    agreement_parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    agreement_parser.add_argument("--output", default="docs/distill-rag24.md")
    args = parser.parse_args()
    if args.command in ("run", "report") and args.teacher == "dense" and args.family != "bert-tiny":
        parser.error("the dense teacher's rows are bert-tiny's (Table 1's DPR command)")
    if args.command == "teacher":
        teacher()
    elif args.command == "run":
        run(args.seeds, args.only, args.teacher, args.family)
    elif args.command == "agreement":
        agreement(args.seeds, args.output)
    else:
        report(args.seeds, args.output, args.teacher, args.family)


if __name__ == "__main__":
    main()
