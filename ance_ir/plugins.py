"""Plugins: Python files or modules that register components (tasks, losses, samplers, candidate sources,
data sources, model kinds) with the package's decorator registries when imported.

A training config names them under ``imports:``; the CLIs that load registered components (train, encode, search,
rerank, negatives, expand) take ``--import FILE_OR_MODULE`` (repeatable); ``ANCE_IR_IMPORTS`` (paths or modules
separated by ``os.pathsep``) applies to those commands too, including the processes they start themselves (the ANCE
inferencer).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

ENV = "ANCE_IR_IMPORTS"
_loaded: dict[str, ModuleType] = {}


def import_plugin(spec: str) -> ModuleType:
    """Import a ``.py`` file (by path) or a module (by dotted name), once per process; a plugin that is not valid
    Python, imports what is not installed or fails while it runs (a component registered under a name that is
    taken) is an :class:`~ance_ir.data.InputError` naming its file and line."""
    from ance_ir.data import InputError

    path = Path(spec).expanduser()
    key = str(path.resolve()) if spec.endswith(".py") else spec
    if key in _loaded:
        return _loaded[key]
    is_file = spec.endswith(".py")
    if is_file and not path.is_file():
        raise FileNotFoundError(f"{spec}: no such plugin file")
    try:
        module = _import_file(path, key) if is_file else importlib.import_module(spec)
    except SyntaxError as e:
        raise InputError(e.filename or spec, f"not valid Python ({e.msg})", e.lineno) from None
    except ImportError as e:
        if is_file:
            raise InputError(spec, f"plugin cannot be imported ({e})") from None
        raise ValueError(f"plugin module {spec!r} cannot be imported ({e})") from None
    except Exception as e:  # the plugin's own code failed: say where, not only what
        failure = f"the plugin failed while it was imported: {type(e).__name__}: {e}"
        if is_file:
            raise InputError(spec, failure, _line_in(e, path)) from None
        raise ValueError(f"plugin module {spec!r}: {failure}") from None
    _loaded[key] = module
    return module


def _line_in(error: BaseException, path: Path) -> int | None:
    """The line of ``path`` the traceback of ``error`` last passed through (where the plugin's code failed)."""
    target = str(path.resolve())
    lines = [frame.lineno for frame in traceback.extract_tb(error.__traceback__)
             if frame.filename and str(Path(frame.filename).resolve()) == target]
    return lines[-1] if lines else None


def _import_file(path: Path, key: str) -> ModuleType:
    """Execute the plugin file at ``path`` as a module of its own (registered in ``sys.modules`` while it runs, as
    an import does; taken out again when it fails)."""
    name = f"ance_ir_plugin_{path.stem}_{hashlib.sha1(key.encode()).hexdigest()[:8]}"
    module_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def environment_plugins() -> list[str]:
    """The plugins named in ``ANCE_IR_IMPORTS``."""
    return [s for s in os.environ.get(ENV, "").split(os.pathsep) if s]


def load_plugins(specs: Iterable[str] = ()) -> list[ModuleType]:
    """Import ``ANCE_IR_IMPORTS`` and then ``specs``; return the modules. The built-in model kinds are registered
    first, so that a plugin taking one of their names is the one refused."""
    specs = [*environment_plugins(), *specs]
    if specs:
        from ance_ir.modeling.kinds import register_built_in_kinds

        register_built_in_kinds()
    return [import_plugin(s) for s in specs]
