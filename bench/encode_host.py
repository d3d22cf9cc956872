"""Host work of encoding: tokenizing passages twice against once, per 1,000 rag24-mini passages.

On a GPU the model is fast enough that the host's tokenization decides the encoding speed (docs/bench.md
section 5). Two ways of feeding length-sorted batches, timed alternately on the same passages:

* two passes: count every passage's tokens, sort, then tokenize each batch again (``tokenize_passages``): what
  ``encode_passages`` and a training batch with ``passage_buckets > 1`` did before;
* one pass: tokenize the passages once, unpadded (``token_ids``), sort, and pad each batch from those ids
  (``pad``): what both do now.

    flock /tmp/ance-ir-cpu.lock python -m bench.encode_host --output docs/bench.md
"""

from __future__ import annotations

import argparse

import ance_ir  # noqa: F401  (bootstraps Java before Pyserini is imported)
from ance_ir.modeling import DenseEncoder
from bench.common import alternating_medians, device_label, first_passages, load_average, provenance, publish


def two_passes(model: DenseEncoder, texts: list[str], batch_size: int) -> None:
    lengths = [len(ids) for ids in model.token_ids(texts, "passage")["input_ids"]]
    order = sorted(range(len(texts)), key=lambda i: -lengths[i])
    for start in range(0, len(order), batch_size):
        model.tokenize_passages([texts[i] for i in order[start:start + batch_size]])


def one_pass(model: DenseEncoder, texts: list[str], batch_size: int) -> None:
    encoded = model.token_ids(texts, "passage")
    ids = encoded["input_ids"]
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
    for start in range(0, len(order), batch_size):
        model.pad(encoded, order[start:start + batch_size])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--limit", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--output", help="Markdown file to update")
    args = parser.parse_args()
    load = load_average()
    texts = [p.text for p in first_passages("rag24-mini", args.limit)]
    model = DenseEncoder.from_pretrained(args.model, passage_max_length=256)
    seconds = alternating_medians({"two passes": lambda: two_passes(model, texts, args.batch_size),
                                   "one pass": lambda: one_pass(model, texts, args.batch_size)}, args.repeats)
    rows = "".join(f"| {name} | {1000 * s / len(texts):.3f} | {seconds['two passes'] / s:.2f} |\n"
                   for name, s in seconds.items())
    body = (f"### Host tokenization, {device_label('cpu')}: first {len(texts)} rag24-mini passages, `{args.model}`\n\n"
            f"Max length 256, batches of {args.batch_size}, median of {args.repeats} alternating runs.\n\n"
            "| passages tokenized | host ms per passage | × two passes |\n| --- | --- | --- |\n" + rows
            + "\n" + provenance(load))
    publish(body, args.output, f"encode-host {device_label('cpu')}")


if __name__ == "__main__":
    main()
