"""MiniLM adapted to rag24-mini without its qrels (issue 16): QGen and GPL against zero-shot MiniLM and BM25.

    python -m experiments.rag24_adapt run [--only qgen gpl]
    python -m experiments.rag24_adapt report --output docs/adaptation-rag24.md

Both rows start from all-MiniLM-L6-v2 and train on queries the bert-tiny query generator of the sparse report wrote
for every passage (``experiments.rag24_sparse``: ``configs/rag24-mini/generator.yaml``, sampled with seed 42):

* QGen: each passage's first three queries of its ``d2q-5`` expansion paired with it, the batch's other passages
  the negatives (MNRL), ``configs/rag24-mini/qgen.yaml``;
* GPL: ``python -m ance_ir.gpl`` with one generated query a passage, ``GPL_QUERIES`` of them drawn, each with its
  ``GPL_DEPTH`` hard negative from the zero-shot MiniLM index, every pair labelled by the MiniLM cross-encoder of
  ``docs/rerank-rag24.md`` and ``GPL_STEPS`` steps of Margin-MSE, ``configs/rag24-mini/gpl.yaml``.

No T5 generator or MS MARCO cross-encoder ships offline, so the generator and the cross-encoder here were trained on
rag24-mini's training topics: no training qrels reach the retriever, but the pseudo labels come from models that saw
them (GPL's paper uses MS MARCO-trained ones). Each final model searches the 101 test topics (100 hits); runs go to
``runs/rag24/adapt/`` (committed), work files to ``train-runs/adapt/`` (git-ignored). ``report`` evaluates them
against zero-shot MiniLM (``runs/rag24/minilm.test.trec.gz``) with paired tests.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
from pathlib import Path

from ance_ir.data import corpus_texts, read_groups
from ance_ir.data.atomic import atomic_write
from ance_ir.datasets import resolve_corpus
from bench.common import write_section
from experiments.rag24_distill import teacher_model
from experiments.rag24_sparse import WORK as SPARSE_WORK
from experiments.rag24_sparse import expanded_corpus
from experiments.rag24_table1 import ROOT, py, sh

WORK = ROOT / "train-runs" / "adapt"
RUNS = ROOT / "runs" / "rag24" / "adapt"
ZERO_SHOT_INDEX = WORK / "indexes" / "minilm"
BASELINES = ["runs/rag24/minilm.test.trec.gz", "runs/rag24/bm25.test.trec.gz"]
# GPL's budget on this 2-core CPU, where every (query, passage) pair costs a MiniLM cross-encoder forward: 2,400
# generated queries (150 steps of 16, each query once), one hard negative each (Margin-MSE uses one a step)
GPL_QUERIES, GPL_DEPTH, GPL_STEPS = 2400, 1, 150


def search(model: Path, row: str) -> None:
    """Encode the corpus with ``model`` and write its test run."""
    index = WORK / "indexes" / row
    if not (index / "meta.json").is_file():
        sh(py("ance_ir.encode", "--corpus", "rag24-mini", "--encoder", str(model), "--output", str(index), "--quiet"))
    RUNS.mkdir(parents=True, exist_ok=True)
    sh(py("ance_ir.search", "--topics", "rag24-mini-test", "--index", str(index), "--hits", "100", "--run-tag",
          row, "--output", str(RUNS / f"{row}.test.trec.gz")))


def qgen_queries() -> Path:
    """The generated queries QGen trains on (``python -m ance_ir.expand``'s side file; expanded when missing)."""
    corpus = expanded_corpus(5)
    return corpus.with_name(corpus.name + ".queries.jsonl")


def qgen() -> None:
    queries = qgen_queries()
    model = WORK / "qgen"
    if not (model / "final").is_dir():
        sh(py("ance_ir.train", "--config", "configs/rag24-mini/qgen.yaml", "--set", f"data.queries={queries}",
              "--output", str(model), "--no-progress"))
    search(model / "final", "qgen")


def gpl() -> None:
    from experiments.rag24_sparse import generator_trained

    cross_encoder = teacher_model()
    if not (ZERO_SHOT_INDEX / "meta.json").is_file():
        sh(py("ance_ir.encode", "--corpus", "rag24-mini", "--encoder", "minilm", "--output", str(ZERO_SHOT_INDEX),
              "--quiet"))
    out = WORK / "gpl"
    sh(py("ance_ir.gpl", "--corpus", "rag24-mini", "--generator", generator_trained(), "--retriever",
          str(ZERO_SHOT_INDEX), "--cross-encoder", str(cross_encoder), "--queries-per-passage", "1", "--max-queries",
          str(GPL_QUERIES), "--depth", str(GPL_DEPTH), "--max-steps", str(GPL_STEPS), "--output", str(out)))
    search(out / "model" / "final", "gpl")


ROWS = {"qgen": qgen, "gpl": gpl}


def run(only: list[str] | None) -> None:
    for name, row in ROWS.items():
        if (only is None or name in only) and not (RUNS / f"{name}.test.trec.gz").is_file():
            row()
    write_samples()
    if (WORK / "gpl" / "qgen.qrels").is_file() and (ZERO_SHOT_INDEX / "meta.json").is_file():
        write_consistency()


CONSISTENCY = ["--metrics", "mrr@10", "r@10", "r@100"]


def write_consistency() -> None:
    """How well zero-shot MiniLM finds the passage each of GPL's generated queries was written for (its only
    relevant passage), beside the same measures for the real training queries and their judged passages; both
    ``python -m ance_ir.eval`` outputs go to ``runs/rag24/adapt/consistency.txt`` for the report."""
    run = WORK / "generated.zero-shot.trec"
    sh(py("ance_ir.search", "--topics", str(WORK / "gpl" / "qgen.tsv"), "--index", str(ZERO_SHOT_INDEX), "--hits",
          "100", "--output", str(run)))
    outputs = []
    for qrels, ranking in ((WORK / "gpl" / "qgen.qrels", run), ("rag24-mini-train", "runs/rag24/minilm.train.trec.gz")):
        done = subprocess.run(py("ance_ir.eval", "--qrels", str(qrels), "--run", str(ranking), *CONSISTENCY),
                              cwd=ROOT, check=True, capture_output=True, text=True)
        outputs.append(done.stdout.rstrip())
    with atomic_write(RUNS / "consistency.txt") as f:
        f.write("generated queries (GPL's, one a passage), zero-shot MiniLM:\n" + outputs[0]
                + "\n\nrag24-mini-train's real queries, zero-shot MiniLM (runs/rag24/minilm.train.trec.gz):\n"
                + outputs[1] + "\n")


def head(text: str, words: int = 40) -> str:
    """The first ``words`` words of ``text``, for a report."""
    cut = text.split()
    return " ".join(cut[:words]) + (" ..." if len(cut) > words else "")


def write_samples(n: int = 10) -> None:
    """The training examples of ten passages (drawn with seed 0) for each row that ran, kept in
    ``runs/rag24/adapt/samples.json`` for the report: QGen's (passage, generated query) pairs, GPL's query with its
    positive and hard negative and the cross-encoder's scores of both. Left as it is when a row's run is committed
    but the files its samples come from (git-ignored, in ``train-runs/``) are not here: a clone keeps them all."""
    from ance_ir.pretrain_data.qgen import read_generated_queries

    queries, scored = SPARSE_WORK / "d2q-5.jsonl.queries.jsonl", WORK / "gpl" / "scored.jsonl.gz"  # not made here
    missing = [str(f) for run, f in ((RUNS / "qgen.test.trec.gz", queries), (RUNS / "gpl.test.trec.gz", scored))
               if run.is_file() and not f.is_file()]
    if missing:
        print(f"{RUNS / 'samples.json'} left as it is: {', '.join(missing)} not here", file=sys.stderr)
        return
    passages = corpus_texts(resolve_corpus("rag24-mini"))
    docids = random.Random(0).sample(sorted(passages), n)
    samples: dict[str, list[dict[str, object]]] = {}
    if (RUNS / "qgen.test.trec.gz").is_file():
        generated = read_generated_queries(queries)
        samples["qgen"] = [{"docid": d, "passage": head(passages[d]), "queries": generated[d][:3]} for d in docids]
    if (RUNS / "gpl.test.trec.gz").is_file():
        by_positive = {g.positives[0].docid: g for g in read_groups(scored)}
        samples["gpl"] = [{"query": g.query, "positive": head(passages[g.positives[0].docid]),
                           "positive_score": round(g.positives[0].score, 3),
                           "negative": head(passages[g.negatives[0].docid]),
                           "negative_score": round(g.negatives[0].score, 3)}
                          for g in (by_positive[d] for d in docids if d in by_positive)]
    with atomic_write(RUNS / "samples.json") as f:
        json.dump(samples, f, indent=1, ensure_ascii=False)


def samples_section(samples: dict[str, list[dict[str, object]]]) -> str:
    lines = []
    if "qgen" in samples:
        lines += [f"### QGen: {len(samples['qgen'])} passages and the first three queries generated for each", ""]
        for s in samples["qgen"]:
            lines += [f"- `{s['docid']}`: \"{s['passage']}\"", f"  - {'; '.join(s['queries'])}"]
    if "gpl" in samples:
        lines += ["", f"### GPL: the {len(samples['gpl'])} of those passages it drew a query for: the query, its "
                      "passage and hard negative, cross-encoder scores", ""]
        for s in samples["gpl"]:
            lines += [f"- *{s['query']}*", f"  - positive ({s['positive_score']}): \"{s['positive']}\"",
                      f"  - hard negative ({s['negative_score']}): \"{s['negative']}\""]
    return "\n".join(lines)


def report(output: str) -> None:
    """``python -m ance_ir.eval`` of the committed runs against zero-shot MiniLM, into ``output``."""
    runs = [*BASELINES, *(f"runs/rag24/adapt/{name}.test.trec.gz" for name in ROWS
                          if (RUNS / f"{name}.test.trec.gz").is_file())]
    command = ["python", "-m", "ance_ir.eval", "--qrels", "rag24-mini-test", "--run", *runs, "--metrics", "ndcg@10",
               "r@100", "mrr@10"]
    done = subprocess.run([sys.executable, *command[1:]], cwd=ROOT, check=True, capture_output=True, text=True)
    write_section(output, "adapt-table", "```bash\n" + " ".join(command) + "\n```\n\n```\n" + done.stdout.rstrip()
                  + "\n```")
    if (RUNS / "consistency.txt").is_file():
        write_section(output, "adapt-consistency", "```\n" + (RUNS / "consistency.txt").read_text().rstrip() + "\n```")
    if (RUNS / "samples.json").is_file():
        write_section(output, "adapt-samples", samples_section(json.loads((RUNS / "samples.json").read_text())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="train, encode and search each row")
    run_parser.add_argument("--only", nargs="+", choices=list(ROWS))
    report_parser = commands.add_parser("report", help="write the table")
    report_parser.add_argument("--output", default="docs/adaptation-rag24.md")
    args = parser.parse_args()
    if args.command == "run":
        run(args.only)
    else:
        report(args.output)


if __name__ == "__main__":
    main()
