"""Rerank speed: ``ance_ir.rerank``'s scoring (``CrossEncoder.score_pairs``) against sentence-transformers'
``CrossEncoder.predict`` on the same model and the same (query, passage) pairs.

The model is a one-label sequence-classification checkpoint both libraries load as they are: by default the
MiniLM backbone (``minilm``, all-MiniLM-L6-v2) with a new seeded head, saved to a temporary folder (speed does
not depend on the head's weights; ``--model`` takes any such checkpoint). The pairs are BM25's top ``--depth``
for the first ``--queries`` rag24-mini-test topics, what ``python -m ance_ir.rerank`` scores. Each scorer runs
``--repeats`` times in alternating order after one untimed warm-up; pairs/s is from the median. ance-ir runs
with its defaults (``precision auto``, 320 tokens per pair, length-sorted batches with dynamic padding) and in
int8; sentence-transformers with its defaults (the tokenizer's 512 tokens) and cut at 320 tokens like ance-ir,
both with ``activation_fn`` the identity (raw logits, as ance-ir returns them). ``--device cuda`` runs both
libraries on the GPU, where ance-ir's second row is fp32 (int8 is a CPU mode).

    flock /tmp/ance-ir-cpu.lock python -m bench.rerank_speed --output docs/bench.md
    python -m bench.rerank_speed --device cuda --queries 20 --output docs/bench.md
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import torch

from ance_ir.cli import positive_int
from ance_ir.data import corpus_texts, read_run
from ance_ir.datasets import resolve_corpus, resolve_topics
from bench.common import alternating_medians, device_label, load_average, provenance, publish


def sequence_classifier(backbone: str, folder: Path) -> Path:
    """``backbone`` with a new one-label sequence-classification head (seed 0), saved with its tokenizer."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from ance_ir.modeling import resolve_model_path

    path = resolve_model_path(backbone)
    torch.manual_seed(0)
    AutoModelForSequenceClassification.from_pretrained(path, num_labels=1).save_pretrained(folder)
    AutoTokenizer.from_pretrained(path).save_pretrained(folder)
    return folder


def top_overlap(a: np.ndarray, b: np.ndarray, depth: int, k: int = 10) -> float:
    """Mean share of each query's top ``k`` by ``a`` also in its top ``k`` by ``b`` (``depth`` pairs a query)."""
    shares = []
    for start in range(0, len(a), depth):
        top_a = set(np.argsort(-a[start:start + depth], kind="stable")[:k])
        top_b = set(np.argsort(-b[start:start + depth], kind="stable")[:k])
        shares.append(len(top_a & top_b) / k)
    return float(np.mean(shares))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="one-label sequence-classification checkpoint (default: minilm + new head)")
    parser.add_argument("--backbone", default="minilm", help="backbone of the default model")
    parser.add_argument("--run", default="runs/rag24/bm25.test.trec.gz", help="first-stage run")
    parser.add_argument("--topics", default="rag24-mini-test")
    parser.add_argument("--corpus", default="rag24-mini")
    parser.add_argument("--queries", type=positive_int, default=2, help="the run's first N queries")
    parser.add_argument("--depth", type=positive_int, default=100, help="pairs per query")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="both libraries' default")
    parser.add_argument("--threads", type=positive_int, default=2)
    parser.add_argument("--repeats", type=positive_int, default=3)
    parser.add_argument("--device", default="cpu", help="cpu or cuda: where both libraries score")
    parser.add_argument("--output", help="Markdown file to update")
    args = parser.parse_args()

    from sentence_transformers import CrossEncoder as SentenceTransformersCrossEncoder

    from ance_ir.modeling.cross_encoder import CrossEncoder
    from ance_ir.modeling.inference import resolve_precision

    torch.set_num_threads(args.threads)
    load_before = load_average()
    topics, run = resolve_topics(args.topics), read_run(args.run)
    qids = list(run)[:args.queries]
    hits = [(qid, docid) for qid in qids for docid, _ in run[qid][:args.depth]]
    if any(len(run[q]) < args.depth for q in qids):
        raise SystemExit(f"error: {args.run}: a query has fewer than {args.depth} hits")
    needed = {d for _, d in hits}
    texts = corpus_texts(resolve_corpus(args.corpus), needed)
    queries, passages = [topics[q] for q, _ in hits], [texts[d] for _, d in hits]
    pairs = [[q, p] for q, p in zip(queries, passages, strict=True)]

    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or str(sequence_classifier(args.backbone, Path(tmp) / "model"))
        ours = CrossEncoder.from_pretrained(model).to(args.device)
        theirs = SentenceTransformersCrossEncoder(model, device=args.device)
        theirs_cut = SentenceTransformersCrossEncoder(model, device=args.device, max_length=ours.max_length)
        identity = torch.nn.Identity()
        b = args.batch_size
        auto = resolve_precision("auto", args.device)
        second = "int8" if ours.device.type == "cpu" else "fp32"
        scorers = {
            f"ance-ir `score_pairs`, defaults (auto = {auto}, {ours.max_length} tokens)":
                lambda: ours.score_pairs(queries, passages, batch_size=b, precision="auto"),
            f"ance-ir `score_pairs`, {second}, {ours.max_length} tokens":
                lambda: ours.score_pairs(queries, passages, batch_size=b, precision=second),
            f"sentence-transformers `predict`, defaults ({theirs.max_seq_length} tokens)":
                lambda: theirs.predict(pairs, batch_size=b, activation_fn=identity),
            f"sentence-transformers `predict`, {ours.max_length} tokens":
                lambda: theirs_cut.predict(pairs, batch_size=b, activation_fn=identity),
        }
        scores = {name: np.asarray(fn(), dtype=np.float32) for name, fn in scorers.items()}  # warm-up
        seconds = alternating_medians(scorers, args.repeats)

    names = list(scorers)
    reference = seconds[names[2]]
    fp32 = ours.score_pairs(queries, passages, batch_size=b, precision="fp32")
    lengths = [len(ids) for ids in ours.tokenizer(queries, passages)["input_ids"]]
    longer = np.mean([n > ours.max_length for n in lengths])
    lines = [f"### Rerank speed, {device_label(args.device)}: {len(hits)} pairs (BM25 top {args.depth} of {len(qids)} "
             f"{args.topics} topics), "
             f"{'model ' + args.model if args.model else args.backbone + ' + a new one-label head'}",
             "",
             f"Batch size {b}, {args.threads} threads; medians of {args.repeats} alternating runs after a warm-up. "
             f"{longer:.0%} of the pairs are longer than {ours.max_length} tokens (median "
             f"{int(np.median(lengths))}).",
             "",
             "| scorer | seconds (median) | pairs/s | speed-up over sentence-transformers' defaults | "
             "top-10 overlap with fp32 |",
             "| --- | --- | --- | --- | --- |"]
    for name in names:
        overlap = top_overlap(scores[name], fp32, args.depth)
        lines.append(f"| {name} | {seconds[name]:.2f} | {len(hits) / seconds[name]:.1f} | "
                     f"**{reference / seconds[name]:.2f}×** | {overlap:.3f} |")
    same = float(np.max(np.abs(fp32 - scores[names[3]])))
    default = reference / seconds[names[0]]
    lines += ["",
              f"Same model, same truncation: ance-ir's fp32 scores and sentence-transformers' differ by at most "
              f"{same:.1e}.",
              "",
              f"Acceptance (issue 13), ance-ir's defaults ≥ 1.5× sentence-transformers' `predict`: "
              f"{'yes' if default >= 1.5 else 'no'} ({default:.2f}×; {seconds[names[3]] / seconds[names[0]]:.2f}× "
              "against it at the same truncation).",
              "", provenance(load_before, ("sentence-transformers",))]
    body = "\n".join(lines)
    publish(body, args.output, f"rerank-speed {device_label(args.device)}")


if __name__ == "__main__":
    main()
