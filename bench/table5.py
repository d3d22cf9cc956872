"""The ANCE paper's Table 5 (efficiency of search and training) on this machine, for bert-tiny and MiniLM.

Every stage of the paper's table, measured on rag24-mini (6,011 passages, the 101 test topics; the training
stages on its training topics) with the package's own code:

* BM25 (Pyserini): the Lucene index build, and retrieval of the top 1,000 per query (2 threads, all test queries).
* BERT rerank: a cross-encoder of the backbone (its weights do not change the speed) scoring a query's BM25 top
  100, 320 tokens per pair, the package's default precision.
* ANCE inference: encoding the corpus (total and per passage), encoding the queries (per query, batched), ANN
  retrieval of the top 100 from a flat faiss index (batched queries, per query), and their sum.
* ANCE training: the flat index build, negative construction for one batch (its queries encoded, their top 200
  retrieved and the judged passages removed: what a refresh does per batch of training queries) and one training
  step (forward, backward and optimizer step of a batch with one negative per query, from ``log.jsonl``'s
  ``steps_per_s`` over 30 steps after 10 warm-up steps).

Small operations are repeated ``--repeats`` times and the median is reported. The paper's figures are for
MS MARCO on a V100 GPU (and its BM25 on CPU); ``--device cuda`` writes the same table for a GPU below it.

    flock /tmp/ance-ir-cpu.lock python -m bench.table5 --output docs/bench.md
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from bench.common import importable, load_average, provenance, write_section

PAPER = {"BM25 index build": "3 h", "BM25 retrieval, per query": "37 ms", "BERT rerank, per query": "1.15 s",
         "corpus encoding": "10 h", "encoding, per passage": "4.5 ms", "query encoding, per query": "2.6 ms",
         "ANN retrieval, per query": "9 ms", "dense retrieval total, per query": "11.6 ms",
         "ANN index build": "10 s", "negative construction, per batch": "72 ms",
         "training step, per batch": "19 ms"}
BATCHES = {"bert-tiny": 16, "minilm": 8}


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bm25_stages(corpus: Path, topics: dict[str, str], repeats: int) -> dict[str, float]:
    from ance_ir.bm25 import BM25Searcher, build_lucene_index

    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        build_lucene_index(corpus, Path(tmp) / "index")
        build = time.perf_counter() - start
        searcher = BM25Searcher(Path(tmp) / "index")
        search = median_seconds(lambda: searcher.search(topics, hits=1000, threads=2), repeats)
    return {"BM25 index build": build, "BM25 retrieval, per query": search / len(topics)}


def model_stages(backbone: str, texts: list[str], topics: dict[str, str], train_queries: list[str],
                 exclude: list[frozenset[int]], device: str, repeats: int) -> dict[str, float]:
    from ance_ir.index import passage_index
    from ance_ir.modeling.kinds import load_model

    encoder = load_model(backbone).to(device)
    queries = list(topics.values())
    start = time.perf_counter()
    vectors = encoder.encode_passages(texts, batch_size=64)
    encode = time.perf_counter() - start
    build = median_seconds(lambda: passage_index(vectors, [str(i) for i in range(len(texts))]), repeats)
    index = passage_index(vectors, [str(i) for i in range(len(texts))])
    query_encode = median_seconds(lambda: encoder.encode_queries(queries), repeats) / len(queries)
    query_vectors = encoder.encode_queries(queries)
    ann = median_seconds(lambda: index.search(query_vectors, 100), repeats) / len(queries)
    batch = train_queries[:BATCHES[backbone]]

    def negatives() -> None:
        _, hits = index.search(encoder.encode_queries(batch), 200)
        _ = [[d for d in ranked if int(d) not in judged] for ranked, judged in zip(hits, exclude, strict=False)]

    cross = load_model(backbone, "cross-encoder").to(device)
    pairs = texts[:100]
    rerank = median_seconds(lambda: cross.score_pairs([queries[0]] * len(pairs), pairs), repeats)
    return {"BERT rerank, per query": rerank, "corpus encoding": encode, "encoding, per passage": encode / len(texts),
            "query encoding, per query": query_encode, "ANN retrieval, per query": ann,
            "dense retrieval total, per query": query_encode + ann, "ANN index build": build,
            "negative construction, per batch": median_seconds(negatives, repeats)}


def training_step(backbone: str, device: str) -> float:
    """Seconds per training step (the family's batch, one random negative a query) after 10 warm-up steps."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "ance_ir.train", "--model", backbone, "--corpus", "rag24-mini",
                        "--train-topics", "rag24-mini-train", "--train-qrels", "rag24-mini-train",
                        "--min-positive-grade", "2", "--negatives", "random", "--batch-size", str(BATCHES[backbone]),
                        "--max-steps", "40", "--refresh-every", "0", "--log-every", "10", "--device", device,
                        "--output", str(Path(tmp) / "run"), "--no-progress"], check=True, capture_output=True)
        rates = [r["steps_per_s"] for r in map(json.loads, (Path(tmp) / "run" / "log.jsonl").read_text().splitlines())
                 if "steps_per_s" in r]
    return 1.0 / statistics.median(rates[1:])


def fmt(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    return f"{seconds * 1000:.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backbones", nargs="+", default=["bert-tiny", "minilm"])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--output", default="docs/bench.md")
    args = parser.parse_args()
    from ance_ir.data import iter_corpus
    from ance_ir.datasets import resolve_corpus, resolve_qrels, resolve_topics

    load = load_average()
    corpus = resolve_corpus("rag24-mini")
    passages = list(iter_corpus(corpus))
    texts = [p.text for p in passages]
    row = {p.docid: i for i, p in enumerate(passages)}
    topics = dict(resolve_topics("rag24-mini-test"))
    train = dict(resolve_topics("rag24-mini-train"))
    qrels = resolve_qrels("rag24-mini-train")
    exclude = [frozenset(row[d] for d in qrels.get(q, {}) if d in row) for q in train]
    columns = {"paper (MS MARCO, V100)": PAPER}
    bm25 = bm25_stages(corpus, topics, args.repeats) if importable("pyserini.search.lucene") else {}
    for backbone in args.backbones:
        stages = {**bm25, **model_stages(backbone, texts, topics, list(train.values()), exclude, args.device,
                                         args.repeats)}
        stages["training step, per batch"] = training_step(backbone, args.device)
        columns[f"{backbone}, {args.device}"] = {k: fmt(v) for k, v in stages.items()}
    header = "| operation | " + " | ".join(columns) + " |"
    lines = [header, "|" + " --- |" * (len(columns) + 1)]
    lines += [f"| {op} | " + " | ".join(c.get(op, "–") for c in columns.values()) + " |" for op in PAPER]
    notes = f"Batches: {BATCHES}; torch threads: {torch.get_num_threads()}."
    if not bm25:
        notes += " Pyserini is not installed on this machine: its BM25 rows are in the CPU table."
    table = "\n".join(lines) + f"\n\n{notes}\n\n" + provenance(load)
    if args.device == "cpu":
        body = ("## 12. The ANCE paper's Table 5: efficiency of search and training\n\n"
                + "\n\n".join(__doc__.split("\n\n")[1:-1]) + "\n\n" + table)
        write_section(args.output, "bench-table5", body)
    else:
        write_section(args.output, f"bench-table5 {args.device}", f"### The same on {args.device}\n\n{table}")


if __name__ == "__main__":
    main()
