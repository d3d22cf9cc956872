"""Shared command-line plumbing: the parser every CLI uses, one-line errors and a non-zero exit for bad input.

Every CLI takes ``--debug`` (the traceback of any error, then its ``error:`` line) and ``--verbose`` (the
JVM's and libraries' warnings, which are otherwise silenced); its ``--help`` shows each option's default.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import math
import os
import re
import signal
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from ance_ir.bootstrap import VERBOSE_ENV
from ance_ir.data import InputError


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """The description as written; ``(default: X)`` after each option's help unless it names its default."""

    @staticmethod
    def _shows_default(action: argparse.Action) -> bool:
        return bool(action.option_strings) and action.default not in (None, False, argparse.SUPPRESS, [])

    def _format_action(self, action: argparse.Action) -> str:
        if action.help is None and self._shows_default(action):
            action = copy.copy(action)
            action.help = "(default: %(default)s)"  # an option without help text still shows its default
        return super()._format_action(action)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or not self._shows_default(action):
            return text
        default = action.default
        shown = " ".join(map(str, default)) if isinstance(default, (list, tuple)) else "%(default)s"
        return f"{text} (default: {shown})"


class ArgumentParser(argparse.ArgumentParser):
    """argparse with :class:`HelpFormatter`, ``--debug``/``--verbose`` and a one-line ``error:`` for bad flags."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        self.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                          help="on an error, show its traceback too")
        self.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS,
                          help="show the JVM's and libraries' warnings (silenced otherwise)")

    def parse_known_args(self, args=None, namespace=None):
        parsed, extra = super().parse_known_args(args, namespace)
        if getattr(parsed, "verbose", False):
            os.environ[VERBOSE_ENV] = "1"
        return parsed, extra

    def error(self, message: str):
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")

    def require(self, args: argparse.Namespace, given: str, *needed: str) -> None:
        """Exit with one error line when option ``given`` is set and some of the ``needed`` options are not (dests,
        e.g. ``bm25_run``)."""
        if getattr(args, given) is None:
            return
        missing = ["--" + name.replace("_", "-") for name in needed if getattr(args, name) is None]
        if missing:
            self.error(f"--{given.replace('_', '-')} needs " + ", ".join(missing))

    def refuse(self, args: argparse.Namespace, given: str, *unused: str) -> None:
        """Exit with one error line when option ``given`` is set and one of the ``unused`` options (dests whose
        defaults are None, filled in afterwards) is too: it would be ignored."""
        if getattr(args, given) is None:
            return
        extra = ["--" + name.replace("_", "-") for name in unused if _given(getattr(args, name))]
        if extra:
            self.error(f"{extra[0]} does not apply with --{given.replace('_', '-')}")


def positive_int(value: str) -> int:
    """argparse type: an integer >= 1."""
    if not value.strip().isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    return int(value)


def non_negative_int(value: str) -> int:
    """argparse type: an integer >= 0."""
    if not value.strip().isdigit():
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value!r}")
    return int(value)


def float_type(accept: Callable[[float], bool], expected: str) -> Callable[[str], float]:
    """argparse type: a number that ``accept`` takes (never NaN); anything else is refused as ``expected``."""
    def parse(value: str) -> float:
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if math.isnan(number) or not accept(number):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {value!r}")
        return number
    return parse


#: any finite number (a score threshold)
finite_float = float_type(math.isfinite, "a finite number")
#: a finite number >= 0 (BM25's k1 and b, margins)
non_negative_float = float_type(lambda x: 0 <= x < math.inf, "a finite number >= 0")
#: a finite number > 0 (a temperature)
positive_float = float_type(lambda x: 0 < x < math.inf, "a positive number")
#: a number in [0, 1] (an interpolation weight)
unit_float = float_type(lambda x: 0 <= x <= 1, "a number between 0 and 1")
#: a number in (0, 1] (a share, nucleus sampling's top-p)
share_float = float_type(lambda x: 0 < x <= 1, "a number above 0 and at most 1")


def hidden_alias(parser: argparse.ArgumentParser, *option_strings: str, dest: str, **kwargs: object) -> None:
    """Accept old spellings of an option (e.g. ``--k`` for ``--hits``) without showing them in ``--help``.

    They store into the documented option's ``dest``; its default stays in force when neither is given.
    """
    parser.add_argument(*option_strings, dest=dest, default=argparse.SUPPRESS, help=argparse.SUPPRESS, **kwargs)


def given_flags(args: argparse.Namespace, flags: dict[str, str]) -> list[str]:
    """Those of ``flags`` (option: dest) given on the command line: options that default to None (or False), their
    defaults filled in by :func:`fill_defaults` once a flag given where it does not apply has been refused."""
    return [flag for flag, dest in flags.items() if _given(getattr(args, dest))]


def _given(value: object) -> bool:
    """Whether an option's value was set: not None nor False, by identity (``0 == False``: a flag set to 0 counts)."""
    return value is not None and value is not False


def fill_defaults(args: argparse.Namespace, defaults: dict[str, object]) -> None:
    """Give each dest of ``defaults`` left unset (None) its default (see :func:`given_flags`)."""
    for dest, value in defaults.items():
        if getattr(args, dest) is None:
            setattr(args, dest, value)


# what counts as bad input or a failed step (one ``error:`` line, exit 2) rather than a bug (exit 1); an
# OSError is a file that cannot be read or written (permissions, a folder where a file goes, a full disk)
CLI_ERRORS = (InputError, OSError, KeyError, ValueError, RuntimeError)


def error_message(error: BaseException) -> str:
    """The text after ``error:`` for one of :data:`CLI_ERRORS`: ``FILE: reason`` for an OSError naming a file."""
    if isinstance(error, OSError) and error.filename is not None:
        return f"{error.filename}: {error.strerror or error}"
    return one_line(str(error.args[0] if isinstance(error, KeyError) and error.args else error))


def one_line(message: str) -> str:
    """``message`` with its line breaks (and the indentation after them) as single spaces: a library's error
    spread over lines still makes one ``error:`` line."""
    return re.sub(r"\s*\n\s*", " ", message.strip())


def check_output(path: str | Path, *, folder: bool = False) -> Path:
    """Fail early (before any work) when ``path`` cannot be written as an output file (or ``folder``).

    Raises :class:`InputError` for a folder where a file goes (or a file where a folder goes), a parent
    that is a file, or a parent folder this process may not write into.
    """
    if str(path).endswith("/") and not folder:  # Path() would drop the slash and write a file of that name
        raise InputError(path, "ends with '/', a folder; the output must be a file name")
    path = Path(path)
    if path.is_dir() and not folder:
        raise InputError(path, "is a folder; the output must be a file name")
    if path.exists() and not path.is_dir() and folder:
        raise InputError(path, "exists and is not a folder")
    parent = path.parent  # where the temporary file or folder (and a lock) beside the output go
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise InputError(parent, f"is not a folder, so {path} cannot be written")
    try:  # a file made and removed again: os.access says yes to root even where nothing can be written (/proc)
        fd, probe = tempfile.mkstemp(prefix=".ance-ir-probe.", dir=parent)
    except OSError as e:
        raise InputError(parent, f"is not writable ({e.strerror}), so {path} cannot be written") from None
    os.close(fd)
    with contextlib.suppress(OSError):  # a folder that takes files but refuses deletions: the write will tell
        os.unlink(probe)
    return path


def check_new_folder(path: str | Path, force: bool) -> Path:
    """:func:`check_output` for an output folder, which must not exist yet unless ``force`` (replace it)."""
    path = check_output(path, folder=True)
    if path.exists() and not force:
        raise ValueError(f"{path} already exists; pass --force to replace it")
    return path


def check_apart(output: str | Path, inputs: Iterable[str | Path | None], folders: Iterable[str | Path | None] = (),
                models: Iterable[str] = ()) -> None:
    """InputError when the output ``output`` is one of ``inputs`` or holds one (writing or replacing it would change or
    delete that input), or lies inside one of the input ``folders`` (it would change what they hold). ``models`` are
    inputs too, as given and as the folder they load from (a training run's ``final/``). Inputs that are not paths
    here (None, a dataset or Hugging Face name) are skipped; an output that is a symbolic link is the link, which
    writing replaces, not its target."""
    out = Path(output).expanduser()
    out = out.parent.resolve() / out.name
    sources = [given for given in inputs if given]
    if models := list(models):
        from ance_ir.modeling.resolve import ModelNotAvailableError, resolve_model_path  # imports torch

        for model in models:
            with contextlib.suppress(ModelNotAvailableError):  # loading the model says what is wrong with it
                sources += [model, resolve_model_path(model)]
    for given in sources:
        source = Path(given).expanduser().resolve()
        if not source.exists():
            continue
        if out == source:
            raise InputError(output, f"is the input {given}; write the output elsewhere")
        if source.is_relative_to(out):
            raise InputError(output, f"holds the input {given}, which writing it would replace; write the output "
                                     "elsewhere")
    for given in filter(None, folders):
        folder = Path(given).expanduser().resolve()
        if out.is_relative_to(folder) and folder.is_dir():
            raise InputError(output, f"lies inside the input {given}; write the output elsewhere")


def add_run_tag_argument(parser: argparse.ArgumentParser) -> None:
    """``--run-tag`` of a command whose default tag is its output's name (:func:`~ance_ir.data.default_run_tag`)."""
    parser.add_argument("--run-tag", help="run tag (default: the output file name less .gz and .trec/.txt/.run)")


def add_import_argument(parser: argparse.ArgumentParser) -> None:
    """``--import FILE_OR_MODULE`` (repeatable): plugins that register components, loaded by :func:`run_cli`."""
    parser.add_argument("--import", dest="imports", action="append", default=[], metavar="FILE_OR_MODULE",
                        help="import this plugin file or module first (it registers model kinds, sources, ...); "
                             "repeatable; ANCE_IR_IMPORTS does the same")


def load_cli_plugins(imports: list[str]) -> None:
    """Import ``ANCE_IR_IMPORTS`` and the ``--import`` plugins of a command."""
    from ance_ir.plugins import load_plugins

    load_plugins(imports)


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment for a child ``python -m ...`` of this checkout (``ance_ir.X``, ``bench.X``): the
    folder holding this ``ance_ir`` first on PYTHONPATH, the caller's entries kept after it, plus ``extra``."""
    root = str(Path(__file__).resolve().parent.parent)
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])), **extra}


class Terminated(KeyboardInterrupt):
    """A SIGTERM (``kill``, a scheduler's time limit), raised where the job is: it unwinds as a Ctrl-C does, so
    temporary files are removed and a resumable job says what it kept; the command exits 143, not 130. Like a
    Ctrl-C it is raised between Python bytecodes: a long call into C (a faiss search, a collective) ends first."""


def interruption(signum: int | None) -> type[KeyboardInterrupt]:
    """What a job stopped by ``signum`` raises: :class:`Terminated` for SIGTERM, else ``KeyboardInterrupt``."""
    return Terminated if signum == signal.SIGTERM else KeyboardInterrupt


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block SIGTERM raises :class:`Terminated` (in the main thread; elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        if previous is not None:  # None: a handler set outside Python, which cannot be put back from here
            signal.signal(signal.SIGTERM, previous)


def run_cli(main: Callable[[list[str] | None], int | None], argv: list[str] | None = None) -> None:
    """Run ``main``; report :class:`InputError` and similar failures as one ``error:`` line and exit 2.

    Any other exception is a bug: one ``error:`` line naming its type and exit 1. With ``--debug`` the
    traceback comes first. Ctrl-C exits 130 and SIGTERM 143, each after the job's own word on what it kept.
    """
    debug = "--debug" in (sys.argv[1:] if argv is None else argv)
    try:
        with sigterm_as_interrupt():
            code = main(argv)
    except CLI_ERRORS as e:
        if debug:
            traceback.print_exc()
        print(f"error: {error_message(e)}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt as e:  # a job that handled it says what it kept and how to go on
        terminated = isinstance(e, Terminated)
        print(str(e) or ("terminated" if terminated else "interrupted"), file=sys.stderr)
        sys.exit(143 if terminated else 130)
    except Exception as e:  # noqa: BLE001 - a bug: one line, the traceback with --debug
        if debug:
            traceback.print_exc()
        hint = "" if debug else " (an unexpected error: --debug shows the traceback)"
        print(f"error: {type(e).__name__}: {one_line(str(e))}{hint}", file=sys.stderr)
        sys.exit(1)
    sys.exit(code or 0)
