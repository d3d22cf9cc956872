"""ColBERTv2 residual compression of a token index: ``python -m ance_ir.index.compress``.

    python -m ance_ir.index.compress --index indexes/rag24-mini.colbert --bits 2 \\
        --output indexes/rag24-mini.colbert.2bit

Each token vector is kept as its centroid (the index's, already in ``codes.npy``) plus its residual
``vector - centroid`` quantised to ``bits`` (1 or 2) per dimension: the bucket cutoffs are the quantiles
``1/2^b, ..., (2^b - 1)/2^b`` of all residual values (every dimension pooled, over a sample of tokens), and a
bucket decodes to its weight, the quantile at its middle ``(i + 1/2)/2^b``. The bucket numbers are bit-packed
(``residuals.npy``, uint8 ``[T, D b / 8]``); ``vectors.npy`` is dropped. Decompression (centroid + bucket weights,
L2-normalised) gives the vectors that search scores exactly by MaxSim, as it scores an uncompressed index.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from tqdm import tqdm

from ance_ir.cli import ArgumentParser, check_apart, check_new_folder, positive_int, run_cli
from ance_ir.index.records import folder_bytes
from ance_ir.index.token_index import TokenIndex, load_token_index, write_token_index

BITS = (1, 2)
_BLOCK = 65_536


def bucket_settings(residuals: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """The bucket cutoffs ``[2^b - 1]`` and weights ``[2^b]`` of residual values (quantiles of all of them)."""
    levels = 2 ** bits
    values = residuals.ravel()
    cutoffs = np.quantile(values, np.arange(1, levels) / levels)
    weights = np.quantile(values, (np.arange(levels) + 0.5) / levels)
    return cutoffs.astype(np.float32), weights.astype(np.float32)


def pack(residuals: np.ndarray, cutoffs: np.ndarray, bits: int) -> np.ndarray:
    """Residuals ``[n, D]`` as their bucket numbers, ``bits`` each, packed into uint8 ``[n, D * bits / 8]``."""
    buckets = np.searchsorted(cutoffs, residuals).astype(np.uint8)
    planes = (buckets[..., None] >> np.arange(bits - 1, -1, -1, dtype=np.uint8)) & 1  # most significant first
    return np.packbits(planes.reshape(len(residuals), -1), axis=1)


def unpack(packed: np.ndarray, bits: int, dim: int) -> np.ndarray:
    """The bucket numbers ``[n, dim]`` that :func:`pack` packed."""
    planes = np.unpackbits(packed, axis=1, count=dim * bits).reshape(len(packed), dim, bits)
    return (planes << np.arange(bits - 1, -1, -1, dtype=np.uint8)).sum(axis=2, dtype=np.uint8)


_GROUP = 4  # dimensions decoded by one table lookup: 4 float32 weights, read as one 16-byte complex128


def _weight_table(weights: np.ndarray, bits: int) -> np.ndarray:
    """complex128 ``[2^(4 bits)]``: for every key of 4 dimensions' packed buckets, their 4 float32 weights."""
    keys = np.arange(2 ** (_GROUP * bits), dtype=np.uint8)[:, None] << (8 - _GROUP * bits)
    return np.ascontiguousarray(weights[unpack(keys, bits, _GROUP)], dtype=np.float32).view(np.complex128)[:, 0]


def residual_weights(packed: np.ndarray, weights: np.ndarray, bits: int, dim: int) -> np.ndarray:
    """float32 ``[n, dim]``: each dimension's bucket weight, one table lookup per 4 dimensions (a 2-bit byte, or
    a 1-bit nibble), several times faster than unpacking bits and indexing ``weights`` dimension by dimension."""
    keys = packed if bits == 2 else np.stack([packed >> 4, packed & 15], axis=-1)
    return _weight_table(weights, bits)[keys].view(np.float32).reshape(len(packed), -1)[:, :dim]  # drop padding


def decompress(codes: np.ndarray, packed: np.ndarray, centroids: np.ndarray, weights: np.ndarray,
               bits: int) -> np.ndarray:
    """Token vectors (float32, unit length) from their centroids and packed residual buckets."""
    vectors = centroids[np.asarray(codes, dtype=np.int64)]
    vectors += residual_weights(np.asarray(packed), weights, bits, centroids.shape[1])
    norms = np.sqrt(np.einsum("ij,ij->i", vectors, vectors))
    vectors /= np.maximum(norms, 1e-12)[:, None]
    return vectors


def compress_index(source: str | Path, output: str | Path, bits: int, sample: int = 2 ** 16, seed: int = 0,
                   show_progress: bool = True) -> TokenIndex:
    """Write a ``bits``-bit compressed copy of the uncompressed token index ``source`` at ``output``."""
    if bits not in BITS:
        raise ValueError(f"bits must be one of {', '.join(map(str, BITS))}, got {bits}")
    index = load_token_index(source)
    if index.vectors is None:
        raise ValueError(f"{source}: is compressed already; compress the uncompressed token index")
    tokens = len(index.codes)
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(tokens, size=min(sample, tokens), replace=False))
    cutoffs, weights = bucket_settings(index.token_vectors(rows) - index.centroids[index.codes[rows]], bits)
    packed = np.empty((tokens, index.dim * bits // 8 + (index.dim * bits % 8 > 0)), dtype=np.uint8)
    for start in tqdm(range(0, tokens, _BLOCK), desc=f"compress {bits}-bit", unit="block",
                      disable=not show_progress, file=sys.stderr):
        block = slice(start, start + _BLOCK)
        packed[block] = pack(index.token_vectors(block) - index.centroids[index.codes[block]], cutoffs, bits)
    meta = {**index.meta, "compression": {"bits": bits, "cutoffs": cutoffs.tolist(), "weights": weights.tolist(),
                                          "source": str(Path(source).resolve())}}
    return write_token_index(output, index.docids, index.doclens, index.centroids, np.asarray(index.codes), meta,
                             residuals=packed)


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m ance_ir.index.compress", description=__doc__)
    parser.add_argument("--index", required=True, help="uncompressed token index folder (python -m ance_ir.encode "
                                                       "with a colbert model)")
    parser.add_argument("--output", required=True, help="compressed token index folder to create")
    parser.add_argument("--bits", type=int, choices=BITS, default=2, help="residual bits per dimension")
    parser.add_argument("--sample", type=positive_int, default=2 ** 16,
                        help="tokens whose residuals set the bucket cutoffs and weights")
    parser.add_argument("--force", action="store_true", help="replace an existing output folder")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    check_new_folder(args.output, args.force)
    check_apart(args.output, [args.index], [args.index])
    compressed = compress_index(args.index, args.output, args.bits, args.sample, show_progress=not args.quiet)
    before, after = folder_bytes(args.index), folder_bytes(args.output)
    print(f"wrote {args.output}: {compressed.meta['tokens']} token vectors, {args.bits}-bit residuals; "
          f"{after / 2 ** 20:.1f} MiB against {before / 2 ** 20:.1f} MiB uncompressed (fp16), ratio "
          f"{after / before:.3f} (1/{before / after:.1f})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    run_cli(main)
