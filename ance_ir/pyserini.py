"""Run any Pyserini CLI module through the ance-ir bootstrap.

    python -m ance_ir.pyserini pyserini.search.lucene --index DIR --topics T --output RUN --bm25
"""

from __future__ import annotations

import runpy
import sys

from ance_ir.bootstrap import bootstrap_pyserini


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or not argv[0].startswith("pyserini"):
        sys.exit("usage: python -m ance_ir.pyserini pyserini.MODULE [ARGS...]")
    bootstrap_pyserini()
    sys.argv = [argv[0], *argv[1:]]
    runpy.run_module(argv[0], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
