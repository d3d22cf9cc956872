"""Where fetched datasets and downloads live: ``$ANCE_IR_HOME``, default ``~/.cache/ance_ir``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ance_ir.data.checksum import sha256_file


def ance_ir_home() -> Path:
    return Path(os.environ.get("ANCE_IR_HOME", Path.home() / ".cache" / "ance_ir")).expanduser()


def pip_download(requirement: str, filename: str, sha256: str, sdist: bool = False) -> Path:
    """Download one distribution file from the package index with pip, verify its sha256, return its path.

    The file is cached under ``$ANCE_IR_HOME/downloads``; a cached file with the wrong checksum is
    fetched again.
    """
    dest = ance_ir_home() / "downloads"
    path = dest / filename
    if path.is_file() and sha256_file(path) == sha256:
        return path
    dest.mkdir(parents=True, exist_ok=True)
    kind = ["--no-binary", ":all:"] if sdist else ["--only-binary", ":all:"]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", *kind, "-d", str(dest),
           requirement]
    print(f"downloading {requirement} with pip ...", file=sys.stderr)
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0 or not path.is_file():
        tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"pip could not download {requirement}: {tail[0]}")
    actual = sha256_file(path)
    if actual != sha256:
        path.unlink()
        raise RuntimeError(f"{path}: sha256 {actual} does not match the expected {sha256}")
    return path
