"""Search speed on a real index: ``ance_ir.search``'s DenseSearcher against Pyserini's ``FaissSearcher``.

Same index folder, same queries, same k and threads. Batched: query encoding + search, search alone (query
vectors given), and encoding alone, each the median of ``--repeats`` alternating runs. Latency: every query
searched on its own (``DenseSearcher.search`` with one topic vs ``FaissSearcher.search``), median and p95.
Pyserini encodes queries with its ``AutoQueryEncoder`` (mean pooling, L2-normalised), one query at a time,
which is what ``batch_search`` does with an encoder that has no ``encode_batch``.

    flock /tmp/ance-ir-cpu.lock python -m bench.search_speed --index indexes/rag24-mini.minilm --output docs/bench.md
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence

import numpy as np
import torch

import ance_ir  # noqa: F401  (bootstraps Java before Pyserini is imported)
from ance_ir.cli import hidden_alias, positive_int
from ance_ir.datasets import resolve_topics
from ance_ir.index import load_dense_index
from ance_ir.search import DenseSearcher, encoder_for_index
from bench.common import alternating_medians, load_average, provenance, publish


class PrecomputedQueries:
    """Stands in for the encoder, so that ``DenseSearcher.search`` times the faiss search and the run alone."""

    def __init__(self, texts: Sequence[str], vectors: np.ndarray):
        self.vectors = dict(zip(texts, vectors, strict=True))
        self.dim = vectors.shape[1]

    def encode_queries(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        return np.stack([self.vectors[t] for t in texts])


def p95(values: list[float]) -> float:
    return float(np.percentile(values, 95))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", default="indexes/rag24-mini.minilm", help="flat index written by ance_ir.encode")
    parser.add_argument("--topics", nargs="+", default=["rag24-mini-train", "rag24-mini-test"])
    parser.add_argument("--hits", dest="k", type=positive_int, default=1000,
                        help="hits per query (ance_ir.search's default)")
    hidden_alias(parser, "--k", dest="k", type=positive_int)  # the old spelling
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--output", help="Markdown file to update")
    args = parser.parse_args()

    import faiss
    from pyserini.encode import AutoQueryEncoder
    from pyserini.search.faiss import FaissSearcher

    from ance_ir.modeling import resolve_model_path

    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)
    load_before = load_average()
    topics = {qid: text for spec in args.topics for qid, text in resolve_topics(spec).items()}
    qids, texts = list(topics), list(topics.values())
    dense = load_dense_index(args.index)
    encoder = encoder_for_index(dense, None).to(args.device)
    ours = DenseSearcher(dense, encoder)
    vectors = encoder.encode_queries(texts)
    ours_search_only = DenseSearcher(dense, PrecomputedQueries(texts, vectors))
    pooling, normalize = encoder.config.pooling, encoder.config.normalize
    theirs = FaissSearcher(args.index, AutoQueryEncoder(resolve_model_path(dense.meta["encoder"]), device=args.device,
                                                        pooling=pooling, l2_norm=normalize))
    k, t = args.k, args.threads

    tasks = {
        "ance-ir: encode + search": lambda: ours.search(topics, hits=k),
        "pyserini: encode + search": lambda: theirs.batch_search(texts, qids, k=k, threads=t),
        "ance-ir: search only": lambda: ours_search_only.search(topics, hits=k),
        "pyserini: search only": lambda: theirs.batch_search(vectors, qids, k=k, threads=t),
        "ance-ir: encode only": lambda: encoder.encode_queries(texts),
        "pyserini: encode only": lambda: [theirs.query_encoder.encode(q) for q in texts],
    }
    for task in tasks.values():  # warm-up
        task()
    seconds = alternating_medians(tasks, args.repeats)

    mine, pys = ours.search(topics, hits=k), theirs.batch_search(texts, qids, k=k, threads=t)
    same_top10 = np.mean([[d for d, _ in mine[q][:10]] == [h.docid for h in pys[q][:10]] for q in qids])

    single_ours, single_theirs = [], []
    for i, (qid, text) in enumerate(topics.items()):  # alternate who goes first, query by query
        pair = [(single_ours, lambda q=qid, x=text: ours.search({q: x}, hits=k)),
                (single_theirs, lambda x=text: theirs.search(x, k=k, threads=t))]
        for out, fn in (pair if i % 2 == 0 else pair[::-1]):
            start = time.perf_counter()
            fn()
            out.append(time.perf_counter() - start)

    n = len(qids)
    lines = ["| stage | ance-ir (s) | Pyserini (s) | ance-ir queries/s | Pyserini queries/s | "
             "Pyserini / ance-ir time |",
             "| --- " * 6 + "|"]
    for stage in ("encode + search", "search only", "encode only"):
        a, b = seconds[f"ance-ir: {stage}"], seconds[f"pyserini: {stage}"]
        lines.append(f"| {stage} | {a:.3f} | {b:.3f} | {n / a:.0f} | {n / b:.0f} | **{b / a:.2f}×** |")
    lat = ["| one query at a time | median (ms) | p95 (ms) |", "| --- | --- | --- |",
           f"| `DenseSearcher.search` (ance-ir) | {1000 * statistics.median(single_ours):.2f} | "
           f"{1000 * p95(single_ours):.2f} |",
           f"| `FaissSearcher.search` (Pyserini, AutoQueryEncoder) | {1000 * statistics.median(single_theirs):.2f} | "
           f"{1000 * p95(single_theirs):.2f} |"]
    slower = {stage: seconds[f"ance-ir: {stage}"] > seconds[f"pyserini: {stage}"]
              for stage in ("encode + search", "search only")}
    verdict = ("Acceptance, `ance_ir.search` no slower than `FaissSearcher.batch_search`: "
               + "; ".join(f"{stage}: {'no' if bad else 'yes'}" for stage, bad in slower.items()) + ".")
    body = (f"### Search speed, {args.device}: `{dense.folder.name}` ({len(dense)} passages, dim {dense.dim}, "
            f"{dense.meta.get('index_type', '?')}), {n} queries ({' + '.join(args.topics)}), k={k}, {t} threads\n\n"
            f"Batched, median of {args.repeats} alternating runs; query encoding in fp32 for both:\n\n"
            + "\n".join(lines) + "\n\n" + "\n".join(lat) + "\n\n"
            f"Same top-10 docids in both for {100 * same_top10:.1f}% of the queries.\n\n{verdict}\n\n"
            + provenance(load_before))
    publish(body, args.output, f"search-speed {args.device}")


if __name__ == "__main__":
    main()
