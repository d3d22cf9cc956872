"""HNSW and IVF-PQ against exact flat search: recall@k relative to flat, index size, build time, QPS.

    python -m bench.ann_indexes --index indexes/rag24-mini.minilm --topics rag24-mini-train rag24-mini-test \\
        --output docs/ann.md
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import faiss
import numpy as np

from ance_ir.cli import hidden_alias, positive_int
from ance_ir.datasets import resolve_topics
from ance_ir.index import build_index, load_dense_index, stored_vectors
from ance_ir.search import encoder_for_index
from bench.common import alternating_medians, command_line, machine, publish


def recall_against(truth: np.ndarray, found: np.ndarray) -> float:
    """Mean fraction of each query's exact top-k that the approximate top-k also holds."""
    return float(np.mean([len(set(t) & set(f[f >= 0])) / len(t) for t, f in zip(truth, found, strict=True)]))


def index_bytes(index: faiss.Index) -> int:
    with tempfile.NamedTemporaryFile() as f:
        faiss.write_index(index, f.name)
        return os.path.getsize(f.name)


def compare(vectors: np.ndarray, queries: np.ndarray, k: int, repeats: int,
            types: list[str]) -> list[dict[str, float | str]]:
    """Build each index type over ``vectors`` and measure it against flat search on ``queries``."""
    built, rows = {}, []
    for index_type in ["flat", *types]:
        start = time.perf_counter()
        built[index_type] = build_index(vectors, index_type)
        rows.append({"type": index_type, "build_s": time.perf_counter() - start,
                     "bytes": index_bytes(built[index_type])})
    _, truth = built["flat"].search(queries, k)
    seconds = alternating_medians({t: (lambda i=built[t]: i.search(queries, k)) for t in built}, repeats)
    for row in rows:
        _, found = built[row["type"]].search(queries, k)
        row |= {"recall": recall_against(truth, found), "qps": len(queries) / seconds[row["type"]]}
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| index | recall@k vs flat | size (MiB) | build (s) | queries/s |", "| --- | --- | --- | --- | --- |"]
    lines += [f"| {r['type']} | {r['recall']:.4f} | {r['bytes'] / 2**20:.2f} | {r['build_s']:.2f} | "
              f"{r['qps']:.0f} |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", required=True, help="a flat dense index written by ance_ir.encode")
    parser.add_argument("--topics", nargs="+", required=True, help="topics whose queries are searched")
    parser.add_argument("--hits", dest="k", type=positive_int, default=100, help="hits per query")
    hidden_alias(parser, "--k", dest="k", type=positive_int)  # the old spelling
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--types", nargs="+", default=["hnsw", "ivfpq"])
    parser.add_argument("--output", help="Markdown file to update")
    args = parser.parse_args()

    faiss.omp_set_num_threads(args.threads)
    dense = load_dense_index(args.index)
    vectors = stored_vectors(dense)
    texts = [q for spec in args.topics for q in resolve_topics(spec).values()]
    queries = encoder_for_index(dense, None).encode_queries(texts)
    rows = compare(vectors, queries, args.k, args.repeats, args.types)
    body = (f"### ANN indexes on `{Path(args.index).name}` ({len(dense)} passages, dim {dense.dim}, "
            f"{len(queries)} queries, k={args.k}, {args.threads} threads)\n\n{table(rows)}\n\n"
            f"Machine: {machine()}.\nQPS is the median of {args.repeats} alternating batched searches.\n\n"
            f"```\n{command_line()}\n```\n")
    publish(body, args.output, f"ann {Path(args.index).name}")


if __name__ == "__main__":
    main()
