"""Pretraining from rag24-mini itself (issue 16): what each pretraining data source makes of the corpus.

    python -m experiments.rag24_pretrain samples --output docs/pretraining-rag24.md

For each source of ``ance_ir/pretrain_data`` (ICT, BFS, WLP, Spider, SimCSE, Contriever's crops, which MoCo trains
on too) ``python -m ance_ir.pretrain_data SOURCE --corpus rag24-mini --sample 10 --with-text`` draws ten of the
pairs a training run with seed 42 would see (``runs/rag24/pretrain/SOURCE.samples.jsonl``, committed) and the report
prints them with the number of pairs the source makes of the corpus. WLP has no link file here: ``titles:
first-line`` links a passage to the pages whose titles (their first segment's first line) it mentions.

    python -m experiments.rag24_pretrain run --family bert-tiny --seeds 1 [--only ict simcse] [--recipes inbatch]
    python -m experiments.rag24_pretrain report --family bert-tiny --seeds 1 --output docs/pretraining-rag24.md

``run`` pretrains ``bert-tiny`` (its MLM start; ``--family minilm``: all-MiniLM-L6-v2) with each task alone
(``configs/rag24-mini/pretrain-TASK.yaml``, seed N; ``PRETRAINING``: bert-tiny 500 steps of 32 pairs, minilm 100
with its own temperature, learning rate and normalised vectors), and with ICT + BFS + WLP jointly
(``pretrain-joint.yaml``: the three sources' pairs of seed N in one groups file, batches drawn from all three); MLM
→ SimCSE runs SimCSE from the MLM model (the survey's domain-adaptive MLM before SimCSE); "MLM, the head trained
alone for the first half" is MLM with ``task.head_warmup_steps`` half its steps (MiniLM's checkpoint has no MLM
head: a new one is trained). Each model is then searched zero-shot and fine-tuned with two of Table 1's recipes of
the family, unchanged but for the start: in-batch (bert-tiny: 600 steps) and BM25 → ANCE (bert-tiny: 300 BM25 Neg
steps of the 600-step schedule, then 300 ANCE steps). The rows without pretraining are Table 1's committed runs (the
same commands from the family's model). Runs go to ``runs/rag24/pretrain/FAMILY/`` (committed), models and indexes
to ``train-runs/pretrain/FAMILY/`` (git-ignored); finished steps are skipped, so an interrupted run continues.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ance_ir.data import corpus_texts
from ance_ir.datasets import resolve_corpus
from ance_ir.eval.significance import paired_t_test
from bench.common import write_section
from experiments.comparison import comparison_table, which_seeds
from experiments.rag24_adapt import head
from experiments.rag24_interaction_report import per_query_of
from experiments.rag24_table1 import COMMON, FAMILIES, ROOT, ROWS, py, sh
from experiments.rag24_table1 import run_file as table1_run

SAMPLES = ROOT / "runs" / "rag24" / "pretrain"
#: source -> its --option flags
SOURCES = {"ict": [], "bfs": [], "wlp": ["--option", "titles=first-line"], "spider": [], "simcse": [],
           "contriever": []}
WHAT = {
    "ict": "Inverse Cloze Task: one sentence of a passage as the query, the rest of the passage as its positive",
    "bfs": "Body First Selection: a sentence of a document's first segment, another segment of the same document",
    "wlp": "Wiki Link Prediction: a passage of a page that names another page's title, a passage of that page",
    "spider": "Spider: a window around a span that recurs in a document, another window with the span (the "
              "negative: a window without it)",
    "simcse": "SimCSE: a passage and itself (dropout makes the two encodings differ)",
    "contriever": "Contriever (and MoCo): two independent random crops of one passage",
}


def samples() -> dict[str, int]:
    """Write ten pairs of every source; the number of pairs each makes of the corpus."""
    SAMPLES.mkdir(parents=True, exist_ok=True)
    counts = {}
    for source, options in SOURCES.items():
        command = [sys.executable, "-m", "ance_ir.pretrain_data", source, "--corpus", "rag24-mini", *options,
                   "--sample", "10", "--with-text", "--seed", "42", "--output",
                   str(SAMPLES / f"{source}.samples.jsonl")]
        done = subprocess.run(command, cwd=ROOT, check=True, capture_output=True, text=True)
        counts[source] = int(done.stderr.strip().splitlines()[-1].split(": ", 1)[1].split()[0])
    return counts


def section(source: str, pairs: int, texts: dict[str, str]) -> str:
    groups = [json.loads(line) for line in (SAMPLES / f"{source}.samples.jsonl").read_text().splitlines()]
    lines = [f"### {source}: {pairs:,} pairs from the corpus", "", WHAT[source] + ".", ""]
    for group in groups:
        lines += [f"- Q: \"{head(group['query'], 30)}\"",
                  f"  - positive: \"{head(group['positive_passages'][0]['text'], 45)}\""]
        lines += [f"  - negative: \"{head(p.get('text') or texts[p['docid']], 45)}\""
                  for p in group["negative_passages"]]
    return "\n".join(lines)


@dataclass(frozen=True)
class Pretraining:
    """How a family pretrains: ``steps`` of 32 pairs with ``flags`` on top of the ``pretrain-*.yaml`` configs (which
    hold bert-tiny's settings), and ``dense_flags`` for the starts that train a dense model (not MLM);
    ``encoder_flags`` encode a pretrained model (an MLM model has no dense settings)."""

    steps: int
    flags: tuple[str, ...]
    dense_flags: tuple[str, ...]
    encoder_flags: tuple[str, ...]


PRETRAINING = {
    "bert-tiny": Pretraining(500, (), (), ("--pooling", "mean", "--no-normalize")),
    "minilm": Pretraining(100, ("--model", "minilm", "--lr", "2e-5", "--precision", "bf16"),
                          ("--normalize", "--temperature", "0.05"), ("--pooling", "mean", "--normalize")),
}


@dataclass(frozen=True)
class Start:
    """A pretraining run: ``configs/rag24-mini/CONFIG.yaml`` from the family's model or the model of start
    ``after``; ``joint``: the groups file the config trains on holds these sources' pairs; ``dense``: whether it
    trains a dense model (MLM trains a masked-language model, which takes no dense settings); ``head_warmup``: the
    first half of the steps train the MLM head alone (``task.head_warmup_steps``: a new head, as MiniLM's)."""

    name: str
    label: str
    config: str
    after: str | None = None
    joint: tuple[str, ...] = ()
    dense: bool = True
    head_warmup: bool = False


STARTS = [
    Start("mlm", "MLM (domain-adaptive, on the corpus)", "pretrain-mlm", dense=False),
    Start("mlm-warm", "MLM, the head trained alone for the first half", "pretrain-mlm", dense=False,
          head_warmup=True),
    Start("ict", "ICT", "pretrain-ict"),
    Start("bfs", "BFS", "pretrain-bfs"),
    Start("wlp", "WLP (title links)", "pretrain-wlp"),
    Start("ict-bfs-wlp", "ICT + BFS + WLP jointly", "pretrain-joint", joint=("ict", "bfs", "wlp")),
    Start("spider", "Spider", "pretrain-spider"),
    Start("simcse", "SimCSE", "pretrain-simcse"),
    Start("mlm-simcse", "MLM → SimCSE", "pretrain-simcse", after="mlm"),
    Start("contriever", "Contriever, in-batch crops", "pretrain-contriever"),
    Start("contriever-moco", "Contriever, MoCo", "pretrain-contriever-moco"),
]
RECIPES = {"zero-shot": "zero-shot", "inbatch": "fine-tuned in-batch", "ance": "fine-tuned BM25 → ANCE"}


def work(family: str, name: str) -> Path:
    return ROOT / "train-runs" / "pretrain" / family / name


def run_file(family: str, start: str, recipe: str, seed: int) -> Path:
    """The test run of ``start`` (``none``: no pretraining, Table 1's runs) after ``recipe``."""
    if start == "none":
        return table1_run(family, recipe, None if recipe == "zero-shot" else seed, "test")
    return ROOT / "runs" / "rag24" / "pretrain" / family / f"{start}.{recipe}.seed{seed}.test.trec.gz"


def trained(run: Path, steps: int) -> Path:
    """``run``'s checkpoint at ``steps`` (its final model, or the ``--stop-at`` checkpoint)."""
    return run / "checkpoints" / f"step-{steps:08d}"


def pretrained(family: str, start: Start, seed: int) -> Path:
    """The model of ``start`` for ``seed``, pretrained first when missing."""
    spec = PRETRAINING[family]
    run = work(family, f"{start.name}.seed{seed}")
    if not trained(run, spec.steps).is_dir():
        command = ["ance_ir.train", "--config", f"configs/rag24-mini/{start.config}.yaml", *spec.flags,
                   *(spec.dense_flags + ("--refresh-every", "0") if start.dense else ()), "--seed", str(seed),
                   "--output", str(run), "--max-steps", str(spec.steps), "--no-progress"]
        if start.after:
            command += ["--model", str(pretrained(family, next(s for s in STARTS if s.name == start.after), seed))]
        if start.joint:
            command += ["--set", f"data.groups={joint_pairs(family, start.joint, seed)}"]
        if start.head_warmup:
            command += ["--set", f"task.head_warmup_steps={spec.steps // 2}"]
        sh(py(*command))
    return trained(run, spec.steps)


def joint_pairs(family: str, sources: tuple[str, ...], seed: int) -> Path:
    """One groups file of the pairs every source in ``sources`` makes with ``seed`` (written when missing)."""
    joint = work(family, f"{'-'.join(sources)}.seed{seed}.jsonl")
    if not joint.is_file():
        parts = []
        for source in sources:
            part = work(family, f"{source}.pairs.seed{seed}.jsonl")
            if not part.is_file():
                sh(py("ance_ir.pretrain_data", source, "--corpus", "rag24-mini", *SOURCES[source], "--seed",
                      str(seed), "--output", str(part)))
            parts.append(part.read_text())
        joint.write_text("".join(parts))
    return joint


def search(family: str, model: Path, index: Path, out: Path) -> None:
    """Encode the corpus with ``model`` into ``index`` (when missing) and write its test run (100 hits)."""
    if not (index / "meta.json").is_file():
        sh(py("ance_ir.encode", "--corpus", "rag24-mini", "--encoder", str(model), "--output", str(index), "--quiet",
              *PRETRAINING[family].encoder_flags))
    out.parent.mkdir(parents=True, exist_ok=True)
    sh(py("ance_ir.search", "--topics", "rag24-mini-test", "--index", str(index), "--hits", "100", "--output",
          str(out), "--run-tag", f"pretrain-{family}-{out.name.split('.test')[0]}"))


def fine_tune(family: str, start: Start, recipe: str, seed: int) -> Path:
    """Table 1's ``recipe`` of the family (in-batch, or BM25 Neg warm-up then ANCE) from the pretrained model."""
    spec, row = FAMILIES[family], {r.name: r for r in ROWS}
    base = [*COMMON, *spec.flags, "--seed", str(seed)]
    folder = work(family, f"{start.name}.{recipe}.seed{seed}")
    if recipe == "inbatch":
        if not trained(folder, spec.warmup + spec.cont).is_dir():
            sh(py("ance_ir.train", *base, *row["inbatch"].train, "--output", str(folder), "--model",
                  str(pretrained(family, start, seed)), "--max-steps", str(spec.warmup + spec.cont),
                  "--refresh-every", "0"))
        return trained(folder, spec.warmup + spec.cont)
    warm = work(family, f"{start.name}.bm25.seed{seed}")
    if not trained(warm, spec.warmup).is_dir():
        bm25_index = work(family, "bm25-index")
        if not bm25_index.is_dir():
            sh(py("ance_ir.bm25", "index", "--corpus", "rag24-mini", "--output", str(bm25_index)))
        sh(py("ance_ir.train", *base, *row["bm25"].train, "--output", str(warm), "--model",
              str(pretrained(family, start, seed)), "--max-steps", str(spec.warmup + spec.cont), "--refresh-every",
              "0", "--save-every", str(spec.warmup), "--stop-at", str(spec.warmup), "--bm25-index", str(bm25_index)))
    if not trained(folder, spec.cont).is_dir():
        sh(py("ance_ir.train", *base, *row["ance"].train, "--output", str(folder), "--init-from",
              str(trained(warm, spec.warmup)), "--max-steps", str(spec.cont), "--refresh-every",
              str(spec.refresh_every)))
    return trained(folder, spec.cont)


def run(family: str, seeds: list[int], only: list[str] | None, recipes: list[str]) -> None:
    """Pretrain, search and fine-tune every start (``only``: these) for every seed; finished runs are skipped."""
    for seed in seeds:
        for recipe in recipes:
            for start in STARTS:
                out = run_file(family, start.name, recipe, seed)
                if (only is None or start.name in only) and not out.is_file():
                    model = (pretrained(family, start, seed) if recipe == "zero-shot"
                             else fine_tune(family, start, recipe, seed))
                    search(family, model, work(family, f"indexes/{start.name}.{recipe}.seed{seed}"), out)
                    if recipe != "zero-shot":
                        log = work(family, f"{start.name}.{recipe}.seed{seed}") / "log.jsonl"
                        out.with_name(f"{start.name}.{recipe}.seed{seed}.log.jsonl").write_text(log.read_text())


#: the survey's Baidu table (Breezedeus, "Tricks for Sparse & Dense Retrieval Models", 2021; a Chinese dataset,
#: Recall@1): label, start, recipe here, Baidu's Recall@1, whether the row is a step of the ordering it implies
BAIDU = [("SimCSE (unsupervised)", "simcse", "zero-shot", 42.374, True),
         ("in-batch negatives (supervised)", "none", "inbatch", 51.301, True),
         ("SimCSE + in-batch", "simcse", "inbatch", 55.976, True),
         ("domain-adaptive MLM + SimCSE", "mlm-simcse", "zero-shot", 51.031, False),
         ("domain-adaptive MLM + SimCSE + in-batch", "mlm-simcse", "inbatch", 58.248, True)]


def ordering(family: str, seeds: list[int]) -> str:
    """The survey's Baidu rows here, and whether its ordering SimCSE < in-batch < SimCSE + in-batch < MLM + SimCSE +
    in-batch holds (each step against the one before: nDCG@10 difference and paired t-test)."""
    values = {}
    for label, start, recipe, _, _ in BAIDU:
        per_query = per_query_of([run_file(family, start, recipe, seed) for seed in seeds])
        if per_query is None:
            return "Not all of these runs exist for these seeds yet."
        values[label] = [statistics.fmean(v) for v in per_query["ndcg_cut_10"].values()]
    lines = ["| row | Baidu Recall@1 | nDCG@10 here | vs the step before | paired t-test p |",
             "| --- | --- | --- | --- | --- |"]
    before, holds = None, []
    for label, _, _, baidu, step in BAIDU:
        here = values[label]
        versus = ["", ""]
        if step and before is not None:
            diff = statistics.fmean(here) - statistics.fmean(values[before])
            holds.append(diff > 0)
            versus = [f"{diff:+.4f}", f"{paired_t_test(here, values[before]):.2g}"]
        lines.append(f"| {label}{'' if step else ' (not a step)'} | {baidu:.1f} | {statistics.fmean(here):.4f} | "
                     f"{' | '.join(versus)} |")
        before = label if step else before
    verdict = ("holds: every step is above the one before" if all(holds) else
               f"does not hold: {sum(not h for h in holds)} of its {len(holds)} steps are not above the one before")
    return "\n".join(lines) + f"\n\nThe ordering {verdict} (nDCG@10, mean over the seeds)."


def joint_against_parts(family: str, seeds: list[int]) -> list[str]:
    """Seed 003's comparison: ICT + BFS + WLP jointly against each of its tasks alone, under every recipe (each
    row paired with the joint start's runs of the same recipe)."""
    joint = next(s for s in STARTS if s.joint)
    parts = [s for s in STARTS if s.name in joint.joint]
    lines: list[str] = []
    for recipe, label in RECIPES.items():
        baseline = [run_file(family, joint.name, recipe, seed) for seed in seeds]
        rows = [(f"{joint.label}, {label}", baseline),
                *[(f"{s.label}, {label}", [run_file(family, s.name, recipe, seed) for seed in seeds]) for s in parts]]
        table = comparison_table(rows, {"the joint start": baseline})
        lines += table if not lines else table[2:]
    return lines


def report(family: str, seeds: list[int], output: str) -> None:
    """The retrieval tables (one per recipe, each against no pretraining) and the Baidu ordering."""
    text = " ".join(map(str, seeds))
    which = which_seeds(seeds)
    body = [f"### {family}, {which}", "", f"{PRETRAINING[family].steps} pretraining steps of 32 pairs (MLM: 32 "
            f"passages); fine-tuning: Table 1's {family} recipes.", ""]
    for recipe, label in RECIPES.items():
        baseline = [run_file(family, "none", recipe, seed) for seed in seeds]
        rows = [("no pretraining (Table 1)", baseline),
                *[(s.label, [run_file(family, s.name, recipe, seed) for seed in seeds]) for s in STARTS]]
        body += [f"#### {family}: {label}", "", *comparison_table(rows, {"no pretraining": baseline}), ""]
    body += [f"#### {family}: ICT + BFS + WLP jointly against each task alone (Chang et al., ICLR 2020)", "",
             *joint_against_parts(family, seeds), ""]
    body += [f"#### {family}: the survey's Baidu ordering", "", ordering(family, seeds), "",
             "Paired two-sided t-tests over the 101 test topics of per-topic nDCG@10 (mean over seeds); rows "
             "whose runs of every seed do not exist yet are left out.", "", "```bash",
             f"python -m experiments.rag24_pretrain run --family {family} --seeds {text}",
             f"python -m experiments.rag24_pretrain report --family {family} --seeds {text} --output {output}",
             "```"]
    write_section(Path(output), f"pretrain-retrieval-{family}-seeds-{'-'.join(map(str, seeds))}", "\n".join(body))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["samples", "run", "report"])
    parser.add_argument("--output", default="docs/pretraining-rag24.md")
    parser.add_argument("--family", choices=sorted(PRETRAINING), default="bert-tiny")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--only", nargs="+", choices=[s.name for s in STARTS], help="run: only these starts")
    parser.add_argument("--recipes", nargs="+", choices=list(RECIPES), default=list(RECIPES),
                        help="run: only these recipes (all starts of one recipe run before the next recipe)")
    args = parser.parse_args()
    if args.command == "run":
        run(args.family, args.seeds, args.only, args.recipes)
        return
    if args.command == "report":
        report(args.family, args.seeds, args.output)
        return
    counts = samples()
    texts = corpus_texts(resolve_corpus("rag24-mini"))
    body = ["```bash", "python -m experiments.rag24_pretrain samples --output docs/pretraining-rag24.md", "```", ""]
    body += [section(source, pairs, texts) + "\n" for source, pairs in counts.items()]
    write_section(Path(args.output), "pretrain-samples", "\n".join(body))


if __name__ == "__main__":
    main()
