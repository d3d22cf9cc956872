"""Retrieval quality of each encoding precision on the full corpus: encode -> flat index -> search -> evaluate.

Passages are encoded with ``encode_passages(precision=MODE)``; queries in fp32 (what ``ance_ir.search`` does
with an index written by ``ance_ir.encode --precision MODE``) and, in a second column, in the same mode.
nDCG@10 and R@100 on the test topics, agreement with the fp32 vectors and rankings, and one timed encode.

    flock /tmp/ance-ir-cpu.lock python -m bench.encode_quality --output docs/bench.md
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

import ance_ir  # noqa: F401  (bootstraps Java before Pyserini is imported)
from ance_ir.datasets import resolve_qrels, resolve_topics
from ance_ir.eval import evaluate
from ance_ir.index import DenseIndex, build_index
from ance_ir.modeling import DenseEncoder, model_precision
from ance_ir.search import DenseSearcher
from bench.common import device_label, first_passages, load_average, provenance, publish

TOLERANCE = 0.005  # the default precision must keep nDCG@10 within this of fp32


def modes_for(device: str) -> list[str]:
    return ["fp32", "auto", "bf16", "int8"] if device == "cpu" else ["fp32", "auto", "bf16", "fp16"]


def search(encoder: DenseEncoder, index: DenseIndex, topics: dict[str, str], precision: str) -> dict:
    encoder.inference_precision = precision
    try:
        return DenseSearcher(index, encoder).search(topics, hits=1000)
    finally:
        encoder.inference_precision = "fp32"


def unit(vectors: np.ndarray) -> np.ndarray:
    """Each row scaled to length 1 (cosines of unnormalised vectors)."""
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def top_overlap(run: dict, reference: dict, k: int = 10) -> float:
    """Mean fraction of the reference top-k that the run's top-k also holds."""
    return float(np.mean([len({d for d, _ in run[q][:k]} & {d for d, _ in reference[q][:k]}) / k
                          for q in reference]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="rag24-mini")
    parser.add_argument("--topics", default="rag24-mini-test")
    parser.add_argument("--qrels", default="rag24-mini-test")
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--pooling", choices=["cls", "mean"], help="override the model's pooling (MiniLM: mean)")
    parser.add_argument("--no-normalize", action="store_true", help="unnormalised vectors (MiniLM: normalised)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--modes", nargs="+", help="default: fp32 auto bf16 int8 (CPU) or fp32 auto bf16 fp16 (GPU)")
    parser.add_argument("--limit", type=int, help="only the first N passages (a quick check, not a result)")
    parser.add_argument("--output", help="Markdown file to update")
    args = parser.parse_args()

    load_before = load_average()
    passages = first_passages(args.corpus, args.limit)
    texts, docids = [p.text for p in passages], [p.docid for p in passages]
    topics, qrels = resolve_topics(args.topics), resolve_qrels(args.qrels)
    overrides = {"pooling": args.pooling} if args.pooling else {}
    if args.no_normalize:
        overrides["normalize"] = False
    encoder = DenseEncoder.from_pretrained(args.model, **overrides).to(args.device)
    modes = args.modes or modes_for(args.device)
    if modes[0] != "fp32":
        modes = ["fp32", *[m for m in modes if m != "fp32"]]
    rows, reference, seen = [], {}, set()
    for mode in modes:
        concrete = model_precision(encoder, mode)
        if concrete in seen:  # e.g. bf16 after auto (= bf16)
            continue
        seen.add(concrete)
        start = time.perf_counter()
        vectors = encoder.encode_passages(texts, batch_size=args.batch_size, precision=mode)
        seconds = time.perf_counter() - start
        index = DenseIndex(build_index(vectors, "flat"), docids)
        run_fp32q = search(encoder, index, topics, "fp32")
        run_same = search(encoder, index, topics, mode)
        if mode == "fp32":
            reference = {"vectors": vectors, "run": run_fp32q}
        cos = (unit(vectors) * unit(reference["vectors"])).sum(1)
        metrics = evaluate(qrels, run_fp32q, ["ndcg@10", "r@100"])
        rows.append({"mode": mode if mode == concrete else f"{mode} (= {concrete})",
                     "ndcg": metrics["ndcg_cut_10"], "r100": metrics["recall_100"],
                     "ndcg_same": evaluate(qrels, run_same, ["ndcg@10"])["ndcg_cut_10"],
                     "cos_min": float(cos.min()), "cos_mean": float(cos.mean()),
                     "overlap": top_overlap(run_fp32q, reference["run"]), "rate": len(texts) / seconds})
        print(rows[-1], flush=True)
    base = rows[0]["ndcg"]
    lines = ["| passages encoded in | nDCG@10 | Δ vs fp32 | within 0.005 | R@100 | nDCG@10, queries in the same "
             "mode | cos to fp32 (min / mean) | top-10 overlap with fp32 | passages/s (one full-corpus run) |",
             "| --- " * 9 + "|"]
    for r in rows:
        delta = r["ndcg"] - base
        within = "yes" if abs(delta) <= TOLERANCE else "NO"
        lines.append(f"| {r['mode']} | {r['ndcg']:.4f} | {delta:+.4f} | {within} | {r['r100']:.4f} | "
                     f"{r['ndcg_same']:.4f} | {r['cos_min']:.5f} / {r['cos_mean']:.5f} | "
                     f"{r['overlap']:.3f} | {r['rate']:.1f} |")
    default = next((r for r in rows if r["mode"].startswith("auto")), None)
    verdict = ""
    if default is not None:
        delta = default["ndcg"] - base
        verdict = (f"Acceptance, the default ({default['mode']}) keeps nDCG@10 within {TOLERANCE} of fp32: "
                   f"{'yes' if abs(delta) <= TOLERANCE else 'no'} ({delta:+.4f}).")
    corpus = f"full {args.corpus}" if args.limit is None else f"first {len(texts)} passages of {args.corpus}"
    pooled = f", {args.pooling} pooling" if args.pooling else ""
    pooled += ", unnormalised" if args.no_normalize else ""
    body = (f"### Quality of each precision, {device_label(args.device)}{pooled}: {corpus} ({len(texts)} passages), "
            f"{args.topics} ({len(topics)} topics)\n\n"
            f"Encode every passage → flat index → `DenseSearcher` (queries in fp32, as `ance_ir.search` encodes "
            f"them) → pytrec_eval. `{args.model}`, {encoder.config.pooling} pooling"
            f"{', normalised' if encoder.config.normalize else ', unnormalised'}. Batch size {args.batch_size}, "
            f"{torch.get_num_threads()} torch threads; passages/s is a single run, not a median (see the "
            "throughput tables for timing).\n\n"
            + "\n".join(lines) + "\n\n" + verdict + "\n\n" + provenance(load_before))
    variant = [*([args.pooling] if args.pooling else []), *(["unnormalised"] if args.no_normalize else [])]
    publish(body, args.output, " ".join(["encode-quality", device_label(args.device), *variant]))


if __name__ == "__main__":
    main()
