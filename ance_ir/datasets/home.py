"""Where fetched datasets and downloads live: ``$ANCE_IR_HOME``, default ``~/.cache/ance_ir``."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from ance_ir.data.checksum import sha256_file


def ance_ir_home() -> Path:
    return Path(os.environ.get("ANCE_IR_HOME", Path.home() / ".cache" / "ance_ir")).expanduser()


def megabytes(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


class DownloadProgress:
    """Report on stderr how much of ``filename`` pip has written under ``folder`` (its private TMPDIR).

    pip saves a download under ``TMPDIR/pip-unpack-*/FILENAME`` before copying it to ``-d``, so the size of
    that file is the progress. On a terminal one line is redrawn; otherwise a line is printed every 10%
    (every 25 MB when the size is unknown).
    """

    def __init__(self, folder: Path, filename: str, size: int | None, interval: float = 0.5):
        self.folder, self.filename, self.size, self.interval = folder, filename, size, interval
        self.tty = sys.stderr.isatty()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._reported = 0

    def __enter__(self) -> DownloadProgress:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        if self.tty and self._reported:
            print(file=sys.stderr)

    def written(self) -> int:
        return sum(p.stat().st_size for p in self.folder.glob(f"pip-*/{self.filename}") if p.is_file())

    def line(self, done: int) -> str:
        if self.size:
            return f"  {megabytes(done)} of about {megabytes(self.size)} ({min(99, 100 * done // self.size)}%)"
        return f"  {megabytes(done)}"

    def _watch(self) -> None:
        step = self.size // 10 if self.size else 25_000_000
        while not self._stop.wait(self.interval):
            try:
                done = self.written()
            except OSError:  # pip removed its folder between glob and stat
                continue
            if not done or done == self._reported:
                continue
            if self.tty:
                print("\r" + self.line(done), end="", file=sys.stderr, flush=True)
                self._reported = done
            elif done - self._reported >= step:
                print(self.line(done), file=sys.stderr, flush=True)
                self._reported = done


def pip_download(requirement: str, filename: str, sha256: str, sdist: bool = False, size: int | None = None,
                 why: str = "") -> Path:
    """Download one distribution file from the package index with pip, verify its sha256, return its path.

    The file is cached under ``$ANCE_IR_HOME/downloads``; a cached file with the wrong checksum is
    fetched again. Before downloading, what is fetched, its ``size`` in bytes (when known) and ``why`` are
    announced on stderr, then the progress.
    """
    dest = ance_ir_home() / "downloads"
    path = dest / filename
    if path.is_file() and sha256_file(path) == sha256:
        return path
    dest.mkdir(parents=True, exist_ok=True)
    kind = ["--no-binary", ":all:"] if sdist else ["--only-binary", ":all:"]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", *kind, "-d", str(dest),
           requirement]
    about = f", about {megabytes(size)}" if size else ""
    print(f"downloading {filename} ({requirement} from the package index{about}) with pip into {dest}"
          + (f": {why}" if why else ""), file=sys.stderr)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ance-ir-pip-") as tmp:
        env = {**os.environ, "TMPDIR": tmp}
        with DownloadProgress(Path(tmp), filename, size):
            result = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if result.returncode != 0 or not path.is_file():
        tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"pip could not download {requirement}: {tail[0]}")
    actual = sha256_file(path)
    if actual != sha256:
        path.unlink()
        raise RuntimeError(f"{path}: sha256 {actual} does not match the expected {sha256}")
    print(f"downloaded {filename} ({megabytes(path.stat().st_size)}) in {time.monotonic() - started:.0f} s",
          file=sys.stderr)
    return path
