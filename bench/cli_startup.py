"""Start-up time of the command-line tools: ``python -m ance_ir.X --help``, each a fresh process.

Times ``train``, ``negatives``, ``encode`` and ``search`` against ``eval`` (the reference peer: a CLI that
loads no model), each ``--repeats`` times in alternating order after one untimed warm-up run, and reports
the median and the slowest run and the ratio to eval's median. A second check runs each ``--help`` once
more inside a Python that then lists the heavy libraries it imported (torch, transformers, faiss, pyserini,
jnius, numpy), and ``python -X importtime`` names the slowest third-party imports of each.

Acceptance: ``train --help`` and ``negatives --help`` start in under 2 s (median) and import no torch.

    flock /tmp/ance-ir-cpu.lock python -m bench.cli_startup --output docs/bench.md
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

from ance_ir.cli import positive_int
from bench.common import load_average, provenance, publish

COMMANDS = ("train", "negatives", "encode", "search", "eval")
REFERENCE = "eval"
MUST_BE_LIGHT = ("train", "negatives")
LIMIT_S = 2.0
HEAVY = ("torch", "transformers", "faiss", "pyserini", "jnius", "numpy")

# Runs ``python -m MODULE --help`` in this interpreter, then prints which HEAVY modules it imported.
PROBE = """
import runpy, sys, json
module, heavy = sys.argv[1], sys.argv[2].split(",")
sys.argv = [module, "--help"]
out = sys.stdout
sys.stdout = open("/dev/null", "w")
try:
    runpy.run_module(module, run_name="__main__", alter_sys=True)
except SystemExit:
    pass
sys.stdout = out
print(json.dumps({name: name in sys.modules for name in heavy}))
"""


def argv(python: str, name: str) -> list[str]:
    return [python, "-m", f"ance_ir.{name}", "--help"]


def run_once(args: list[str]) -> float:
    """Wall seconds of one run of ``args`` (stdout discarded); RuntimeError when it fails."""
    start = time.perf_counter()
    done = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds


def alternating_times(python: str, repeats: int) -> dict[str, list[float]]:
    """Every command once untimed, then ``repeats`` timed rounds in alternating order."""
    for name in COMMANDS:
        run_once(argv(python, name))
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for r in range(repeats):
        for name in (COMMANDS if r % 2 == 0 else COMMANDS[::-1]):
            times[name].append(run_once(argv(python, name)))
    return times


def heavy_imports(python: str, name: str) -> dict[str, bool]:
    """Which HEAVY modules ``python -m ance_ir.NAME --help`` leaves in ``sys.modules``."""
    done = subprocess.run([python, "-c", PROBE, f"ance_ir.{name}", ",".join(HEAVY)], capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def slowest_imports(python: str, name: str, top: int = 3) -> list[tuple[str, float]]:
    """The ``top`` third-party top-level packages with the largest import time (seconds, each package's
    outermost imports summed: ``transformers.x`` imported by ance-ir counts for transformers too)."""
    done = subprocess.run([python, "-X", "importtime", *argv(python, name)[1:]], capture_output=True, text=True)
    entries = []
    for line in done.stderr.splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+(\d+) \|( *)(\S+)", line)
        if match:
            entries.append((len(match[2]) // 2, match[3].split(".")[0], int(match[1]) / 1e6))
    roots: dict[str, float] = {}
    ancestors: list[str] = []
    for depth, root, seconds in reversed(entries):  # importtime lists children first: reversed, parents lead
        del ancestors[depth:]
        if root not in ancestors:
            roots[root] = roots.get(root, 0.0) + seconds
        ancestors.append(root)
    third_party = [(r, s) for r, s in roots.items()
                   if r != "ance_ir" and r not in sys.stdlib_module_names and not r.startswith("_") and s >= 0.005]
    return sorted(third_party, key=lambda kv: -kv[1])[:top]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=positive_int, default=7, help="timed runs of each command (default 7)")
    parser.add_argument("--python", default=sys.executable, help="interpreter to time (default: this one)")
    parser.add_argument("--note", default="", help="a sentence for the foot of the section (e.g. what else ran)")
    parser.add_argument("--output", help="Markdown file to update")
    args = parser.parse_args()

    load_before = load_average()
    times = alternating_times(args.python, args.repeats)
    loaded = {name: heavy_imports(args.python, name) for name in COMMANDS}
    slowest = {name: slowest_imports(args.python, name) for name in COMMANDS}

    median = {name: statistics.median(values) for name, values in times.items()}
    reference = median[REFERENCE]
    rows = ["| command | median (s) | max (s) | × eval's median | imports of these | slowest third-party imports (s) |",
            "| --- " * 6 + "|"]
    for name in COMMANDS:
        heavy = ", ".join(m for m, present in loaded[name].items() if present) or "none"
        imports = ", ".join(f"{m} {s:.2f}" for m, s in slowest[name]) or "–"
        label = f"`{name} --help`" + (" (reference)" if name == REFERENCE else "")
        rows.append(f"| {label} | {median[name]:.2f} | {max(times[name]):.2f} | "
                    f"{median[name] / reference:.2f}× | {heavy} | {imports} |")

    verdicts = []
    for name in MUST_BE_LIGHT:
        fast, light = median[name] < LIMIT_S, not loaded[name]["torch"]
        verdicts.append(f"{name}: {'yes' if fast and light else 'no'} ({median[name]:.2f} s, "
                        f"{'no torch' if light else 'imports torch'})")
    busy = max(load_before[0], load_average()[0])
    cores = os.cpu_count() or 1
    note = " ".join(filter(None, [
        args.note,
        f"The machine was busy (1-minute load average up to {busy:.2f} on {cores} cores): every time here is "
        "inflated by the other jobs; compare the ratios to eval rather than the seconds." if busy > cores else ""]))
    verdict = (f"Acceptance, `train --help` and `negatives --help` start in under {LIMIT_S:g} s (median) without "
               "importing torch: " + "; ".join(verdicts) + ".")
    body = (f"### CLI start-up: `python -m ance_ir.X --help`, {args.repeats} runs each\n\n"
            f"Wall time of a fresh process, median and slowest of {args.repeats} runs in alternating order (after "
            f"one untimed warm-up run each); \"imports of these\" lists which of {', '.join(HEAVY)} the `--help` "
            "run left in `sys.modules`; the slowest third-party imports come from one `python -X importtime` run "
            "(seconds spent importing each package, a package imported inside another counted in both).\n\n"
            + "\n".join(rows) + f"\n\n{verdict}\n\n" + provenance(load_before, note=note))
    publish(body, args.output, "cli-startup cpu")


if __name__ == "__main__":
    main()
