"""Gradient cache: peak training-step memory and examples/s against batch size, with and without the cache.

Each (model, batch size, chunk) runs in a fresh process: the model is loaded, the batch tokenized, then ``--steps``
training steps (forward, in-batch NLL over query, positive and one hard negative per example, backward, AdamW)
run through the contrastive task's own code (``ContrastiveTask.encode_inputs``, ``group_loss`` path:
``dense_group_scores`` + ``nll``; the cache: :func:`ance_ir.train.grad_cache.grad_cache_loss`). Memory is the
step's own: on CPU the peak resident set (``VmHWM``) less the resident set before the first step; on a GPU
``torch.cuda.max_memory_allocated`` less the memory allocated before it. Examples/s is over the steps after the
first. The texts are the corpus's first passages (passage ``i`` is example ``i``'s positive, passage ``i + B`` its
negative, the first 12 words of passage ``i`` its query).

    flock /tmp/ance-ir-cpu.lock python -m bench.grad_cache_memory --output docs/bench.md
    python -m bench.grad_cache_memory --device cuda --models bert-tiny minilm --output docs/bench.md
"""

from __future__ import annotations

import argparse
import json
import sys
import time

MARKER = "grad-cache-memory"


def child(model: str, device: str, batch: int, chunk: int, steps: int, corpus: str) -> dict:
    """One configuration's measurement (run in a fresh process)."""
    import torch

    from ance_ir.modeling import DenseEncoder
    from ance_ir.train.collator import Batch, Collator, Group, in_batch_mask
    from ance_ir.train.grad_cache import grad_cache_loss
    from ance_ir.train.loss import LOSSES, dense_group_scores
    from ance_ir.train.modeling import DualEncoderModule
    from ance_ir.train.trainer import device_passage_buckets
    from bench.common import first_passages, peak_rss_mib

    torch.manual_seed(0)
    passages = [(p.docid, p.text) for p in first_passages(corpus, 2 * batch)]
    texts = dict(passages)
    queries = {docid: " ".join(text.split()[:12]) for docid, text in passages[:batch]}
    groups = [Group(passages[i][0], passages[i][0], (passages[i + batch][0],)) for i in range(batch)]
    encoder = DenseEncoder.from_pretrained(model).to(device)
    encoder.train()
    module = DualEncoderModule(encoder)
    collator = Collator(encoder, queries, texts, passage_buckets=device_passage_buckets(device))
    inputs: Batch | list[Batch] = ([collator(groups[i:i + chunk]) for i in range(0, batch, chunk)] if chunk
                                   else collator(groups))
    mask = in_batch_mask(groups, {g.qid: frozenset({g.positive}) for g in groups}).to(device)
    nll = LOSSES["nll"](0.05)
    optimizer = torch.optim.AdamW(encoder.parameters(), lr=1e-5)

    def to_device(b: Batch) -> Batch:
        return Batch(b.queries.to(device), tuple(p.to(device) for p in b.passages), b.restore, b.group_size)

    inputs = [to_device(b) for b in inputs] if chunk else to_device(inputs)

    def encode(b: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        q, p = module(dict(b.queries), [dict(x) for x in b.passages], b.restore)
        return q.float(), p.float()

    def loss_of(q: torch.Tensor, p: torch.Tensor):
        from ance_ir.train.task import StepLoss

        return StepLoss(nll(dense_group_scores(q, p, 2, True, mask, None)))

    def step() -> None:
        out = grad_cache_loss(encode, inputs, loss_of, torch.device(device)) if chunk else loss_of(*encode(inputs))
        out.loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
    else:
        base = _rss_mib()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        if cuda:
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    peak = (torch.cuda.max_memory_allocated(device) - base) / 2**20 if cuda else peak_rss_mib() - base
    rate = batch * (len(times) - 1) / sum(times[1:])
    return {"model": model, "batch": batch, "chunk": chunk, "peak_mib": peak, "examples_per_s": rate}


def _rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["bert-tiny"])
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=[8, 16, 32, 64, 128, 256])
    parser.add_argument("--chunk", type=int, default=8, help="the cache's chunk (queries per chunk)")
    parser.add_argument("--steps", type=int, default=3, help="training steps per configuration (the first untimed)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--corpus", default="rag24-mini")
    parser.add_argument("--output", help="Markdown file to write the table into")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        model, batch, chunk = args.child.split(",")
        print(json.dumps(child(model, args.device, int(batch), int(chunk), args.steps, args.corpus)))
        return
    from bench.common import load_average, provenance, publish, run_child

    load = load_average()
    rows = []
    for model in args.models:
        for batch in args.batch_sizes:
            for chunk in (0, args.chunk):
                if chunk >= batch:
                    continue
                _, _, out = run_child([sys.executable, "-m", "bench.grad_cache_memory", "--child",
                                       f"{model},{batch},{chunk}", "--device", args.device, "--steps",
                                       str(args.steps), "--corpus", args.corpus])
                rows.append(json.loads(out.strip().splitlines()[-1]))
                print(json.dumps(rows[-1]), flush=True)
    unit = "GPU MiB (max_memory_allocated)" if args.device.startswith("cuda") else "MiB (peak RSS)"
    lines = [f"### Gradient cache: step memory against batch size ({args.device})", "",
             f"In-batch NLL, query + positive + 1 hard negative per example, AdamW; chunk {args.chunk} queries; "
             f"step memory in {unit} above what was held before the first step; examples/s over "
             f"{args.steps - 1} timed steps (`bench/grad_cache_memory.py`).", "",
             "| model | batch | plain MiB | cache MiB | plain ex/s | cache ex/s |",
             "| --- | --- | --- | --- | --- | --- |"]
    for model in args.models:
        for batch in args.batch_sizes:
            plain = next((r for r in rows if (r["model"], r["batch"], r["chunk"]) == (model, batch, 0)), None)
            cached = next((r for r in rows if (r["model"], r["batch"], r["chunk"]) == (model, batch, args.chunk)),
                          None)
            if plain is None:
                continue
            lines.append(f"| {model} | {batch} | {plain['peak_mib']:.0f} | "
                         f"{cached['peak_mib']:.0f} | {plain['examples_per_s']:.1f} | "
                         f"{cached['examples_per_s']:.1f} |" if cached else
                         f"| {model} | {batch} | {plain['peak_mib']:.0f} | – | {plain['examples_per_s']:.1f} | – |")
    body = "\n".join(lines) + "\n\n" + provenance(load)
    publish(body, args.output, f"{MARKER}-{args.device.split(':')[0]}")


if __name__ == "__main__":
    main()
