"""Shared command-line plumbing: one-line errors and a non-zero exit for bad input."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from ance_ir.data import InputError


def positive_int(value: str) -> int:
    """argparse type: an integer >= 1."""
    if not value.strip().isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    return int(value)


def unit_float(value: str) -> float:
    """argparse type: a number in [0, 1] (an interpolation weight)."""
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not 0.0 <= number <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {value!r}")
    return number


def hidden_alias(parser: argparse.ArgumentParser, *option_strings: str, dest: str, **kwargs: object) -> None:
    """Accept old spellings of an option (e.g. ``--k`` for ``--hits``) without showing them in ``--help``.

    They store into the documented option's ``dest``; its default stays in force when neither is given.
    """
    parser.add_argument(*option_strings, dest=dest, default=argparse.SUPPRESS, help=argparse.SUPPRESS, **kwargs)


# what counts as bad input or a failed step (one ``error:`` line, exit 2) rather than a bug (a traceback)
CLI_ERRORS = (InputError, FileNotFoundError, KeyError, ValueError, RuntimeError)


def error_message(error: BaseException) -> str:
    """The text after ``error:`` for one of :data:`CLI_ERRORS`."""
    return str(error.args[0] if isinstance(error, KeyError) and error.args else error)


def add_import_argument(parser: argparse.ArgumentParser) -> None:
    """``--import FILE_OR_MODULE`` (repeatable): plugins that register components, loaded by :func:`run_cli`."""
    parser.add_argument("--import", dest="imports", action="append", default=[], metavar="FILE_OR_MODULE",
                        help="import this plugin file or module first (it registers model kinds, sources, ...); "
                             "repeatable; ANCE_IR_IMPORTS does the same for every command")


def load_cli_plugins(imports: list[str]) -> None:
    """Import ``ANCE_IR_IMPORTS`` and the ``--import`` plugins of a command."""
    from ance_ir.plugins import load_plugins

    load_plugins(imports)


def run_cli(main: Callable[[list[str] | None], int | None], argv: list[str] | None = None) -> None:
    """Run ``main``; report :class:`InputError` and similar failures as one ``error:`` line and exit 2."""
    try:
        code = main(argv)
    except CLI_ERRORS as e:
        print(f"error: {error_message(e)}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(code or 0)
