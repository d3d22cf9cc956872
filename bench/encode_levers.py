"""What each CPU lever buys for ance-ir corpus encoding, and where the time goes.

Passages/s on the first ``--limit`` passages (median of ``--repeats`` alternating runs, all in one process):
fp32 in corpus order (no length sorting) and length-sorted; bf16 autocast; int8 dynamic quantisation;
ONNX Runtime fp32 and int8 (the same model exported with ``torch.onnx.export``); the whole model cast to bf16
(no autocast); 1 vs 2 torch threads; batch sizes. Then a ``torch.profiler`` table of the top operators in fp32
and bf16, and a bar chart.

    flock /tmp/ance-ir-cpu.lock python -m bench.encode_levers --output docs/bench.md
"""

from __future__ import annotations

import argparse
import copy
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

import ance_ir  # noqa: F401
from ance_ir.modeling import DenseEncoder, model_precision
from bench.common import alternating_medians, device_label, first_passages, load_average, provenance, publish

Encode = Callable[[list[str]], np.ndarray]


class _LastHidden(torch.nn.Module):
    """The backbone with positional inputs and one output, for the ONNX exporter."""

    def __init__(self, backbone: torch.nn.Module):
        super().__init__()
        self.backbone = backbone

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                token_type_ids: torch.Tensor) -> torch.Tensor:
        return self.backbone(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids).last_hidden_state


def export_onnx(encoder: DenseEncoder, folder: Path) -> dict[str, Path]:
    """fp32 and int8 (dynamic, per-channel weights) ONNX files of the encoder's backbone."""
    import warnings

    from onnxruntime.quantization import QuantType, quantize_dynamic

    names = ["input_ids", "attention_mask", "token_type_ids"]
    sample = encoder.tokenize_passages(["an example passage", "another one"])
    fp32, int8 = folder / "model.onnx", folder / "model.int8.onnx"
    with warnings.catch_warnings(), torch.inference_mode():
        warnings.simplefilter("ignore")
        torch.onnx.export(_LastHidden(encoder.passage_tower.backbone).eval(), tuple(sample[k] for k in names),
                          str(fp32), input_names=names, output_names=["last_hidden_state"], dynamo=False,
                          dynamic_axes={k: {0: "batch", 1: "tokens"} for k in [*names, "last_hidden_state"]},
                          opset_version=17)
    quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8, per_channel=True)
    return {"fp32": fp32, "int8": int8}


def onnx_encoder(encoder: DenseEncoder, path: Path, threads: int, batch_size: int) -> Encode:
    """Length-sorted batches through ONNX Runtime, then the encoder's pooling (and L2 normalisation)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    max_length = encoder.config.passage_max_length

    def encode(texts: list[str]) -> np.ndarray:
        lengths = [len(ids) for ids in encoder.tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]]
        order = sorted(range(len(texts)), key=lambda i: -lengths[i])
        out = np.empty((len(texts), encoder.dim), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            batch = {k: v.numpy() for k, v in encoder.tokenize_passages([texts[i] for i in rows]).items()}
            hidden = session.run(None, batch)[0]
            if encoder.config.pooling == "cls":
                pooled = hidden[:, 0]
            else:
                mask = batch["attention_mask"][..., None].astype(np.float32)
                pooled = (hidden * mask).sum(1) / mask.sum(1)
            out[rows] = pooled / np.linalg.norm(pooled, axis=1, keepdims=True) if encoder.config.normalize else pooled
        return out
    return encode


def min_cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(((a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))).min())


def with_threads(threads: int, encode: Encode) -> Encode:
    def run(texts: list[str]) -> np.ndarray:
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            return encode(texts)
        finally:
            torch.set_num_threads(before)
    return run


def levers(encoder: DenseEncoder, onnx: dict[str, Path] | None, threads: int, batch_size: int,
           batch_sizes: list[int], auto: str) -> dict[str, Encode]:
    """Label -> encode function, one per lever setting; ``onnx``: the ONNX files, or None to leave ONNX out;
    ``auto``: the mode ``auto`` means here."""

    def ours(precision: str, bs: int = batch_size, model: DenseEncoder = encoder) -> Encode:
        return lambda texts: model.encode_passages(texts, batch_size=bs, precision=precision)

    def corpus_order(texts: list[str]) -> np.ndarray:  # one call per batch: no sorting across batches
        return np.concatenate([encoder.encode_passages(texts[i:i + batch_size], batch_size=batch_size)
                               for i in range(0, len(texts), batch_size)])

    def here(mode: str) -> str:
        return " (auto here)" if mode == auto else ""

    cast = copy.deepcopy(encoder).to(torch.bfloat16)  # what sentence-transformers' bf16 model_kwargs give
    tasks = {
        "fp32, corpus order": corpus_order,
        "fp32, length-sorted (baseline)": ours("fp32"),
        f"bf16 autocast{here('bf16')}": ours("bf16"),
        "bf16 weights (model cast to bf16, no autocast)": ours("fp32", model=cast),
        f"int8 dynamic quantisation, a scale per output channel{here('int8')}": ours("int8"),
        "int8 dynamic quantisation, one scale per tensor": ours("fp32", model=per_tensor_int8(encoder)),
    }
    if onnx:
        tasks["ONNX Runtime fp32"] = onnx_encoder(encoder, onnx["fp32"], threads, batch_size)
        tasks["ONNX Runtime int8 (per-channel)"] = onnx_encoder(encoder, onnx["int8"], threads, batch_size)
    if threads > 1:
        tasks["fp32, 1 thread"] = with_threads(1, ours("fp32"))
        tasks[f"{auto}, 1 thread"] = with_threads(1, ours(auto))
    for bs in batch_sizes:
        if bs != batch_size:
            tasks[f"{auto}, batch size {bs}"] = ours(auto, bs)
    return tasks


def per_tensor_int8(encoder: DenseEncoder) -> DenseEncoder:
    """The encoder with every ``Linear`` quantised to int8 with one weight scale per tensor (the int8 mode before
    it took one scale per output channel), run as a plain model."""
    from torch.ao.quantization import quantize_dynamic

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return quantize_dynamic(copy.deepcopy(encoder).eval(), {torch.nn.Linear}, dtype=torch.qint8)


def profile(encoder: DenseEncoder, texts: list[str], precision: str, top: int) -> list[tuple[str, float, int]]:
    """(operator, % of self CPU time, calls) of the ``top`` operators while encoding ``texts``."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    encoder.encode_passages(texts[:4], precision=precision)
    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        encoder.encode_passages(texts, batch_size=len(texts), precision=precision)
    events = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
    total = sum(e.self_cpu_time_total for e in events)
    return [(e.key, 100 * e.self_cpu_time_total / total, e.count) for e in events[:top]]


def plot(rates: dict[str, float], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(rates)[::-1]
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(labels) + 1.2))
    ax.barh(labels, [rates[k] for k in labels], color="tab:blue")
    for i, label in enumerate(labels):
        ax.text(rates[label], i, f" {rates[label]:.1f}", va="center", fontsize=8)
    ax.set_xlabel("passages/s (higher is better)")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="rag24-mini")
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--limit", type=int, default=500, help="passages timed (the first N of the corpus)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[8, 16, 64, 128])
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--top", type=int, default=8, help="operators listed in the profile")
    parser.add_argument("--output", help="Markdown file to update (the chart goes beside it)")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    load_before = load_average()
    texts = [p.text for p in first_passages(args.corpus, args.limit)]
    encoder = DenseEncoder.from_pretrained(args.model)
    reference = encoder.encode_passages(texts[:args.batch_size])
    label = device_label("cpu")
    auto = model_precision(encoder, "auto")
    with tempfile.TemporaryDirectory() as tmp:
        # ONNX Runtime picks its kernels from the CPU's flags, past any cap on PyTorch's: not an AVX2 number
        onnx = export_onnx(encoder, Path(tmp)) if label == "cpu" else None
        tasks = levers(encoder, onnx, args.threads, args.batch_size, args.batch_sizes, auto)
        agreement = {k: min_cosine(f(texts[:args.batch_size]), reference) for k, f in tasks.items()}
        seconds = alternating_medians({k: (lambda f=f: f(texts)) for k, f in tasks.items()}, args.repeats)
    rates = {k: len(texts) / s for k, s in seconds.items()}
    base = rates["fp32, length-sorted (baseline)"]
    lines = ["| lever | passages/s | × fp32 baseline | min cos vs fp32 |", "| --- | --- | --- | --- |"]
    lines += [f"| {k} | {r:.1f} | {r / base:.2f} | {agreement[k]:.5f} |" for k, r in rates.items()]
    probe = sorted(texts, key=len, reverse=True)[:args.batch_size]
    profiles = {p: profile(encoder, probe, p, args.top) for p in ("fp32", auto)}
    prof_lines = [f"| rank | fp32: operator | % self CPU | {auto}: operator | % self CPU |", "| --- " * 5 + "|"]
    for i, (a, b) in enumerate(zip(profiles["fp32"], profiles[auto], strict=True)):
        prof_lines.append(f"| {i + 1} | `{a[0]}` | {a[1]:.1f} | `{b[0]}` | {b[1]:.1f} |")
    chart = ""
    if args.output:
        png = Path(args.output).with_name("bench-encode-levers.png" if label == "cpu" else
                                          f"bench-encode-levers-{label}.png")
        plot(rates, png, f"ance-ir encoding levers, first {len(texts)} rag24-mini passages, {args.threads} threads")
        chart = f"\n![encoding levers]({png.name})\n"
    skipped = "" if onnx else " ONNX Runtime is left out: it picks its kernels from the CPU's flags, not PyTorch's cap."
    body = (f"### CPU encoding levers, {label}: first {len(texts)} rag24-mini passages\n\n"
            f"`{args.model}`, {encoder.config.pooling} pooling, max length {encoder.config.passage_max_length}, "
            f"batch size {args.batch_size} unless stated, "
            f"{args.threads} threads unless stated; median of {args.repeats} alternating runs in one process. "
            f"min cos: over the first batch, against fp32.{skipped}\n\n" + "\n".join(lines) + "\n" + chart +
            f"\nWhere the time goes: `torch.profiler`, one batch of the {len(probe)} longest of these passages "
            "(operators by self CPU time; tokenisation is outside the operators):\n\n" + "\n".join(prof_lines)
            + "\n\n" + provenance(load_before, ("onnxruntime", "onnx")))
    publish(body, args.output, f"encode-levers {label}")


if __name__ == "__main__":
    main()
