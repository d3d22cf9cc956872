"""``python -m ance_ir.encode``: encode a corpus into a dense index in Pyserini's layout, or merge shards.

    python -m ance_ir.encode --corpus rag24-mini --encoder minilm --output indexes/rag24-mini.minilm
    python -m ance_ir.encode --corpus C --encoder M --output indexes/x.0 --shard 0/2   # and 1/2
    python -m ance_ir.encode merge --inputs indexes/x.0 indexes/x.1 --output indexes/x
    python -m ance_ir.encode --corpus C --encoder M --output indexes/x --precision int8   # lossy, opt-in

An interrupted run resumes from the chunks finished in OUTPUT.partial. Shard i/n encodes the i-th of n
contiguous slices of the corpus and keeps its raw vectors, so merged shards can be any index type.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ance_ir.cli import run_cli
from ance_ir.datasets import resolve_corpus
from ance_ir.encode.corpus_encoder import Shard, encode_corpus
from ance_ir.index import INDEX_TYPES, DenseIndex, merge_indexes


def _shard(spec: str) -> Shard:
    try:
        return Shard.parse(spec)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _positive(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    return int(value)


def _report(dense: DenseIndex) -> None:
    print(f"wrote {dense.folder}: {len(dense)} vectors of dimension {dense.dim}, "
          f"{dense.meta['index_type']} index {dense.meta['index_params']}", file=sys.stderr)


def merge_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m ance_ir.encode merge",
                                     description="merge dense indexes (shards in shard order) into one")
    parser.add_argument("--inputs", nargs="+", required=True, help="index folders to merge")
    parser.add_argument("--output", required=True, help="merged index folder to create")
    parser.add_argument("--index-type", choices=INDEX_TYPES, help="default: the inputs' type")
    args = parser.parse_args(argv)
    _report(merge_indexes(args.inputs, args.output, args.index_type))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["merge"]:
        return merge_main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m ance_ir.encode", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", required=True, help="corpus JSONL/TSV file or dataset name")
    parser.add_argument("--encoder", required=True, help="model dir, alias (e.g. minilm) or Hugging Face id")
    parser.add_argument("--output", required=True, help="index folder to create, e.g. indexes/NAME")
    parser.add_argument("--index-type", choices=INDEX_TYPES, default="flat")
    parser.add_argument("--batch-size", type=_positive, default=32)
    parser.add_argument("--chunk-size", type=_positive, default=2048, help="passages per resumable chunk")
    parser.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda when available)")
    parser.add_argument("--shard", type=_shard, help="encode only shard i/n (a contiguous slice)")
    parser.add_argument("--pooling", choices=("cls", "mean"), help="override the encoder's pooling")
    parser.add_argument("--normalize", action=argparse.BooleanOptionalAction,
                        help="override whether vectors are L2-normalised")
    parser.add_argument("--precision", default="auto", metavar="{auto,fp32,bf16,fp16,int8}",
                        help="auto (default): bf16 autocast where the CPU/GPU computes bf16 natively (nDCG@10 "
                             "within 0.005 of fp32, see docs/bench.md), fp16 on older GPUs, else fp32; "
                             "int8: dynamic quantisation on the CPU (faster on CPUs without bf16, lossy)")
    parser.add_argument("--threads", type=_positive, help="torch CPU threads (default: torch's, one per core)")
    parser.add_argument("--force", action="store_true", help="replace an existing output folder")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)

    import torch

    from ance_ir.modeling import DenseEncoder, resolve_precision

    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {args.device}: torch sees no CUDA GPU")
    resolve_precision(args.precision, device)  # fail before reading anything
    corpus = resolve_corpus(args.corpus)
    if args.threads:
        torch.set_num_threads(args.threads)
    overrides = {k: v for k, v in (("pooling", args.pooling), ("normalize", args.normalize)) if v is not None}
    encoder = DenseEncoder.from_pretrained(args.encoder, **overrides).to(device)
    encoder.inference_precision = args.precision
    name = str(Path(args.encoder).resolve()) if Path(args.encoder).is_dir() else args.encoder
    dense = encode_corpus(corpus, encoder, args.output, encoder_name=name, index_type=args.index_type,
                          batch_size=args.batch_size, chunk_size=args.chunk_size, shard=args.shard,
                          overwrite=args.force, show_progress=not args.quiet)
    _report(dense)
    return 0


if __name__ == "__main__":
    run_cli(main)
