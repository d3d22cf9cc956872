"""Synthetic scaling of flat, HNSW and IVF-PQ (dim 384): QPS, recall@k vs flat, size, build time; and flat
search time against the memory-bandwidth bound.

Vectors are drawn from a Gaussian with the mean and covariance of a real index's passage vectors (so the
spectrum looks like real embeddings), then L2-normalised; queries come from the same distribution. Each size
goes through ``bench.ann_indexes.compare`` (ance-ir's ``build_index`` defaults). Flat search is also timed one
query at a time (faiss scans the vectors without BLAS below 20 queries) and compared with bytes scanned /
measured read bandwidth; a batch is compared with both that bound and the GEMM bound (2·N·D·Q flops at the
measured matmul rate).

    flock /tmp/ance-ir-cpu.lock python -m bench.ann_scaling --like indexes/rag24-mini.minilm --output docs/bench.md
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import faiss
import numpy as np

import ance_ir  # noqa: F401
from ance_ir.cli import hidden_alias, positive_int
from ance_ir.index import build_index, load_dense_index, stored_vectors
from bench.ann_indexes import compare
from bench.common import load_average, provenance, publish


class GaussianLike:
    """Samples from N(mean, cov) of reference vectors, L2-normalised."""

    def __init__(self, reference: np.ndarray, seed: int = 0):
        reference = np.asarray(reference, dtype=np.float64)
        self.mean = reference.mean(0)
        cov = np.cov(reference, rowvar=False) + 1e-6 * np.eye(reference.shape[1])
        self.factor = np.linalg.cholesky(cov).T.astype(np.float32)
        self.rng = np.random.default_rng(seed)

    def sample(self, n: int, block: int = 100_000) -> np.ndarray:
        out = np.empty((n, len(self.mean)), dtype=np.float32)
        for start in range(0, n, block):
            rows = min(block, n - start)
            x = self.rng.standard_normal((rows, len(self.mean)), dtype=np.float32) @ self.factor + self.mean
            out[start:start + rows] = x / np.linalg.norm(x, axis=1, keepdims=True)
        return out


def read_bandwidth(threads: int, gib: float = 1.0, repeats: int = 5) -> float:
    """Best-of-``repeats`` bytes/s reading a ``gib`` GiB float32 array (summing it) with ``threads`` threads."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    data = torch.ones(int(gib * 2**30) // 4, dtype=torch.float32)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        data.sum()
        best = min(best, time.perf_counter() - start)
    torch.set_num_threads(before)
    return data.numel() * 4 / best


def matmul_flops(dim: int, queries: int, rows: int = 200_000, repeats: int = 3) -> float:
    """Best-of-``repeats`` float32 flop/s of a [queries, dim] x [dim, rows] product (faiss' flat kernel)."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((queries, dim), dtype=np.float32)
    b = rng.standard_normal((rows, dim), dtype=np.float32)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b.T
        best = min(best, time.perf_counter() - start)
    return 2 * queries * dim * rows / best


def single_query_ms(index: faiss.Index, queries: np.ndarray, k: int, n: int = 30) -> float:
    index.search(queries[:1], k)
    times = []
    for q in queries[:n]:
        start = time.perf_counter()
        index.search(q[None], k)
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def plot(results: dict[int, list[dict]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted(results)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    for index_type in [r["type"] for r in results[sizes[0]]]:
        rows = [next(r for r in results[n] if r["type"] == index_type) for n in sizes]
        left.plot(sizes, [r["qps"] for r in rows], marker="o", label=index_type)
        right.plot(sizes, [r["recall"] for r in rows], marker="o", label=index_type)
    left.set(xscale="log", yscale="log", xlabel="vectors (dim 384)", ylabel="queries/s (batched)")
    right.set(xscale="log", xlabel="vectors (dim 384)", ylabel="recall@100 vs flat", ylim=(0, 1.02))
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--like", default="indexes/rag24-mini.minilm", help="index whose vectors set the Gaussian")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--hits", dest="k", type=positive_int, default=100, help="hits per query")
    hidden_alias(parser, "--k", dest="k", type=positive_int)  # the old spelling
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--types", nargs="+", default=["hnsw", "ivfpq"])
    parser.add_argument("--output", help="Markdown file to update (the chart goes beside it)")
    args = parser.parse_args()

    faiss.omp_set_num_threads(args.threads)
    load_before = load_average()
    reference = stored_vectors(load_dense_index(args.like))
    sampler = GaussianLike(reference)
    queries = sampler.sample(args.queries)
    dim = queries.shape[1]
    bandwidth = {1: read_bandwidth(1), args.threads: read_bandwidth(args.threads)}
    flops = matmul_flops(dim, args.queries)
    results, bound_rows = {}, []
    for n in args.sizes:
        vectors = sampler.sample(n)
        results[n] = compare(vectors, queries, args.k, args.repeats, args.types)
        print(n, results[n], flush=True)
        flat = build_index(vectors, "flat")
        scanned = n * dim * 4
        batch_s = args.queries / next(r for r in results[n] if r["type"] == "flat")["qps"]
        bound_rows.append(
            f"| {n:,} | {scanned / 2**20:.0f} | {single_query_ms(flat, queries, args.k):.2f} | "
            f"{1000 * scanned / bandwidth[1]:.2f} | {1000 * batch_s:.0f} | "
            f"{1000 * scanned / max(bandwidth.values()):.1f} | {1000 * 2 * n * dim * args.queries / flops:.0f} |")
        del vectors, flat

    lines = ["| vectors | index | recall@100 vs flat | size (MiB) | build (s) | queries/s (batch of "
             f"{args.queries}) |", "| --- | --- | --- | --- | --- | --- |"]
    for n in args.sizes:
        lines += [f"| {n:,} | {r['type']} | {r['recall']:.4f} | {r['bytes'] / 2**20:.1f} | {r['build_s']:.1f} | "
                  f"{r['qps']:.0f} |" for r in results[n]]
    chart = ""
    if args.output:
        png = Path(args.output).with_name("bench-ann-scaling.png")
        plot(results, png)
        chart = f"\n![ANN scaling]({png.name})\n"
    body = (f"### ANN scaling on synthetic vectors (dim {dim}, {args.queries} queries, k={args.k}, "
            f"{args.threads} threads)\n\n"
            f"Vectors ~ Gaussian with the mean and covariance of `{Path(args.like).name}`'s {len(reference)} passage "
            "vectors, L2-normalised; HNSW m=32, efConstruction=200, efSearch=128; IVF-PQ with `ivfpq_defaults` "
            f"(nlist≈4√N, 4 dims per sub-quantizer, nprobe=nlist/16). Build includes IVF-PQ training; queries/s is the "
            f"median of {args.repeats} alternating batched searches.\n\n" + "\n".join(lines) + "\n" + chart +
            f"\nFlat search against the memory-bandwidth bound. Measured read bandwidth (summing a 1 GiB array): "
            f"{bandwidth[1] / 1e9:.1f} GB/s with 1 thread, {bandwidth[args.threads] / 1e9:.1f} GB/s with "
            f"{args.threads}; float32 matmul {flops / 1e9:.0f} GFLOP/s. One query at a time faiss scans all vectors "
            "on one thread (no BLAS below 20 queries); a batch goes through BLAS and reads the vectors once per "
            "block of 4096 queries (its bandwidth bound uses the better of the two bandwidths). Vectors that fit in "
            "the last-level cache are read from it, faster than the DRAM bandwidth measured here.\n\n"
            f"| vectors | bytes scanned (MiB) | 1 query (ms, median of 30) | bandwidth bound, 1 thread (ms) | batch of "
            f"{args.queries} (ms) | bandwidth bound (ms) | GEMM bound (ms) |\n"
            "| --- | --- | --- | --- | --- | --- | --- |\n" + "\n".join(bound_rows) + "\n\n" + provenance(load_before))
    publish(body, args.output, "ann-scaling cpu")


if __name__ == "__main__":
    main()
