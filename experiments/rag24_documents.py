"""The ANCE paper's document task on rag24-mini: FirstP and MaxP against BM25.

    python -m experiments.rag24_documents run --seeds 1
    python -m experiments.rag24_documents report --seeds 1 --output docs/documents-rag24.md

rag24-mini's passages are segments of MS MARCO v2.1 web documents (``msmarco_v2.1_doc_<doc>#<n>_<offset>``).
``run`` derives the documents (each its segments joined) and the document qrels (a document is as relevant as
its best judged segment) with ``python -m ance_ir.documents derive``, cuts them into windows of a model's tokens
(FirstP: the first window; MaxP: the first four), and writes test runs of 100 documents a query to
``runs/rag24/documents/`` (committed):

* BM25 over whole documents, and BM25 MaxP (windows searched, a document scored by its best window);
* each model zero-shot, FirstP and MaxP (a document's windows encoded, its best window's score);
* for ``bert-tiny`` the paper's document rows, trained on FirstP documents of the training topics as the paper
  trains them: BM25 Neg (600 steps) and ANCE (300 BM25 Neg steps, then 300 with asynchronous ANN refreshes every
  100 steps), each evaluated FirstP and MaxP. The settings are Table 1's ``bert-tiny`` family
  (``experiments.rag24_table1``);
* DeepCT and HDCT over whole documents: the DeepCT model of the sparse report (``experiments.rag24_sparse``, bert-tiny
  trained on the passages' term recall) weighs each document's words from its first 256 word pieces (DeepCT) or
  from its first four windows of 256, each word's largest weight (HDCT, ``model.windows: 4``); documents are
  rewritten with each word repeated by its impact and searched with BM25 at the sparse report's tuned k1 and b.

Every step is a package CLI, printed as it runs; finished steps are skipped, so an interrupted run continues.
Work files go to ``train-runs/documents/`` (git-ignored).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from experiments.rag24_table1 import FAMILIES, FULL_REFRESH, ROOT, py, sh

WORK = ROOT / "train-runs" / "documents"
RUNS = ROOT / "runs" / "rag24" / "documents"
TEST_QRELS = WORK / "qrels.rag24-mini-test.txt"
TRAIN_QRELS = WORK / "qrels.rag24-mini-train.txt"
HITS = 100  # documents per query in the committed runs
WINDOW_HITS = 1000  # windows retrieved before MaxP pooling


@dataclass(frozen=True)
class Model:
    """A model's window length (tokens, without [CLS] and [SEP]) and encoding flags."""

    name: str
    window: int
    encoder_flags: tuple[str, ...] = ()


MODELS = {
    "bert-tiny": Model("bert-tiny", 510, ("--pooling", "mean", "--no-normalize")),
    "minilm": Model("minilm", 254),  # all-MiniLM-L6-v2 was trained on at most 256 tokens
}
TRAINED = {  # row -> (negatives flags, steps, warm start from BM25 Neg's half-way checkpoint)
    "bm25": (("--negatives", "bm25", "--refresh-every", "0"), 600, False),
    "ance": (("--negatives", "ance", "--refresh-mode", "async", "--refresh-every", "100", "--threads", "1",
              "--inferencer-threads", "1", *FULL_REFRESH), 300, True),
}


def windows(model: Model, variant: str) -> Path:
    return WORK / f"{variant}-{model.window}.jsonl"


def run_path(row: str, variant: str, seed: int | None = None) -> Path:
    stem = row if seed is None else f"{row}.seed{seed}"
    return RUNS / f"{stem}.{variant}.test.trec.gz"


def derive() -> None:
    """The documents and the document qrels (git-ignored: derived again on a new machine)."""
    if not (TRAIN_QRELS.is_file() and TEST_QRELS.is_file()):
        sh(py("ance_ir.documents", "derive", "--corpus", "rag24-mini", "--qrels", "rag24-mini-test",
              "rag24-mini-train", "--output", str(WORK)))


def prepare() -> None:
    """Documents, document qrels and each model's FirstP and MaxP windows."""
    derive()
    for model in MODELS.values():
        for variant, passages in (("firstp", "1"), ("maxp", "4")):
            if not windows(model, variant).is_file():
                sh(py("ance_ir.documents", "split", "--corpus", str(WORK / "corpus.jsonl"), "--tokenizer",
                      model.name, "--length", str(model.window), "--max-passages", passages,
                      "--output", str(windows(model, variant))))


def bm25_rows() -> None:
    for name, corpus in (("documents", WORK / "corpus.jsonl"), ("maxp", windows(MODELS["bert-tiny"], "maxp"))):
        index = WORK / f"bm25-{name}"
        if not index.is_dir():
            sh(py("ance_ir.bm25", "index", "--corpus", str(corpus), "--output", str(index)))
    if not run_path("bm25", "whole").is_file():
        sh(py("ance_ir.bm25", "search", "--index", str(WORK / "bm25-documents"), "--topics", "rag24-mini-test",
              "--hits", str(HITS), "--output", str(run_path("bm25", "whole"))))
    pooled(run_path("bm25", "maxp"), ("ance_ir.bm25", "search", "--index", str(WORK / "bm25-maxp")))


def pooled(output: Path, search: tuple[str, ...]) -> None:
    """Search windows (``search``: a search command without topics and output) and keep each document's best."""
    if output.is_file():
        return
    windows_run = WORK / f"{output.name.removesuffix('.trec.gz')}.windows.trec"
    sh(py(*search, "--topics", "rag24-mini-test", "--hits", str(WINDOW_HITS), "--output", str(windows_run)))
    sh(py("ance_ir.documents", "pool", "--run", str(windows_run), "--pooling", "max", "--hits", str(HITS),
          "--output", str(output)))


def dense_rows(model: Model, encoder: str, row: str, seed: int | None) -> None:
    """FirstP and MaxP test runs of ``encoder`` (a model of ``model``'s family)."""
    for variant in ("firstp", "maxp"):
        index = WORK / "indexes" / (f"{row}.{variant}" if seed is None else f"{row}.seed{seed}.{variant}")
        if not (index / "index").is_file():
            sh(py("ance_ir.encode", "--corpus", str(windows(model, variant)), "--encoder", encoder, "--output",
                  str(index), "--passage-max-length", str(model.window + 2), "--quiet", *model.encoder_flags))
        # FirstP too goes through pooling: its one window a document still carries the window id (DOCID#0)
        pooled(run_path(row, variant, seed), ("ance_ir.search", "--index", str(index)))


def trained_rows(seed: int) -> None:
    """BM25 Neg and ANCE on FirstP documents (``bert-tiny``: whole documents cut at 512 tokens, so the training ids
    are the qrels' document ids), each evaluated FirstP and MaxP."""
    model, family = MODELS["bert-tiny"], FAMILIES["bert-tiny"]
    for row, (flags, steps, warm) in TRAINED.items():
        out = WORK / f"{row}.seed{seed}"
        if not (out / "final").is_dir():
            start = (("--init-from", str(WORK / f"bm25.seed{seed}" / "checkpoints" / "step-00000300")) if warm
                     else ("--model", model.name, "--save-every", "300"))
            sh(py("ance_ir.train", "--corpus", str(WORK / "corpus.jsonl"), "--train-topics", "rag24-mini-train",
                  "--train-qrels", str(TRAIN_QRELS), "--eval-topics", "rag24-mini-test", "--eval-qrels",
                  str(TEST_QRELS), "--min-positive-grade", "2", "--set",
                  f"model.passage_max_length={model.window + 2}", "--no-progress",
                  "--log-every", "10", *family.flags, *flags, *start, "--max-steps", str(steps), "--seed", str(seed),
                  "--output", str(out)))
        dense_rows(model, str(out), row, seed)


def deepct_rows() -> None:
    """DeepCT (one window) and HDCT (four windows, max) weights of whole documents, rewritten, searched by BM25."""
    import json

    from ance_ir.modeling.kinds import load_model
    from experiments.rag24_sparse import STATS, deepct_trained

    tuned = json.loads(STATS.read_text())["deepct-bm25"]
    for row, windows_ in (("deepct", 1), ("hdct", 4)):
        if run_path(row, "whole").is_file():
            continue
        model, impact, corpus, index = (WORK / f"{row}{suffix}" for suffix in (
            "-model", "-impact", "-rewritten.jsonl", "-bm25"))
        if not model.is_dir():
            load_model(deepct_trained(), "deepct", windows=windows_, aggregation="max").save_pretrained(model)
        if not impact.is_dir():
            sh(py("ance_ir.encode", "--corpus", str(WORK / "corpus.jsonl"), "--encoder", str(model), "--output",
                  str(impact), "--quiet"))
        if not corpus.is_file():
            sh(py("ance_ir.index.rewrite", "--index", str(impact), "--output", str(corpus)))
        if not index.is_dir():
            sh(py("ance_ir.bm25", "index", "--corpus", str(corpus), "--output", str(index)))
        sh(py("ance_ir.bm25", "search", "--index", str(index), "--topics", "rag24-mini-test", "--k1",
              str(tuned["k1"]), "--b", str(tuned["b"]), "--hits", str(HITS), "--output", str(run_path(row, "whole"))))


def run(seeds: list[int], only: list[str] | None = None) -> None:
    RUNS.mkdir(parents=True, exist_ok=True)
    prepare()
    parts = {"bm25": bm25_rows, "deepct": deepct_rows,
             "zero-shot": lambda: [dense_rows(m, m.name, f"{m.name}-zero-shot", None) for m in MODELS.values()],
             "trained": lambda: [trained_rows(seed) for seed in seeds]}
    for name, part in parts.items():
        if only is None or name in only:
            part()


def report(seeds: list[int], output: str) -> None:
    """``python -m ance_ir.eval`` over every committed run (BM25 over whole documents the baseline), into
    ``output`` between ``<!-- documents-table -->`` markers."""
    import subprocess
    import sys

    from bench.common import write_section

    derive()
    rows = ["bm25.whole", "bm25.maxp", "deepct.whole", "hdct.whole"]
    rows += [f"{model}-zero-shot.{v}" for model in MODELS for v in ("firstp", "maxp")]
    rows += [f"{row}.seed{seed}.{v}" for row in TRAINED for seed in seeds for v in ("firstp", "maxp")]
    runs = [str((RUNS / f"{row}.test.trec.gz").relative_to(ROOT)) for row in rows
            if (RUNS / f"{row}.test.trec.gz").is_file()]
    command = ["python", "-m", "ance_ir.eval", "--qrels", str(TEST_QRELS.relative_to(ROOT)), "--run", *runs,
               "--metrics", "ndcg@10", "mrr@100", "r@100"]
    done = subprocess.run([sys.executable, *command[1:]], cwd=ROOT, check=True, capture_output=True, text=True)
    write_section(output, "documents-table", "```bash\n" + " ".join(command) + "\n```\n\n```\n"
                  + done.stdout.rstrip() + "\n```")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["run", "report"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--only", nargs="+", choices=["bm25", "deepct", "zero-shot", "trained"],
                        help="run: only these parts")
    parser.add_argument("--output", default="docs/documents-rag24.md", help="report: Markdown file to update")
    args = parser.parse_args()
    if args.command == "run":
        run(args.seeds, args.only)
    else:
        report(args.seeds, args.output)


if __name__ == "__main__":
    main()
