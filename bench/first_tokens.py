"""The last layer run for the first tokens alone (``ance_ir/modeling/first_tokens.py``) against the whole forward,
in the same process on the same batches: a cross-encoder's scores, a CLS-pooled dense encoder's passage vectors and
ME-BERT's first ``m`` passage vectors, all on MiniLM (``--backbone``; new, seeded heads: speed does not depend on
their weights).

The whole forward is what each model computed before: the backbone over every token, then the first token(s)' last
states. It is run by setting the model's own ``training`` flag while its modules stay in eval mode (no dropout):
the first-token path is taken only when that flag is off. Both contenders take the same length-sorted batches,
padded to their own longest, of the first ``--limit`` rag24-mini passages (the cross-encoder: each passage paired
with a rag24-mini-test topic); fp32, no autograd. Reported: the median seconds of ``--repeats`` alternating runs
after a warm-up, the speed-up, and the largest difference between the two outputs.

    flock /tmp/ance-ir-cpu.lock python -m bench.first_tokens --output docs/bench.md
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import cycle

import torch

from ance_ir.cli import positive_int
from ance_ir.datasets import resolve_topics
from ance_ir.modeling.kinds import load_model
from bench.common import alternating_medians, device_label, first_passages, load_average, provenance, publish


@contextmanager
def whole_forward(model: torch.nn.Module) -> Iterator[None]:
    """``model`` runs its whole forward: its own ``training`` flag set, its modules left in eval mode."""
    was_training, model.training = model.training, True
    try:
        yield
    finally:
        model.training = was_training


def batches(model: torch.nn.Module, texts: list[str], queries: list[str] | None, size: int) -> list[dict]:
    """Length-sorted batches of ``texts`` (with ``queries``: of the pairs) as the model's own collation pads them."""
    encoded = model.token_ids(texts, "passage") if queries is None else model.tokenize_pairs(queries, texts)
    collate = (lambda rows: dict(model.pad(encoded, rows))) if queries is None else (
        lambda rows: model.collate(encoded, rows))
    order = sorted(range(len(texts)), key=lambda i: -len(encoded["input_ids"][i]))
    return [collate(order[i:i + size]) for i in range(0, len(order), size)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backbone", default="minilm")
    parser.add_argument("--corpus", default="rag24-mini")
    parser.add_argument("--topics", default="rag24-mini-test")
    parser.add_argument("--limit", type=positive_int, default=200, help="passages (the first N of the corpus)")
    parser.add_argument("--m", type=positive_int, default=4, help="ME-BERT's vectors per passage")
    parser.add_argument("--batch-size", type=positive_int, default=32)
    parser.add_argument("--threads", type=positive_int, default=2)
    parser.add_argument("--repeats", type=positive_int, default=3)
    parser.add_argument("--output", help="Markdown file to update")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    load_before = load_average()
    texts = [p.text for p in first_passages(args.corpus, args.limit)]
    queries = [q for q, _ in zip(cycle(resolve_topics(args.topics).values()), texts, strict=False)]
    torch.manual_seed(0)
    models = {
        "cross-encoder (score of each pair)": (load_model(args.backbone, "cross-encoder").eval(), queries),
        "dense, CLS pooling (passage vectors)": (load_model(args.backbone, "dense", pooling="cls").eval(), None),
        f"ME-BERT, m = {args.m} (passage vectors)": (load_model(args.backbone, "mebert", m=args.m).eval(), None),
    }
    rows = []
    for name, (model, paired) in models.items():
        inputs = batches(model, texts, paired, args.batch_size)
        forward: Callable[[dict], torch.Tensor] = model if paired else model.embed_passages

        def run(forward: Callable[[dict], torch.Tensor] = forward, inputs: list[dict] = inputs) -> torch.Tensor:
            with torch.inference_mode():
                return torch.cat([forward(batch) for batch in inputs])

        def whole(model: torch.nn.Module = model, run: Callable[[], torch.Tensor] = run) -> torch.Tensor:
            with whole_forward(model):
                return run()

        tasks = {"whole": whole, "first": run}
        outputs = {key: task() for key, task in tasks.items()}  # warm-up
        seconds = alternating_medians(tasks, args.repeats)
        difference = float((outputs["whole"] - outputs["first"]).abs().max())
        rows.append(f"| {name} | {seconds['whole']:.2f} | {seconds['first']:.2f} | "
                    f"**{seconds['whole'] / seconds['first']:.2f}×** | {difference:.1e} |")
    layers = models["dense, CLS pooling (passage vectors)"][0].passage_tower.backbone.config.num_hidden_layers
    lines = [f"### The last layer for the first tokens alone, {device_label('cpu')}: {args.backbone} "
             f"({layers} layers), first {args.limit} {args.corpus} passages",
             "",
             f"Batch size {args.batch_size}, length-sorted, {args.threads} threads, fp32; medians of {args.repeats} "
             "alternating runs after a warm-up.",
             "",
             "| model | whole forward (s) | last layer for the first tokens (s) | speed-up | largest difference |",
             "| --- | --- | --- | --- | --- |",
             *rows,
             "", provenance(load_before)]
    body = "\n".join(lines)
    publish(body, args.output, f"first-tokens {device_label('cpu')}")


if __name__ == "__main__":
    main()
