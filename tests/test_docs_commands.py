"""Every command the docs show (README, docs/, configs/README) names only flags its CLI has, so a flag renamed or
removed in the code fails here rather than for a reader copying the command."""

from __future__ import annotations

import argparse
import inspect
import re
import sys
from functools import cache
from pathlib import Path

import pytest
from conftest import module_main

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", ROOT / "configs" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# ``python -m MODULE`` and what follows on its line and on the lines a trailing backslash joins to it (placeholders
# in capitals, ``ance_ir.X``, do not match)
COMMAND = re.compile(r"python -m ((?:ance_ir|experiments|bench)(?:\.[a-z0-9_]+)+)\b((?:\\\n|[^\n`])*)")
END = re.compile(r"\s(?:&&|\|\|?|;|>|2>|#)\s?")  # where the command ends and the shell goes on
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
PASS_THROUGH = {"ance_ir.pyserini"}  # hands its arguments to Pyserini's own command


def commands() -> list[tuple[str, str, list[str]]]:
    """(where, module, arguments) of every command in the docs."""
    found = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for match in COMMAND.finditer(text):
            module, rest = match.group(1), match.group(2).replace("\\\n", " ")
            if module in PASS_THROUGH:
                continue
            line = text.count("\n", 0, match.start()) + 1
            found.append((f"{doc.relative_to(ROOT)}:{line}", module, END.split(rest, maxsplit=1)[0].split()))
    return found


class _Parsing(Exception):
    def __init__(self, parser: argparse.ArgumentParser):
        self.parser = parser


@cache
def parser_of(module: str, head: str | None) -> argparse.ArgumentParser:
    """The parser ``python -m MODULE [HEAD]`` reads its arguments with (caught as it starts parsing); ``HEAD``, a
    first argument that is not a flag, may pick a command's own parser (``ance_ir.encode merge``)."""
    main, argv = module_main(module), [head] if head else []

    def caught(self, *_, **__):
        raise _Parsing(self)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(argparse.ArgumentParser, "parse_known_args", caught)
        patch.setattr(sys, "argv", [module, *argv])  # experiments and benchmarks read sys.argv
        try:
            main(argv) if inspect.signature(main).parameters else main()
        except _Parsing as parsing:
            return parsing.parser
    raise AssertionError(f"python -m {module} parsed no arguments")


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return {name: sub for action in parser._actions if isinstance(action, argparse._SubParsersAction)
            for name, sub in action.choices.items()}


def test_the_docs_show_many_commands():
    assert len(commands()) > 250


@pytest.mark.parametrize("module", sorted({module for _, module, _ in commands()}))
def test_every_flag_a_doc_gives_a_command_is_one_it_has(module):
    """Hidden flags (old spellings kept for committed commands) count: the parser accepts them."""
    wrong = []
    for where, name, args in commands():
        if name != module:
            continue
        head = args[0] if args and not args[0].startswith("-") else None
        parser = parser_of(module, head)
        sub = subparsers(parser).get(head)
        known = set(parser._option_string_actions) | set(sub._option_string_actions if sub else ())
        wrong += [f"{where}: python -m {module} {flag}" for flag in FLAG.findall(" ".join(args)) if flag not in known]
    assert not wrong, "\n".join(wrong)
