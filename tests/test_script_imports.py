"""Every ``from ance_ir... import NAME`` in the bench and experiment scripts (and the package) names something that
exists: their imports sit inside functions, so a renamed or removed function would otherwise surface only when a
long run reaches them."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted(p for folder in ("bench", "experiments", "ance_ir") for p in (ROOT / folder).rglob("*.py"))


def ance_ir_imports(path: Path) -> list[tuple[int, str, str]]:
    """``(line, module, name)`` of every ``from ance_ir... import name`` in ``path``, wherever it sits."""
    return [(node.lineno, node.module, alias.name) for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
            and node.module.split(".")[0] == "ance_ir" for alias in node.names]


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_ance_ir_import_names_something_that_exists(path):
    missing = []
    for line, module, name in ance_ir_imports(path):
        imported = importlib.import_module(module)
        if not hasattr(imported, name):
            try:  # a submodule not imported by its package
                importlib.import_module(f"{module}.{name}")
            except ModuleNotFoundError:
                missing.append(f"{path.relative_to(ROOT)}:{line}: {module} has no {name}")
    assert not missing, "\n".join(missing)


def test_the_check_finds_a_missing_name(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("def main():\n    from ance_ir.index.impact import no_such_function\n")
    assert ance_ir_imports(script) == [(2, "ance_ir.index.impact", "no_such_function")]
    assert not hasattr(importlib.import_module("ance_ir.index.impact"), "no_such_function")
