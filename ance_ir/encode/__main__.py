"""``python -m ance_ir.encode``: encode a corpus into a dense index in Pyserini's layout (or a token index, for a
late-interaction model such as ``colbert``), or merge dense shards.

    python -m ance_ir.encode --corpus rag24-mini --encoder minilm --output indexes/rag24-mini.minilm
    torchrun --nproc_per_node 2 -m ance_ir.encode --corpus C --encoder M --output indexes/x
    python -m ance_ir.encode --corpus C --encoder M --output indexes/x --precision int8   # lossy, opt-in
    python -m ance_ir.encode --corpus C --encoder M --output indexes/x.0 --shard 0/2   # and 1/2, by hand
    python -m ance_ir.encode merge --inputs indexes/x.0 indexes/x.1 --output indexes/x

An ME-BERT model (kind mebert) writes its m vectors per passage as consecutive rows, the docid file repeating
each docid m times (meta.json: vectors_per_passage); python -m ance_ir.search keeps each passage's best vector.
An interrupted run resumes from the chunks finished in OUTPUT.partial. Shard i/n encodes the i-th of n
contiguous slices of the corpus and keeps its raw vectors, so merged shards can be any index type. Under
torchrun each rank encodes shard RANK/WORLD_SIZE (on GPU LOCAL_RANK when there are GPUs) into
OUTPUT.shards, and rank 0 merges them into OUTPUT: the same index as a one-process run (the same vectors to
float rounding at fp32; int8 and bf16 vectors depend on their batch-mates). A resume from OUTPUT.partial refuses a
changed --batch-size or precision, which would change the vectors of the passages still to encode; a finished
torchrun shard is reused at the same precision, --batch-size, --chunk-size and kind of device.

A colbert model writes a token index (every kept token vector, float16, plus faiss k-means centroids; see
``ance_ir.index.token_index``), resumable the same way, in one process (no --shard, no torchrun):

    python -m ance_ir.encode --corpus rag24-mini --encoder train-runs/rag24-mini/colbert \\
        --output indexes/rag24-mini.colbert [--centroids 8192]

A splade model (e.g. the alias splade-tiny) writes a Lucene impact index: the passages' term weights quantised
to integers round(scale * w) in Pyserini's JsonVectorCollection, indexed by Pyserini (-impact -pretokenized),
resumable the same way, in one process (see ance_ir.index.impact):

    python -m ance_ir.encode --corpus rag24-mini --encoder splade-tiny --output indexes/rag24-mini.splade [--scale 100]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ance_ir.cli import (
    ArgumentParser,
    add_import_argument,
    check_apart,
    check_new_folder,
    check_output,
    load_cli_plugins,
    positive_int,
    run_cli,
)
from ance_ir.datasets import resolve_corpus
from ance_ir.encode.corpus_encoder import Shard, encode_corpus
from ance_ir.encode.distributed import Launch, finished_shard, merge_shards, run_ranks, shard_output
from ance_ir.index import INDEX_TYPES, DenseIndex, merge_indexes
from ance_ir.index.records import folder_bytes

if TYPE_CHECKING:  # torch loads once the command line is checked: a Ctrl-C before then is one line
    import torch

    from ance_ir.index.token_index import TokenIndex


def _shard(spec: str) -> Shard:
    try:
        return Shard.parse(spec)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _report(dense: DenseIndex | TokenIndex | dict, output: str) -> None:
    if isinstance(dense, dict):  # an impact index's meta.json
        print(f"wrote {output}: {dense['passages']} passages, {dense['postings_per_passage']:.1f} terms per passage "
              f"(scale {dense['scale']:g}), Lucene impact index {dense['lucene_bytes'] / 2 ** 20:.1f} MiB",
              file=sys.stderr)
        return
    from ance_ir.index.token_index import TokenIndex

    if isinstance(dense, TokenIndex):
        print(f"wrote {dense.folder}: {len(dense)} passages, {dense.meta['tokens']} token vectors of dimension "
              f"{dense.dim}, {dense.meta['centroids']} centroids, {folder_bytes(dense.folder) / 2 ** 20:.1f} MiB",
              file=sys.stderr)
        return
    params = ", ".join(f"{k}={v}" for k, v in dense.meta["index_params"].items())
    print(f"wrote {dense.folder}: {len(dense)} vectors of dimension {dense.dim}, "
          f"{dense.meta['index_type']} index" + (f" ({params})" if params else ""), file=sys.stderr)


def merge_main(argv: list[str]) -> int:
    parser = ArgumentParser(prog="python -m ance_ir.encode merge",
                                     description="merge dense indexes (shards in shard order) into one")
    parser.add_argument("--inputs", nargs="+", required=True, help="index folders to merge")
    parser.add_argument("--output", required=True, help="merged index folder to create")
    parser.add_argument("--index-type", choices=INDEX_TYPES, help="default: the inputs' type")
    parser.add_argument("--force", action="store_true", help="replace an existing output folder")
    parser.add_argument("--quiet", action="store_true", help="no progress bar (shown when building the index takes "
                                                             "more than a few seconds)")
    args = parser.parse_args(argv)
    check_new_folder(args.output, args.force)
    check_apart(args.output, args.inputs, args.inputs)
    _report(merge_indexes(args.inputs, args.output, args.index_type, show_progress=not args.quiet), args.output)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["merge"]:
        return merge_main(argv[1:])
    parser = ArgumentParser(prog="python -m ance_ir.encode", description=__doc__)
    parser.add_argument("--corpus", required=True, help="corpus JSONL/TSV file or dataset name")
    parser.add_argument("--encoder", required=True,
                        help="model dir, training run folder (its final/ model), alias (e.g. minilm) or HF id")
    parser.add_argument("--output", required=True, help="index folder to create, e.g. indexes/NAME")
    parser.add_argument("--index-type", choices=INDEX_TYPES, default="flat", help="faiss index to build")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="passages per forward pass")
    parser.add_argument("--chunk-size", type=positive_int, default=2048, help="passages per resumable chunk")
    parser.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda when available)")
    parser.add_argument("--shard", type=_shard, help="encode only shard i/n (a contiguous slice)")
    parser.add_argument("--pooling", choices=("cls", "mean"), help="override the encoder's pooling")
    parser.add_argument("--normalize", action=argparse.BooleanOptionalAction,
                        help="override whether vectors are L2-normalised")
    parser.add_argument("--passage-max-length", type=positive_int,
                        help="override the encoder's passage length in tokens (e.g. 512 for FirstP documents)")
    parser.add_argument("--precision", default="auto", metavar="{auto,fp32,bf16,fp16,int8}",
                        help="auto (default): bf16 autocast where the CPU/GPU computes bf16 natively, fp16 on "
                             "older GPUs; on other CPUs int8 for normalised vectors (within 0.005 nDCG@10 of "
                             "fp32; unnormalised ones lose more, see docs/bench.md), else fp32; int8: dynamic "
                             "quantisation on the CPU, one scale per output channel (lossy; a batch's activations "
                             "share one scale)")
    parser.add_argument("--threads", type=positive_int, help="torch CPU threads (default: torch's, one per core)")
    parser.add_argument("--centroids", type=positive_int,
                        help="token index: k-means centroids (default 2^floor(log2(16 sqrt(tokens))), ColBERTv2's)")
    parser.add_argument("--scale", type=float,
                        help="impact index: impacts are round(scale * weight) (default 100)")
    parser.add_argument("--force", action="store_true", help="replace an existing output folder")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_import_argument(parser)
    args = parser.parse_args(argv)
    check_output(args.output, folder=True)
    load_cli_plugins(args.imports)
    launch = Launch.from_env()
    if launch is None:
        device = _device(args)
        corpus = resolve_corpus(args.corpus)
        check_apart(args.output, [corpus], models=[args.encoder])
        dense = _encode(args, device, corpus, Path(args.output), args.shard, args.index_type,
                        overwrite=args.force, show_progress=not args.quiet)
        _report(dense, args.output)
        return 0

    output = Path(args.output)

    def prepare() -> Path:  # on rank 0 alone: a dataset name may download the corpus
        if args.shard:
            raise ValueError(f"--shard {args.shard} under torchrun: each rank encodes shard RANK/WORLD_SIZE itself")
        _device(args, launch)
        check_new_folder(output, args.force)
        corpus = resolve_corpus(args.corpus)
        check_apart(output, [corpus], models=[args.encoder])
        return corpus

    def encode_shard(corpus: Path) -> None:
        _encode(args, _device(args, launch), corpus, shard_output(output, launch.shard), launch.shard, "flat",
                overwrite=True, show_progress=launch.rank == 0 and not args.quiet, reuse=True)

    merged = run_ranks(launch, prepare, encode_shard, lambda: merge_shards(output, launch, args.index_type,
                                                                              not args.quiet))
    if merged is not None:
        _report(merged, args.output)
    return 0


def _device(args: argparse.Namespace, launch: Launch | None = None) -> torch.device:
    """The device to encode on (a torchrun rank's own GPU); checks ``--precision`` and sets ``--threads``."""
    import torch

    from ance_ir.modeling.inference import check_precision, resolve_device

    device = resolve_device(args.device, launch.local_rank if launch else None)
    if device.type == "cuda":
        torch.cuda.set_device(device)  # each rank's current device is its own GPU
    check_precision(args.precision, device)  # fail before reading anything
    if args.threads:
        torch.set_num_threads(args.threads)
    return device


def _encode(args: argparse.Namespace, device: torch.device, corpus: Path, output: Path, shard: Shard | None,
            index_type: str, *, overwrite: bool, show_progress: bool,
            reuse: bool = False) -> DenseIndex | TokenIndex | dict | None:
    """Encode ``corpus`` (or ``shard`` of it) into ``output``; with ``reuse``, keep a finished shard there."""
    from ance_ir.modeling.kinds import load_model

    overrides = {k: v for k, v in (("pooling", args.pooling), ("normalize", args.normalize),
                                   ("passage_max_length", args.passage_max_length)) if v is not None}
    encoder = load_model(args.encoder, **overrides)
    if encoder.index not in ("dense", "mebert", "tokens", "impact"):
        use = ("it writes queries: use python -m ance_ir.expand" if encoder.kind == "generator"
               else "it scores pairs: use python -m ance_ir.rerank")
        raise ValueError(f"{args.encoder}: a {encoder.kind!r} model writes no index ({use})")
    encoder.to(device)
    encoder.inference_precision = args.precision
    name = str(Path(args.encoder).resolve()) if Path(args.encoder).is_dir() else args.encoder
    for flag, value, index in (("--centroids", args.centroids, "tokens"), ("--scale", args.scale, "impact")):
        if value is not None and encoder.index != index:
            raise ValueError(f"{flag}: {args.encoder} is a {encoder.kind!r} model; {flag} is for "
                             f"{'token' if index == 'tokens' else 'impact'} indexes")
    if encoder.index == "tokens":
        from ance_ir.encode.token_encoder import encode_tokens

        if shard or Launch.from_env():
            raise ValueError(f"{args.encoder}: a token index is encoded in one process (no --shard, no torchrun)")
        if index_type != "flat":
            raise ValueError(f"--index-type {index_type}: a token index has its own layout (flat only)")
        return encode_tokens(corpus, encoder, output, encoder_name=name, batch_size=args.batch_size,
                             chunk_size=args.chunk_size, centroids=args.centroids, overwrite=overwrite,
                             show_progress=show_progress)
    if encoder.index == "impact":
        from ance_ir.encode.impact_encoder import encode_impacts
        from ance_ir.modeling.splade import DEFAULT_SCALE

        if shard or Launch.from_env():
            raise ValueError(f"{args.encoder}: an impact index is encoded in one process (no --shard, no torchrun)")
        if index_type != "flat":
            raise ValueError(f"--index-type {index_type}: an impact index is a Lucene index (flat only)")
        scale = DEFAULT_SCALE if args.scale is None else args.scale
        return encode_impacts(corpus, encoder, output, encoder_name=name, scale=scale, batch_size=args.batch_size,
                              chunk_size=args.chunk_size, threads=args.threads or 1,
                              overwrite=overwrite, show_progress=show_progress)
    if reuse and shard and finished_shard(output, shard, corpus, name, encoder, args.batch_size,
                                                args.chunk_size):
        print(f"reused finished shard {output}", file=sys.stderr)
        return None
    return encode_corpus(corpus, encoder, output, encoder_name=name, index_type=index_type,
                         batch_size=args.batch_size, chunk_size=args.chunk_size, shard=shard,
                         overwrite=overwrite, show_progress=show_progress)


if __name__ == "__main__":
    run_cli(main)
