"""Shared command-line plumbing: one-line errors and a non-zero exit for bad input."""

from __future__ import annotations

import sys
from collections.abc import Callable

from ance_ir.data import InputError


def run_cli(main: Callable[[list[str] | None], int | None], argv: list[str] | None = None) -> None:
    """Run ``main``; report :class:`InputError` and similar failures as one ``error:`` line and exit 2."""
    try:
        code = main(argv)
    except (InputError, FileNotFoundError, KeyError, ValueError, RuntimeError) as e:
        message = e.args[0] if isinstance(e, KeyError) and e.args else e
        print(f"error: {message}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(code or 0)
