"""Where a training step's time goes: the pieces in which ``ance_ir.train`` and sentence-transformers differ.

Forward + backward of the same (query, positive, negative) batches several ways: ance-ir's collator with each
``--buckets`` value (1: the ``2B`` passages of a batch as one padded batch; k: length-sorted into k batches, each
padded to its own longest); sentence-transformers' MNRL, which runs the positive and the negative columns as two
batches of ``B``. Then one optimizer step of PyTorch's default (foreach) AdamW against the fused
one that ance-ir's ``build_optimizer`` and the Hugging Face Trainer (so sentence-transformers) use, and
ance-ir's per-layer-group gradient norms. Medians of alternating runs. ``--precision bf16`` runs the forward
passes under autocast as ``ance_ir.train --precision bf16`` does; on a GPU every timed piece ends with a
synchronisation, so that its kernels are counted.

    flock /tmp/ance-ir-cpu.lock python -m bench.train_profile --output docs/bench.md
    python -m bench.train_profile --device cuda --precision bf16 --output docs/bench.md    # on a GPU machine
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
import torch.nn.functional as F

import ance_ir  # noqa: F401
from ance_ir.modeling import DenseEncoder
from ance_ir.train.arguments import build_config
from ance_ir.train.collator import Collator, Group
from ance_ir.train.contrastive import GroupDraws
from ance_ir.train.dataset import TrainData
from ance_ir.train.loss import build_loss, dense_group_scores
from ance_ir.train.modeling import DualEncoderModule, grad_norm, layer_groups
from ance_ir.train.negatives import NEGATIVE_STRATEGIES
from ance_ir.train.optim import Precision, build_optimizer
from bench.common import alternating_medians, device_label, load_average, provenance, publish

IN_BATCH_NLL = build_loss("nll", temperature=0.05)


def batches(args: argparse.Namespace, count: int) -> tuple[TrainData, list[list[Group]]]:
    """The training data and ``count`` batches of (query, positive, 1 random negative) groups, drawn as
    ance_ir.train draws them."""
    config = build_config(None, {"output": "unused", "corpus": args.corpus, "train_topics": args.topics,
                                 "train_qrels": args.topics, "min_positive_grade": 2, "negatives": "random",
                                 "n_negatives": 1})
    data = TrainData.load(config)
    draws = GroupDraws(data, NEGATIVE_STRATEGIES["random"](data.docids), config.seed, 1)
    return data, [draws.draw(args.batch_size) for _ in range(count)]


def ours(module: DualEncoderModule, collator: Collator, groups: list[Group], precision: Precision) -> None:
    """ance-ir's forward + backward: the trainer's in-batch NLL (scale 20), passages as the collator batches them."""
    batch = collator(groups)
    with precision.autocast():
        q, p = module(dict(batch.queries), [dict(b) for b in batch.passages], batch.restore)
    IN_BATCH_NLL(dense_group_scores(q, p, batch.group_size, True)).backward()


def st_columns(data: TrainData, groups: list[Group]) -> list[list[str]]:
    """The positive and the negative column's passage texts, as sentence-transformers batches them."""
    return [[data.texts[g.positive] for g in groups], [data.texts[g.negatives[0]] for g in groups]]


def sentence_transformers(encoder: DenseEncoder, data: TrainData, groups: list[Group], precision: Precision) -> None:
    """MNRL's way: the query, positive and negative columns as three batches."""
    with precision.autocast():
        q = encoder.embed_queries(encoder.tokenize_queries([data.queries[g.qid] for g in groups]))
        p = torch.cat([encoder.embed_passages(encoder.tokenize_passages(column))
                       for column in st_columns(data, groups)])
    F.cross_entropy(q.float() @ p.float().T * 20, torch.arange(len(groups), device=q.device)).backward()


def padding_share(masks: list[torch.Tensor]) -> float:
    """Fraction of the tokens run through the model that are padding, from the batches' attention masks."""
    return 1 - sum(int(m.sum()) for m in masks) / sum(m.numel() for m in masks)


def st_masks(encoder: DenseEncoder, data: TrainData, batches: list[list[Group]]) -> list[torch.Tensor]:
    """Attention masks of the positive and negative columns, tokenized as sentence-transformers batches them."""
    return [encoder.tokenize_passages(column)["attention_mask"] for groups in batches
            for column in st_columns(data, groups)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--corpus", default="rag24-mini")
    parser.add_argument("--topics", default="rag24-mini-train")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--buckets", type=int, nargs="+", default=[1, 2, 4, 8], help="passage_buckets to time")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--output", help="Markdown file to update")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    load_before = load_average()
    device = torch.device(args.device)
    precision = Precision(args.precision, device)
    encoder = DenseEncoder.from_pretrained(args.model).to(device).train()
    module = DualEncoderModule(encoder)
    data, groups = batches(args, args.repeats + 1)
    collators = {k: Collator(encoder, data.queries, data.texts, k) for k in args.buckets}
    state = {"i": 0}

    def step(run: Callable[[list[Group]], None]) -> Callable[[], None]:
        def one() -> None:
            run(groups[state["i"] % len(groups)])
            encoder.zero_grad(set_to_none=False)
        return finished(one)

    def finished(run: Callable[[], object]) -> Callable[[], None]:
        """``run``, then wait for the GPU's queued kernels (no-op on the CPU)."""
        def timed() -> None:
            run()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
        return timed

    def next_batch() -> None:
        state["i"] += 1

    passes, pads, names = {}, {}, {}
    for k, collator in collators.items():
        name = names[k] = (f"forward + backward, ance-ir, `passage_buckets` {k}: the {2 * args.batch_size} "
                           "passages " + ("as one padded batch" if k == 1 else f"length-sorted into {k} batches"))
        passes[name] = step(lambda g, c=collator: ours(module, c, g, precision))
        pads[name] = padding_share([b["attention_mask"] for g in groups for b in collator(g).passages])
    st = f"forward + backward, sentence-transformers: positives and negatives as two batches of {args.batch_size}"
    passes[st] = step(lambda g: sentence_transformers(encoder, data, g, precision))
    pads[st] = padding_share(st_masks(encoder, data, groups))
    passes["next batch"] = next_batch
    step(lambda g: ours(module, collators[args.buckets[0]], g, precision))()  # warm-up
    fb = alternating_medians(passes, args.repeats)
    sentence_transformers(encoder, data, groups[0], precision)  # gradients for the optimizer steps below
    params = [p for p in module.parameters() if p.requires_grad]
    default = torch.optim.AdamW([{"params": [p for p in params if p.ndim > 1], "weight_decay": 0.01},
                                 {"params": [p for p in params if p.ndim <= 1], "weight_decay": 0.0}], lr=2e-5)
    fused = build_optimizer(module, 2e-5, 0.01)
    layers = layer_groups(module)
    with torch.no_grad():
        snapshot = [p.detach().clone() for p in params]
    other = alternating_medians({
        "AdamW step, PyTorch's default (foreach) implementation": finished(default.step),
        "AdamW step, fused (ance-ir's `build_optimizer`; the Hugging Face Trainer's `adamw_torch_fused`)":
            finished(fused.step),
        "gradient norms of the 3 layer groups (ance-ir logs them every step)":
            finished(lambda: [grad_norm(g) for g in layers.values()]),
        "clip_grad_norm_ (both)": finished(lambda: torch.nn.utils.clip_grad_norm_(params, 1.0)),
    }, args.repeats)
    with torch.no_grad():
        for p, saved in zip(params, snapshot, strict=True):
            p.copy_(saved)
    rows = {k: v for k, v in fb.items() if k != "next batch"} | other
    lines = ["| piece of a training step | seconds (median) | padding share of the passage tokens |",
             "| --- | --- | --- |"]
    lines += [f"| {k} | {v:.4f} | {f'{pads[k]:.1%}' if k in pads else ''} |" for k, v in rows.items()]
    best = min(args.buckets, key=lambda k: fb[names[k]])
    foreach, fused_s = list(other.values())[:2]
    label = device_label(args.device) + ("" if args.precision == "fp32" else f", {args.precision}")
    body = (f"### Where a training step goes, {label}: `{args.model}`, batch {args.batch_size} queries + "
            f"{2 * args.batch_size} passages\n\n"
            f"Medians of {args.repeats} alternating runs over {args.repeats} batches, {args.threads} threads.\n\n"
            + "\n".join(lines) + "\n\n"
            f"Fastest passage batching: `passage_buckets` {best} "
            f"({fb[names[best]] / fb[names[args.buckets[0]]]:.2f}× the time of `passage_buckets` {args.buckets[0]}, "
            f"{fb[names[best]] / fb[st]:.2f}× sentence-transformers'); the fused AdamW saves "
            f"{foreach - fused_s:.3f} s per step against PyTorch's default.\n\n" + provenance(load_before))
    publish(body, args.output, f"train-profile {label.replace(', ', ' ')}")


if __name__ == "__main__":
    main()
