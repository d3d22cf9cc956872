"""The ANCE paper's Figure 3 on rag24-mini (issue 12): bert-tiny's rows warmed up by BM25 Neg, the top dense scores
of ten test queries, and how much of what each model meets at test time its training negatives cover.

    python -m experiments.rag24_figure3 --seed 2 --output docs/figure3-scores.png

The models are Table 1's bert-tiny rows BM25 → Rand, BM25 → NCE, BM25 → BM25 + Rand and ANCE of seed ``--seed``
(``experiments/rag24_table1.py``'s commands; a model whose checkpoints are not kept is trained again, its warm-up
too), at their last checkpoint (``CURVE_STEPS[-1]``, the one the curve below ends with). Rand, NCE and BM25 + Rand
get a run of the negatives their method trains on, for the test topics, in
``runs/rag24/figure3/ROW.seedN.negatives.test.trec.gz`` (committed): Rand, 100 random passages; NCE, 100 random
positives of the training topics (in-batch negatives are the other queries' positives); BM25 + Rand, BM25's top
passages and random ones in turn. ANCE's is the search of the checkpoint whose negatives it trained on last (the
version its log records at the last step; ``runs/rag24/figure3/curve/``). ``python -m ance_ir.plot.scores`` draws
the figure, prints each overlap and saves what it drew to ``runs/rag24/figure3/scores.seedN.json`` (committed), from
which ``plot.scores --lines`` redraws it.

    python -m experiments.rag24_figure3 --curve --seed 2 --output docs/figure3-overlap.png

``--curve`` draws the same overlap over training instead (``python -m ance_ir.plot.overlap``): each row's checkpoints
at ``CURVE_STEPS`` of its 300 steps after the warm-up (a row trained here saves one every 100 steps) search the
test topics (``runs/rag24/figure3/curve/ROW.seedN.step-S.test.trec.gz``, committed, with the curves file
``runs/rag24/figure3/curves.seedN.json``), against the negatives run above for Rand, NCE and BM25 + Rand, and for
ANCE against the search of the checkpoint whose negatives it was training on at that step (step 0: the warm-up).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from ance_ir.data import iter_corpus, read_run, write_run
from ance_ir.datasets import resolve_corpus, resolve_qrels, resolve_topics
from ance_ir.train.runlog import read_log
from experiments.rag24_table1 import FAMILIES, ROOT, ROWS, py, sh, trained_model, work

FAMILY = "bert-tiny"
PANELS = {"bm25-rand": "BM25 → Rand Neg", "bm25-nce": "BM25 → NCE Neg", "bm25-bm25-and-rand": "BM25 → BM25 + Rand",
          "ance": "ANCE"}
DEPTH = 100
CURVE_STEPS = (100, 200, 300)


def trained(row: str, seed: int) -> Path:
    """The row's final checkpoint (trained when missing, with a checkpoint every refresh interval)."""
    family = FAMILIES[FAMILY]
    return trained_model(family, FAMILY, next(r for r in ROWS if r.name == row), seed,
                         ("--save-every", str(family.refresh_every)), record=False)


def negatives(row: str, seed: int) -> str:
    """The run of the negatives ``row``'s method trains on, for the test topics (written when missing): Rand, NCE or
    BM25 + Rand (ANCE's change over training: :func:`curve_negatives`)."""
    out = ROOT / "runs" / "rag24" / "figure3" / f"{row}.seed{seed}.negatives.test.trec.gz"
    if out.is_file():
        return str(out)
    topics, qrels = resolve_topics("rag24-mini-test"), resolve_qrels("rag24-mini-test")
    rng = random.Random(seed)
    corpus = [passage.docid for passage in iter_corpus(resolve_corpus("rag24-mini"))]
    train_positives = sorted({d for judged in resolve_qrels("rag24-mini-train").values()
                              for d, grade in judged.items() if grade >= 2})
    bm25 = read_run(ROOT / "runs" / "rag24" / "bm25.test.trec.gz")
    run = {}
    for qid in topics:
        if qid not in qrels:
            continue
        if row == "bm25-rand":
            picked = rng.sample(corpus, DEPTH)
        elif row == "bm25-nce":
            picked = rng.sample(train_positives, DEPTH)
        else:  # each negative BM25's or random, 1:1
            top = [d for d, _ in bm25[qid] if d not in qrels[qid]][:DEPTH // 2]
            picked = [d for pair in zip(top, rng.sample(corpus, DEPTH // 2), strict=True) for d in pair]
        run[qid] = [(d, float(DEPTH - i)) for i, d in enumerate(dict.fromkeys(picked))]
    write_run(run, out, tag=f"{row}-negatives")
    return str(out)


def checkpoint_run(row: str, seed: int, step: int) -> str:
    """The search of the test topics (``2 * DEPTH`` hits) by ``row``'s checkpoint at ``step`` after the warm-up
    (0: the BM25 Neg warm-up itself), written when missing."""
    name = "warmup" if step == 0 else row
    out = ROOT / "runs" / "rag24" / "figure3" / "curve" / f"{name}.seed{seed}.step-{step}.test.trec.gz"
    if out.is_file():
        return str(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    sh(py("ance_ir.search", "--topics", "rag24-mini-test", "--index", str(checkpoint_index(row, seed, step)), "--hits",
          str(2 * DEPTH), "--output", str(out), "--run-tag", f"{name}-step-{step}"))
    return str(out)


def checkpoint_index(row: str, seed: int, step: int) -> Path:
    """The dense index of ``row``'s checkpoint at ``step`` after the warm-up (0: the warm-up), encoded when
    missing."""
    family = FAMILIES[FAMILY]
    name = "warmup" if step == 0 else row
    checkpoint = (work(FAMILY, f"bm25.seed{seed}", "checkpoints", f"step-{family.warmup:08d}") if step == 0 else
                  work(FAMILY, f"{row}.seed{seed}", "checkpoints", f"step-{step:08d}"))
    index = work(FAMILY, "indexes", f"{name}.seed{seed}.step-{step}")
    if not (index / "index").is_file():
        sh(py("ance_ir.encode", "--corpus", "rag24-mini", "--encoder", str(checkpoint), "--output", str(index),
              "--quiet", *family.encoder_flags))
    return index


def curve_negatives(row: str, seed: int, step: int) -> str:
    """The negatives run ``row`` was training on at ``step``: ANCE's is its checkpoint search of the negatives
    version in use (the log's ``negatives_version``); the others' do not change."""
    if row != "ance":
        return negatives(row, seed)
    records = read_log(work(FAMILY, f"ance.seed{seed}", "log.jsonl"))
    version = [r["negatives_version"] for r in records
               if r.get("negatives_version") is not None and r.get("step", 0) <= step][-1]
    return checkpoint_run(row, seed, version)


def curves(seed: int, output: str) -> None:
    """Every row's checkpoints searched, the curves file written, the figure drawn."""
    spec = ROOT / "runs" / "rag24" / "figure3" / f"curves.seed{seed}.json"

    def relative(run: str) -> str:
        return str(Path(run).relative_to(spec.parent))

    points = {}
    for row, label in PANELS.items():
        trained(row, seed)
        points[label] = [{"step": step, "test": relative(checkpoint_run(row, seed, step)),
                          "negatives": relative(curve_negatives(row, seed, step))} for step in CURVE_STEPS]
    spec.write_text(json.dumps(points, indent=1, ensure_ascii=False) + "\n")
    sh(py("ance_ir.plot.overlap", "--curves", str(spec), "--qrels", "rag24-mini-test", "--top", str(DEPTH),
          "--output", output))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--curve", action="store_true", help="the overlap over training (see above)")
    parser.add_argument("--output", default="docs/figure3-scores.png")
    args = parser.parse_args()
    if args.curve:
        curves(args.seed, args.output)
        return
    final = CURVE_STEPS[-1]
    command = py("ance_ir.plot.scores", "--topics", "rag24-mini-test", "--qrels", "rag24-mini-test", "--queries", "10",
                 "--top", str(DEPTH), "--save-lines",
                 str(ROOT / "runs" / "rag24" / "figure3" / f"scores.seed{args.seed}.json"), "--output", args.output)
    for row, label in PANELS.items():
        trained(row, args.seed)
        command += ["--model", label, str(checkpoint_index(row, args.seed, final)),
                    curve_negatives(row, args.seed, final)]
    sh(command)


if __name__ == "__main__":
    main()
