"""Fusion speed: ``ance_ir.fusion``'s RRF and interpolation against Pyserini's on large runs.

Two seeded synthetic runs of ``--queries`` queries with ``--hits`` hits each (docids drawn from a 1M-passage
corpus, so the lists overlap about as much as two unrelated systems' do), fused at depth and k = ``--hits``. Each
fusion runs ``--repeats`` times in alternating order; the median seconds are reported. In process: the fusion
function alone on the runs in memory (Pyserini's ``reciprocal_rank_fusion`` and ``interpolation`` on its
``TrecRun`` frames, built from the same lists outside the timing, and once inside it, as ance-ir's RRF called it
before). End to end: the CLIs reading the two TREC files
and writing the fused one (``python -m ance_ir.fusion`` against ``python -m pyserini.fusion``), process start
included.

    flock /tmp/ance-ir-cpu.lock python -m bench.fusion_speed --output docs/bench.md
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from ance_ir.data import Run, write_run
from ance_ir.fusion import interpolate, reciprocal_rank_fusion
from bench.common import alternating_medians, load_average, provenance, write_section


def synthetic_run(queries: int, hits: int, seed: int) -> Run:
    """``hits`` distinct docids per query from a million, with descending scores."""
    rng = random.Random(seed)
    return {f"q{q}": [(f"d{d}", float(hits - rank)) for rank, d in enumerate(rng.sample(range(1_000_000), hits))]
            for q in range(queries)}


def trec_run(run: Run):
    from pyserini.trectools import TrecRun

    return TrecRun.from_list([(q, "Q0", d, rank, s, "r") for q, hits in run.items()
                              for rank, (d, s) in enumerate(hits, start=1)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=3000)
    parser.add_argument("--hits", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--output", default="docs/bench.md")
    args = parser.parse_args()
    from pyserini.fusion import interpolation
    from pyserini.fusion import reciprocal_rank_fusion as pyserini_rrf

    load = load_average()
    a, b = (synthetic_run(args.queries, args.hits, seed) for seed in (1, 2))
    ta, tb = trec_run(a), trec_run(b)
    n = args.hits
    in_process = alternating_medians({
        "rrf, ance-ir": lambda: reciprocal_rank_fusion([a, b], 60, n, n),
        "rrf, Pyserini": lambda: pyserini_rrf([ta, tb], rrf_k=60, depth=n, k=n),
        "rrf from lists, Pyserini": lambda: pyserini_rrf([trec_run(a), trec_run(b)], rrf_k=60, depth=n, k=n),
        "interpolation, ance-ir": lambda: interpolate(a, b, 0.5, 0.5, n, n),
        "interpolation, Pyserini": lambda: interpolation([ta, tb], alpha=0.5, depth=n, k=n),
    }, args.repeats)
    with tempfile.TemporaryDirectory() as tmp:
        files = [str(Path(tmp) / name) for name in ("a.trec", "b.trec")]
        write_run(a, files[0])
        write_run(b, files[1])
        out = str(Path(tmp) / "fused.trec")

        def cli(module: str, *flags: str) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, "-m", module, "--runs", *files, "--output", out, "--method", "rrf",
                                   *flags], check=True, capture_output=True)

        end_to_end = alternating_medians({
            "rrf, ance-ir": lambda: cli("ance_ir.fusion", "--hits", str(n)),
            "rrf, Pyserini": lambda: cli("pyserini.fusion", "--k", str(n), "--depth", str(n)),
        }, args.repeats)
    lines = ["| fusion of two runs | ance-ir (s) | Pyserini (s) | Pyserini / ance-ir |", "| --- | --- | --- | --- |"]
    for label, times, method, peer in (
            ("RRF, in process", in_process, "rrf", "rrf"),
            ("RRF, in process, Pyserini's frames built from the lists (ance-ir's RRF before this benchmark)",
             in_process, "rrf", "rrf from lists"),
            ("interpolation, in process", in_process, "interpolation", "interpolation"),
            ("RRF, CLI end to end (read, fuse, write)", end_to_end, "rrf", "rrf")):
        ours, theirs = times[f"{method}, ance-ir"], times[f"{peer}, Pyserini"]
        lines.append(f"| {label} | {ours:.2f} | {theirs:.2f} | {theirs / ours:.1f}x |")
    body = (f"## 11. Fusion of large runs ({args.queries:,} queries x {args.hits:,} hits)\n\n"
            + __doc__.split("\n\n")[1] + "\n\n" + "\n".join(lines) + "\n\n" + provenance(load))
    write_section(args.output, "bench-fusion-speed", body)


if __name__ == "__main__":
    main()
