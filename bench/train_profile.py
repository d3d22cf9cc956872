"""Where a training step's time goes: the pieces in which ``ance_ir.train`` and sentence-transformers differ.

Forward + backward of the same (query, positive, negative) batches two ways: ance-ir's collator tokenizes the
``2B`` passages of a batch as one padded batch; sentence-transformers' MNRL runs the positive and the negative
columns as two batches of ``B``. Then one optimizer step of PyTorch's default (foreach) AdamW against the fused
one that ance-ir's ``build_optimizer`` and the Hugging Face Trainer (so sentence-transformers) use, and
ance-ir's per-layer-group gradient norms. Medians of alternating runs.

    flock /tmp/ance-ir-cpu.lock python -m bench.train_profile --output docs/bench.md
"""

from __future__ import annotations

import argparse
import random

import torch
import torch.nn.functional as F

import ance_ir  # noqa: F401
from ance_ir.modeling import DenseEncoder
from ance_ir.train.arguments import build_config
from ance_ir.train.dataset import PairStream, TrainData
from ance_ir.train.modeling import DualEncoderModule, grad_norm, layer_groups
from ance_ir.train.negatives import NEGATIVE_STRATEGIES
from ance_ir.train.optim import build_optimizer
from bench.common import alternating_medians, load_average, provenance, write_section


def batches(args: argparse.Namespace, count: int) -> list[tuple[list[str], list[str], list[str]]]:
    """``count`` batches of (queries, positives, negatives) drawn as ance_ir.train draws them."""
    config = build_config(None, {"output": "unused", "corpus": args.corpus, "train_topics": args.topics,
                                 "train_qrels": args.topics, "negatives": "random", "n_negatives": 1})
    data = TrainData.load(config)
    sampler = NEGATIVE_STRATEGIES["random"](data.docids)
    stream, rng = PairStream(len(data.pairs), config.seed), random.Random(config.seed)
    out = []
    for _ in range(count):
        pairs = [data.pairs[i] for i in stream.take(args.batch_size)]
        out.append(([data.queries[q] for q, _ in pairs], [data.texts[d] for _, d in pairs],
                    [data.texts[sampler.sample(q, data.exclude[q], 1, rng)[0]] for q, _ in pairs]))
    return out


def forward_backward(encoder: DenseEncoder, batch: tuple[list[str], list[str], list[str]], split: bool) -> None:
    """In-batch NLL over queries x all passages; passages as one batch (ance-ir) or two (sentence-transformers)."""
    queries, positives, negatives = batch
    q = encoder.embed_queries(encoder.tokenize_queries(queries))
    if split:
        p = torch.cat([encoder.embed_passages(encoder.tokenize_passages(positives)),
                       encoder.embed_passages(encoder.tokenize_passages(negatives))])
        targets = torch.arange(len(queries))
    else:  # the collator's order: each query's positive then its negative
        interleaved = [t for pair in zip(positives, negatives, strict=True) for t in pair]
        p = encoder.embed_passages(encoder.tokenize_passages(interleaved))
        targets = torch.arange(len(queries)) * 2
    F.cross_entropy(q @ p.T * 20, targets).backward()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--corpus", default="rag24-mini")
    parser.add_argument("--topics", default="rag24-mini-train")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--output", help="Markdown file to update")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    load_before = load_average()
    encoder = DenseEncoder.from_pretrained(args.model).train()
    module = DualEncoderModule(encoder)
    data = batches(args, args.repeats + 1)
    state = {"i": 0}

    def step(split: bool) -> None:
        forward_backward(encoder, data[state["i"] % len(data)], split)
        encoder.zero_grad(set_to_none=False)

    def next_batch() -> None:
        state["i"] += 1

    step(False)  # warm-up, and gradients for the optimizer steps below
    forward_backward(encoder, data[0], True)
    params = [p for p in module.parameters() if p.requires_grad]
    default = torch.optim.AdamW([{"params": [p for p in params if p.ndim > 1], "weight_decay": 0.01},
                                 {"params": [p for p in params if p.ndim <= 1], "weight_decay": 0.0}], lr=2e-5)
    fused = build_optimizer(module, 2e-5, 0.01)
    groups = layer_groups(module)
    passes = {
        f"forward + backward, the {2 * args.batch_size} passages as one batch (ance-ir)": lambda: step(False),
        f"forward + backward, two batches of {args.batch_size} (sentence-transformers)": lambda: step(True),
        "next batch": next_batch,
    }
    fb = alternating_medians(passes, args.repeats)
    forward_backward(encoder, data[0], True)  # fresh gradients to step with
    with torch.no_grad():
        snapshot = [p.detach().clone() for p in params]
    other = alternating_medians({
        "AdamW step, PyTorch's default (foreach) implementation": default.step,
        "AdamW step, fused (ance-ir's `build_optimizer`; the Hugging Face Trainer's `adamw_torch_fused`)": fused.step,
        "gradient norms of the 3 layer groups (ance-ir logs them every step)": lambda: [grad_norm(g)
                                                                                        for g in groups.values()],
        "clip_grad_norm_ (both)": lambda: torch.nn.utils.clip_grad_norm_(params, 1.0),
    }, args.repeats)
    with torch.no_grad():
        for p, saved in zip(params, snapshot, strict=True):
            p.copy_(saved)
    rows = {k: v for k, v in fb.items() if k != "next batch"} | other
    one, two = list(rows.values())[:2]
    lines = ["| piece of a training step | seconds (median) |", "| --- | --- |"]
    lines += [f"| {k} | {v:.4f} |" for k, v in rows.items()]
    foreach, fused_s = list(other.values())[:2]
    body = (f"### Where a training step goes, cpu: `{args.model}`, batch {args.batch_size} queries + "
            f"{2 * args.batch_size} passages\n\n"
            f"Medians of {args.repeats} alternating runs, {args.threads} threads.\n\n" + "\n".join(lines) + "\n\n"
            f"Running the passages as two batches would save {one - two:.3f} s of the {one + fused_s:.3f} s these "
            f"pieces take per step in ance-ir ({100 * (one - two) / (one + fused_s):.1f}%); the fused AdamW saves "
            f"{foreach - fused_s:.3f} s per step against PyTorch's default.\n\n" + provenance(load_before))
    print(body)
    if args.output:
        write_section(args.output, "train-profile cpu", body)


if __name__ == "__main__":
    main()
