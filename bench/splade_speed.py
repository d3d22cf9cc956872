"""SPLADE speed against BM25: encoding passages/s (and Lucene indexing of the result) against Pyserini's BM25
indexing of the same passages, and impact-search queries/s (``LuceneImpactSearcher``, queries encoded by the model)
against BM25 search (``LuceneSearcher``) on rag24-mini.

Indexing uses the first ``--passages`` rag24-mini passages; each indexing runs once (it starts a JVM, included).
Search uses the full-corpus indexes (``--splade-index``, built by ``python -m ance_ir.encode --encoder splade-tiny``;
``--bm25-index``, by ``python -m ance_ir.bm25 index``) and every query of ``--topics``, ``--repeats`` times in
alternating order after a warm-up; queries/s is from the median.

    flock /tmp/ance-ir-cpu.lock python -m bench.splade_speed --output docs/bench.md
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import torch

from ance_ir.cli import positive_int
from ance_ir.datasets import resolve_topics
from bench.common import alternating_medians, first_passages, load_average, provenance, publish, timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="splade-tiny")
    parser.add_argument("--corpus", default="rag24-mini")
    parser.add_argument("--passages", type=positive_int, default=1000, help="the corpus's first N for encoding")
    parser.add_argument("--topics", nargs="+", default=["rag24-mini-train", "rag24-mini-test"])
    parser.add_argument("--splade-index", default="indexes/rag24-mini.splade-tiny")
    parser.add_argument("--bm25-index", default="indexes/rag24-mini.lucene")
    parser.add_argument("--hits", type=positive_int, default=1000)
    parser.add_argument("--batch-size", type=positive_int, default=32)
    parser.add_argument("--threads", type=positive_int, default=2)
    parser.add_argument("--repeats", type=positive_int, default=3)
    parser.add_argument("--output", help="Markdown file to update")
    args = parser.parse_args()

    from ance_ir.bm25 import BM25Searcher
    from ance_ir.bm25.index import build_lucene_index, run_lucene_indexer
    from ance_ir.index.impact import vector_line
    from ance_ir.modeling.inference import resolve_precision
    from ance_ir.modeling.kinds import load_model
    from ance_ir.modeling.splade import quantize
    from ance_ir.search.impact import ImpactSearcher

    torch.set_num_threads(args.threads)
    load_before = load_average()
    model = load_model(args.model, "splade")
    passages = first_passages(args.corpus, args.passages)
    texts = [p.text for p in passages]
    auto = resolve_precision("auto", "cpu")
    model.encode_passages(texts[:args.batch_size])  # warm-up
    encode_s = {mode: timed(lambda mode=mode: model.encode_passages(texts, args.batch_size, precision=mode))
                for mode in dict.fromkeys(("fp32", auto))}
    weights = model.encode_passages(texts, args.batch_size, precision="fp32")
    with tempfile.TemporaryDirectory() as tmp:
        collection = Path(tmp) / "collection"
        collection.mkdir()
        with open(collection / "part-00000.jsonl", "w", encoding="utf-8") as f:
            f.writelines(vector_line(p.docid, p.text, quantize(w, 100)) for p, w in zip(passages, weights,
                                                                                         strict=True))
        (Path(tmp) / "corpus.jsonl").write_text("".join(json.dumps({"id": p.docid, "contents": p.text}) + "\n"
                                                        for p in passages), encoding="utf-8")
        impact_index_s = timed(lambda: run_lucene_indexer(
            ["--collection", "JsonVectorCollection", "--impact", "--pretokenized"], collection, Path(tmp) / "impact",
            args.threads, collection, len(passages)))
        bm25_index_s = timed(lambda: build_lucene_index(Path(tmp) / "corpus.jsonl", Path(tmp) / "bm25",
                                                        args.threads))

    topics = {}
    for name in args.topics:
        topics.update(resolve_topics(name))
    splade, bm25 = ImpactSearcher(args.splade_index, model), BM25Searcher(args.bm25_index)
    texts_q = list(topics.values())
    searches = {
        "BM25 (`LuceneSearcher`)": lambda: bm25.search(topics, hits=args.hits, threads=args.threads),
        f"SPLADE impact search (`LuceneImpactSearcher`), queries encoded ({model.inference_precision})":
            lambda: splade.search(topics, hits=args.hits, threads=args.threads),
        "SPLADE query encoding alone": lambda: splade.encode_queries(texts_q),
    }
    for fn in searches.values():
        fn()  # warm-up
    seconds = alternating_medians(searches, args.repeats)
    meta = splade.meta
    n = len(passages)
    lines = [f"### SPLADE speed against BM25, cpu: `{args.model}`, first {n} {args.corpus} passages; "
             f"{len(topics)} queries ({' + '.join(args.topics)}), k={args.hits}",
             "",
             f"{args.threads} threads, batch size {args.batch_size}, passages cut at {model.passage_max_length} "
             f"tokens, impacts at scale 100. Indexing runs once each (a JVM start included).",
             "",
             "| indexing | seconds | passages/s |",
             "| --- | --- | --- |"]
    for mode, s in encode_s.items():
        lines.append(f"| SPLADE encoding ({mode}) | {s:.1f} | {n / s:.1f} |")
    lines += [f"| Pyserini impact indexing of the encoded passages (`-impact -pretokenized`) | {impact_index_s:.1f} | "
              f"{n / impact_index_s:.1f} |",
              f"| Pyserini BM25 indexing of the same passages | {bm25_index_s:.1f} | {n / bm25_index_s:.1f} |",
              "",
              f"Search over the full index: SPLADE `{args.splade_index}` ({meta['passages']} passages, "
              f"{meta['postings_per_passage']:.1f} terms a passage, {meta['lucene_bytes'] / 2 ** 20:.1f} MiB); "
              f"BM25 `{args.bm25_index}`. Medians of {args.repeats} alternating runs after a warm-up.",
              "",
              "| search | seconds (median) | queries/s |",
              "| --- | --- | --- |"]
    for name, s in seconds.items():
        lines.append(f"| {name} | {s:.2f} | {len(topics) / s:.1f} |")
    lines += ["", provenance(load_before, ("pyserini",))]
    body = "\n".join(lines)
    publish(body, args.output, "splade-speed cpu")


if __name__ == "__main__":
    main()
