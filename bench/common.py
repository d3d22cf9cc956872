"""Shared benchmark plumbing: machine description, medians of alternating runs, Markdown sections."""

from __future__ import annotations

import os
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable
from itertools import islice
from pathlib import Path

from ance_ir.data import Passage, atomic_write, iter_corpus
from bench import AVX2_CAPS

_SIMD_FLAGS = ("avx2", "avx_vnni", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_tile")


def first_passages(corpus: str, limit: int) -> list[Passage]:
    """The first ``limit`` passages of ``corpus`` (a name or a file), read no further."""
    from ance_ir.datasets import resolve_corpus

    return list(islice(iter_corpus(resolve_corpus(corpus)), limit))


def _cpuinfo() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    return cpuinfo.read_text() if cpuinfo.is_file() else ""


def cpu_flags() -> str:
    """The CPU's SIMD flags that decide the encoding precisions (as ``lscpu`` lists them), and the kernels
    PyTorch runs: ``torch.backends.cpu.get_cpu_capability()``, with the settings that capped it."""
    import torch

    match = re.search(r"^flags\s*:\s*(.+)$", _cpuinfo(), re.MULTILINE)
    present = set(match.group(1).split()) if match else set()
    flags = " ".join(flag for flag in _SIMD_FLAGS if flag in present) or "none of " + " ".join(_SIMD_FLAGS)
    caps = " ".join(f"{name}={os.environ[name]}" for name in AVX2_CAPS if name in os.environ)
    kernels = torch.backends.cpu.get_cpu_capability() + (f", capped by {caps}" if caps else "")
    return f"CPU flags: {flags}; torch CPU kernels: {kernels}"


def device_label(device: str) -> str:
    """``device`` as the benchmark sections name it: ``cpu-avx2`` where PyTorch's CPU kernels are AVX2 (a CPU
    without AVX-512, or one capped to AVX2), so its tables sit beside the native CPU's instead of replacing them."""
    import torch

    return "cpu-avx2" if device == "cpu" and torch.backends.cpu.get_cpu_capability() == "AVX2" else device


def machine() -> str:
    """CPU model, cores, SIMD flags and library versions, for the header of every table."""
    import numpy
    import torch
    import transformers

    match = re.search(r"model name\s*:\s*(.+)", _cpuinfo())
    cpu = match.group(1).strip() if match else platform.processor() or "unknown CPU"
    gpu = (f"{torch.cuda.get_device_name()} (CUDA {torch.version.cuda}), "
           if torch.cuda.is_available() else "")
    return (f"{gpu}{cpu}, {os.cpu_count()} cores ({cpu_flags()}); Python {platform.python_version()}, "
            f"torch {torch.__version__}, transformers {transformers.__version__}, {_faiss_version()}, "
            f"numpy {numpy.__version__}")


def _faiss_version() -> str:
    """``faiss VERSION``, or ``faiss missing`` (a GPU machine may have no faiss build: its tables need none)."""
    try:
        import faiss
    except ImportError:
        return "faiss missing"
    return f"faiss {faiss.__version__}"


def importable(module: str) -> bool:
    """Whether ``module`` imports here (a GPU machine may lack Pyserini and its Java, say)."""
    import importlib

    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


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


def publish(body: str, output: str | Path | None, marker: str) -> None:
    """Print a benchmark's section and, given an ``output`` Markdown file, put it there under ``marker``."""
    print(body)
    if output:
        write_section(output, marker, body)


def versions(*packages: str) -> str:
    """``name version`` of each installed distribution (``name missing`` when absent)."""
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for name in packages:
        try:
            out.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            out.append(f"{name} missing")
    return ", ".join(out)


def load_average() -> tuple[float, float, float]:
    """``os.getloadavg()``: runnable processes averaged over 1, 5 and 15 minutes."""
    return os.getloadavg()


def format_load(before: tuple[float, float, float], after: tuple[float, float, float]) -> str:
    """Load averages at the start and end of a measurement, for the provenance line."""
    fmt = "/".join
    return (f"load average (1/5/15 min) {fmt(f'{x:.2f}' for x in before)} at the start, "
            f"{fmt(f'{x:.2f}' for x in after)} at the end")


def module_command() -> str:
    """The command that ran this script: ``python -m bench.NAME ARGS`` when started with ``-m``."""
    import shlex

    spec = getattr(sys.modules["__main__"], "__spec__", None)
    if spec is None:
        return command_line()
    return " ".join(["python -m", spec.name, *map(shlex.quote, sys.argv[1:])])


def provenance(load_before: tuple[float, float, float], extra_versions: tuple[str, ...] = (),
               note: str = "") -> str:
    """Machine, library versions, load averages and the exact command, for the foot of a table."""
    libs = f"; {versions(*extra_versions)}" if extra_versions else ""
    lines = [f"Machine: {machine()}{libs}.", f"{format_load(load_before, load_average())}."]
    if note:
        lines.append(note)
    return "\n".join(lines) + f"\n\n```\n{_env_prefix()}flock /tmp/ance-ir-cpu.lock {module_command()}\n```\n"


def _env_prefix() -> str:
    """``AVX2_KERNELS=1 `` when this run capped PyTorch's kernels to AVX2 that way, so the command reproduces it."""
    return "AVX2_KERNELS=1 " if os.environ.get("AVX2_KERNELS") == "1" else ""


def peak_rss_mib(pid: int | str = "self") -> float:
    """Peak resident memory (``VmHWM``) of a live process, in MiB; NaN once it is gone.

    Unlike ``getrusage``'s ``ru_maxrss``, ``VmHWM`` starts afresh at ``exec``, so a child is not charged for
    the memory of the (large) process that forked it.
    """
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (FileNotFoundError, ProcessLookupError):
        pass
    return float("nan")


def run_child(args: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """Run a command to completion; its wall seconds, peak RSS (MiB, ``VmHWM`` polled) and stdout.

    Raises RuntimeError with the end of its stderr when it fails.
    """
    import subprocess
    import tempfile

    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        child = subprocess.Popen(args, stdout=out, stderr=err, text=True, env=env)
        peak = 0.0
        while child.poll() is None:
            value = peak_rss_mib(child.pid)
            peak = value if value == value else peak  # NaN (just exited) keeps the last reading
            time.sleep(0.05)
        seconds = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        if child.returncode:
            raise RuntimeError(f"{' '.join(args)} failed ({child.returncode}):\n{err.read()[-3000:]}")
        return seconds, peak, out.read()
