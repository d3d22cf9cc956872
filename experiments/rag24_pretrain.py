"""Pretraining from rag24-mini itself (issue 16): what each pretraining data source makes of the corpus.

    python -m experiments.rag24_pretrain samples --output docs/pretraining-rag24.md

For each source of ``ance_ir/pretrain_data`` (ICT, BFS, WLP, Spider, SimCSE, Contriever's crops, which MoCo trains
on too) ``python -m ance_ir.pretrain_data SOURCE --corpus rag24-mini --sample 10 --with-text`` draws ten of the
pairs a training run with seed 42 would see (``runs/rag24/pretrain/SOURCE.samples.jsonl``, committed) and the report
prints them with the number of pairs the source makes of the corpus. WLP has no link file here: ``titles:
first-line`` links a passage to the pages whose titles (their first segment's first line) it mentions.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from ance_ir.data import iter_corpus
from ance_ir.datasets import resolve_corpus
from bench.common import write_section
from experiments.rag24_adapt import head
from experiments.rag24_table1 import ROOT

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["samples"])
    parser.add_argument("--output", default="docs/pretraining-rag24.md")
    args = parser.parse_args()
    counts = samples()
    texts = {p.docid: p.text for p in iter_corpus(resolve_corpus("rag24-mini"))}
    body = ["```bash", "python -m experiments.rag24_pretrain samples --output docs/pretraining-rag24.md", "```", ""]
    body += [section(source, pairs, texts) + "\n" for source, pairs in counts.items()]
    write_section(Path(args.output), "pretrain-samples", "\n".join(body))


if __name__ == "__main__":
    main()
