"""Fusion speed: `ance_ir.fusion` against Pyserini's fusion and against ance-ir's own before, on large runs.

Two seeded synthetic runs of ``--queries`` queries with ``--hits`` hits each (docids drawn from a 1M-passage
corpus, so the lists overlap about as much as two unrelated systems' do), fused at depth and k = ``--hits``. Each
task runs ``--repeats`` times in alternating order; the median seconds are reported. In process: the fusion
functions alone on runs in memory (ance-ir's on its columns, ``RunTable``, and on dictionaries, the ``Run`` that
search hands to fusion; Pyserini's ``reciprocal_rank_fusion`` and ``interpolation`` on its ``TrecRun`` frames,
built outside the timing). Reading: one run file into memory, by ``read_run`` and by the line reader it falls back
to for files that are not plain. End to end: the CLIs reading the two TREC files and writing the fused one, process
start included: ``python -m ance_ir.fusion`` against ``python -m pyserini.fusion`` and against ance-ir's own CLI
at commit ``--before`` (the fusion issue 11 asked to make 10x faster; extracted with ``git archive``).

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
from ance_ir.data.runs import RunTable, read_run, read_run_lines
from ance_ir.fusion import interpolate, interpolate_tables, reciprocal_rank_fusion, reciprocal_rank_fusion_tables
from bench.common import alternating_medians, load_average, provenance, write_section

ROOT = Path(__file__).resolve().parents[1]


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
    parser.add_argument("--before", default="f81dee9~1", help="the commit whose fusion CLI is the 'before' row")
    parser.add_argument("--output", default="docs/bench.md")
    args = parser.parse_args()
    from pyserini.fusion import interpolation
    from pyserini.fusion import reciprocal_rank_fusion as pyserini_rrf

    load = load_average()
    a, b = (synthetic_run(args.queries, args.hits, seed) for seed in (1, 2))
    ta, tb = RunTable.from_run(a), RunTable.from_run(b)
    fa, fb = trec_run(a), trec_run(b)
    n = args.hits
    in_process = alternating_medians({
        "rrf tables": lambda: reciprocal_rank_fusion_tables([ta, tb], 60, n, n),
        "rrf dicts": lambda: reciprocal_rank_fusion([a, b], 60, n, n),
        "rrf Pyserini": lambda: pyserini_rrf([fa, fb], rrf_k=60, depth=n, k=n),
        "interpolation tables": lambda: interpolate_tables(ta, tb, 0.5, 0.5, n, n),
        "interpolation dicts": lambda: interpolate(a, b, 0.5, 0.5, n, n),
        "interpolation Pyserini": lambda: interpolation([fa, fb], alpha=0.5, depth=n, k=n),
    }, args.repeats)
    with tempfile.TemporaryDirectory() as tmp:
        files = [str(Path(tmp) / name) for name in ("a.trec", "b.trec")]
        write_run(a, files[0])
        write_run(b, files[1])
        out = str(Path(tmp) / "fused.trec")
        before = Path(tmp) / "before"
        before.mkdir()
        archive = subprocess.run(["git", "archive", args.before, "ance_ir"], cwd=ROOT, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(before)], input=archive, check=True)

        def cli(module: str, *flags: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, "-m", module, "--runs", *files, "--output", out, "--method", "rrf",
                                   *flags], cwd=cwd, check=True, capture_output=True)

        reading = alternating_medians({"read_run": lambda: read_run(files[0]),
                                       "line reader": lambda: read_run_lines(files[0])}, args.repeats)
        end_to_end = alternating_medians({
            "ance-ir": lambda: cli("ance_ir.fusion", "--hits", str(n)),
            "Pyserini": lambda: cli("pyserini.fusion", "--k", str(n), "--depth", str(n)),
            "before": lambda: cli("ance_ir.fusion", "--k", str(n), cwd=before),
        }, args.repeats)
    rows = [
        ("RRF in process: ance-ir on columns / Pyserini", in_process["rrf tables"], in_process["rrf Pyserini"]),
        ("RRF in process: ance-ir on dictionaries / Pyserini", in_process["rrf dicts"], in_process["rrf Pyserini"]),
        ("interpolation in process: ance-ir on columns / Pyserini", in_process["interpolation tables"],
         in_process["interpolation Pyserini"]),
        ("interpolation in process: ance-ir on dictionaries / Pyserini", in_process["interpolation dicts"],
         in_process["interpolation Pyserini"]),
        ("reading one run: read_run / the line reader", reading["read_run"], reading["line reader"]),
        ("RRF CLI end to end: ance-ir / Pyserini's CLI", end_to_end["ance-ir"], end_to_end["Pyserini"]),
        (f"RRF CLI end to end: ance-ir / ance-ir at {args.before} (before)", end_to_end["ance-ir"],
         end_to_end["before"]),
    ]
    lines = ["| task: ance-ir / peer | ance-ir (s) | peer (s) | peer / ance-ir |", "| --- | --- | --- | --- |"]
    lines += [f"| {label} | {ours:.2f} | {theirs:.2f} | {theirs / ours:.1f}x |" for label, ours, theirs in rows]
    speedup, over_pyserini = (end_to_end[peer] / end_to_end["ance-ir"] for peer in ("before", "Pyserini"))
    verdict = (f"Acceptance (issue 11), the fusion CLI at least 10x faster than before on large runs: "
               f"{'yes' if speedup >= 10 else 'no'} ({speedup:.2f}x; {over_pyserini:.2f}x Pyserini's CLI).")
    body = (f"## 11. Fusion of large runs ({args.queries:,} queries x {args.hits:,} hits)\n\n"
            + __doc__.split("\n\n")[1] + "\n\n" + "\n".join(lines) + "\n\n" + verdict + "\n\n"
            + provenance(load))
    write_section(args.output, "bench-fusion-speed", body)


if __name__ == "__main__":
    main()
