"""ColBERT query latency: the token index's search (each query token's ``nprobe`` nearest centroids give the
candidates, exact MaxSim over their stored vectors) against exhaustive MaxSim over every passage, one query at a
time, on the same encoded queries (query encoding is timed apart).

The index is ``--index`` (a token index folder), or rag24-mini encoded here with ``--model`` (default: bert-tiny
with a new seeded projection; speed does not depend on the weights) into a temporary folder, uncompressed and
2-bit compressed. For each setting: ms per query (median of ``--repeats`` passes over the queries after a warm-up
pass), candidates per query scored exactly, and the share of exhaustive MaxSim's top 10 that the search finds;
each ``nprobe`` also with PLAID's centroid pruning (``--ndocs``: only the candidates best by centroid interaction
are scored exactly).

    flock /tmp/ance-ir-cpu.lock python -m bench.colbert_latency --output docs/bench.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import faiss
import numpy as np
import torch

from ance_ir.cli import positive_int
from ance_ir.datasets import resolve_corpus, resolve_topics
from bench.common import load_average, provenance, publish


def per_query_ms(fn, queries: np.ndarray, repeats: int) -> float:  # noqa: ANN001 - fn(query) -> anything
    """Median over ``repeats`` passes of the mean milliseconds per query (after one untimed pass)."""
    for query in queries:
        fn(query)
    passes = []
    for _ in range(repeats):
        start = time.perf_counter()
        for query in queries:
            fn(query)
        passes.append((time.perf_counter() - start) * 1000 / len(queries))
    return statistics.median(passes)


def build_indexes(model_name: str, corpus: Path, folder: Path, centroids: int | None) -> list[Path]:
    """rag24-mini encoded with a seeded colbert model (uncompressed), and its 2-bit compression."""
    from ance_ir.encode.token_encoder import encode_tokens
    from ance_ir.index.compress import compress_index
    from ance_ir.modeling.kinds import load_model

    torch.manual_seed(0)
    load_model(model_name, "colbert").save_pretrained(folder / "model")
    model = load_model(folder / "model")
    model.inference_precision = "auto"
    encode_tokens(corpus, model, folder / "fp16", encoder_name=str(folder / "model"), centroids=centroids)
    compress_index(folder / "fp16", folder / "2bit", 2)
    return [folder / "fp16", folder / "2bit"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", nargs="+", help="token index folders (default: build them with --model)")
    parser.add_argument("--model", default="bert-tiny", help="backbone of the colbert model encoded with")
    parser.add_argument("--corpus", default="rag24-mini")
    parser.add_argument("--centroids", type=positive_int, help="k-means centroids when building (default: ColBERTv2's)")
    parser.add_argument("--topics", default="rag24-mini-test")
    parser.add_argument("--queries", type=positive_int, default=20, help="the topics' first N queries")
    parser.add_argument("--nprobe", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--ndocs", type=positive_int, nargs="*", default=[64, 256],
                        help="also time each nprobe with PLAID's centroid pruning to these many candidates")
    parser.add_argument("--threads", type=positive_int, default=2)
    parser.add_argument("--repeats", type=positive_int, default=3)
    parser.add_argument("--output", help="Markdown file to update")
    args = parser.parse_args()

    from ance_ir.index.records import folder_bytes
    from ance_ir.index.token_index import load_token_index
    from ance_ir.search.tokens import TokenSearcher, model_for_index

    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)
    load_before = load_average()
    topics = resolve_topics(args.topics)
    texts = [topics[q] for q in list(topics)[:args.queries]]
    with tempfile.TemporaryDirectory() as tmp:
        folders = [Path(f) for f in args.index] if args.index else build_indexes(
            args.model, resolve_corpus(args.corpus), Path(tmp), args.centroids)
        lines = []
        for folder in folders:
            index = load_token_index(folder)
            model = model_for_index(index)
            searcher = TokenSearcher(index, model)
            position = {d: i for i, d in enumerate(index.docids)}
            start = time.perf_counter()
            queries = model.encode_queries(texts, batch_size=1)
            encode_ms = (time.perf_counter() - start) * 1000 / len(texts)
            exact = [set(np.argsort(-searcher.exhaustive(q), kind="stable")[:10]) for q in queries]
            reference = per_query_ms(searcher.exhaustive, queries, args.repeats)
            bits = (index.meta.get("compression") or {}).get("bits")
            lines += [f"#### {'uncompressed (fp16)' if bits is None else f'{bits}-bit residuals'}: "
                      f"{len(index)} passages, {index.meta['tokens']:,} token vectors of dimension {index.dim}, "
                      f"{len(index.centroids)} centroids, {folder_bytes(folder) / 2 ** 20:.1f} MiB",
                      "",
                      f"Query encoding, one at a time: {encode_ms:.1f} ms per query (not in the times below).",
                      "",
                      "| search | ms per query | speed-up over exhaustive | passages scored exactly per query | "
                      "top-10 recall of exhaustive MaxSim |",
                      "| --- | --- | --- | --- | --- |",
                      f"| exhaustive MaxSim | {reference:.1f} | 1.00× | {len(index)} | 1.000 |"]
            for nprobe in args.nprobe:
                candidates = [len(index.candidates(q, nprobe)) for q in queries]
                for ndocs in [0, *[n for n in args.ndocs if n < np.mean(candidates)]]:
                    ms = per_query_ms(lambda q, n=nprobe, k=ndocs, s=searcher: s.rank(q, 10, n, k), queries,
                                      args.repeats)
                    found = [{position[d] for d, _ in searcher.rank(q, 10, nprobe, ndocs)} for q in queries]
                    recall = np.mean([len(a & b) / len(b) for a, b in zip(found, exact, strict=True)])
                    how = f"centroid pruning to {ndocs} + exact MaxSim" if ndocs else "exact MaxSim"
                    lines.append(f"| nprobe {nprobe} + {how} | {ms:.1f} | **{reference / ms:.2f}×** | "
                                 f"{np.mean([min(ndocs or c, c) for c in candidates]):.0f} | {recall:.3f} |")
            lines.append("")
    model_note = ("the indexes' own encoders" if args.index
                  else f"{args.model} + a new seeded projection (untrained: speed only)")
    body = "\n".join([f"### ColBERT query latency, cpu: {len(texts)} {args.topics} queries, one at a time, top 10",
                      "", f"{args.threads} threads; medians of {args.repeats} passes after a warm-up pass. "
                      f"Model: {model_note}.",
                      "", *lines, provenance(load_before)])
    publish(body, args.output, "colbert-latency cpu")
    print("done", file=sys.stderr)


if __name__ == "__main__":
    main()
