"""Shared benchmark plumbing: machine description, medians of alternating runs, Markdown sections."""

from __future__ import annotations

import platform
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ance_ir.data import atomic_write


def machine() -> str:
    """CPU model, cores and library versions, for the header of every table."""
    import faiss
    import numpy
    import torch
    import transformers

    cpu = platform.processor() or "unknown CPU"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        match = re.search(r"model name\s*:\s*(.+)", cpuinfo.read_text())
        cpu = match.group(1).strip() if match else cpu
    import os

    return (f"{cpu}, {os.cpu_count()} cores; Python {platform.python_version()}, torch {torch.__version__}, "
            f"transformers {transformers.__version__}, faiss {faiss.__version__}, numpy {numpy.__version__}")


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def alternating_medians(tasks: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Run every task ``repeats`` times in alternating order; the median seconds of each."""
    times: dict[str, list[float]] = {name: [] for name in tasks}
    for r in range(repeats):
        order = list(tasks) if r % 2 == 0 else list(reversed(tasks))
        for name in order:
            times[name].append(timed(tasks[name]))
    return {name: statistics.median(values) for name, values in times.items()}


def command_line() -> str:
    """The command that is running, as ``python -m bench.NAME ARGS`` from the repository root."""
    script = Path(sys.argv[0]).resolve()
    module = ".".join(script.relative_to(Path(__file__).resolve().parents[1]).with_suffix("").parts)
    return " ".join(["python -m", module, *sys.argv[1:]])


def write_section(path: str | Path, marker: str, body: str) -> None:
    """Replace (or append) the section between ``<!-- marker -->`` comments in a Markdown file, atomically."""
    path = Path(path)
    start, end = f"<!-- {marker} -->", f"<!-- /{marker} -->"
    block = f"{start}\n{body.rstrip()}\n{end}\n"
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    if start in text and end in text:
        text = text[:text.index(start)] + block + text[text.index(end) + len(end) + 1:]
    else:
        text = text + ("\n" if text and not text.endswith("\n\n") else "") + block
    with atomic_write(path) as f:
        f.write(text)
