"""Registries: one dict per kind of component (tasks, losses, samplers, data sources, ...), filled by a
class decorator, each class selectable by its ``name`` and declaring the options it takes."""

from __future__ import annotations

import difflib
import inspect
from typing import Any, TypeVar

from ance_ir.train.settings import ConfigError

T = TypeVar("T", bound=type)


#: an option's default that means "no default": the setting must be given (a candidate source's constructor
#: parameter without a default is one)
REQUIRED: Any = inspect.Parameter.empty


class Registry(dict):
    """``name -> class``; ``register`` is the decorator. ``what`` names the kind in error messages, ``key`` the class
    attribute that holds the name (``kind`` for model kinds)."""

    def __init__(self, what: str, key: str = "name"):
        super().__init__()
        self.what, self.key = what, key

    def register(self, cls: T) -> T:
        """Register ``cls`` under its name; ValueError for a class without a name, or a name another class holds
        (a plugin does not silently replace a built-in or another plugin's component)."""
        name = getattr(cls, self.key, None)
        if not isinstance(name, str) or not name:
            raise ValueError(f"class {cls.__qualname__}: a {self.what} needs a non-empty string {self.key!r} to "
                             "be registered under")
        held = self.get(name)
        if held is not None and not _same_definition(held, cls):
            raise ValueError(f"class {cls.__qualname__}: the {self.what} {name!r} is taken by "
                             f"{held.__module__}.{held.__qualname__}; choose another")
        self[name] = cls
        return cls

    def lookup(self, name: str, setting: str) -> type:
        """The class registered as ``name``; ConfigError on the config ``setting`` listing the known names."""
        if name not in self:
            raise ConfigError(setting, f"must be one of {', '.join(self)}, got {name!r} ({self.suggest(name)}"
                                       f"{self._plugin_hint()})")
        return self[name]

    def require(self, name: str) -> type:
        """The class registered as ``name``; ValueError listing the known names (for a CLI flag or an API call)."""
        if name not in self:
            raise ValueError(f"unknown {self.what} {name!r} ({self.suggest(name)}known: {', '.join(self)}; "
                             f"{self._plugin_hint()})")
        return self[name]

    def _plugin_hint(self) -> str:
        return (f"a {self.what} from a plugin is registered by importing it: --import FILE or 'imports:' in the "
                "config")

    def suggest(self, name: str) -> str:
        """``did you mean 'X'? `` for the registered name closest to ``name``, else ''."""
        close = difflib.get_close_matches(str(name), list(self), n=1)
        return f"did you mean {close[0]!r}? " if close else ""


def _same_definition(held: type, cls: type) -> bool:
    """Whether ``cls`` is ``held`` or the same class statement run again (a plugin file imported once by path and
    once as a module)."""
    if held is cls:
        return True
    try:
        return held.__qualname__ == cls.__qualname__ and inspect.getsourcefile(held) == inspect.getsourcefile(cls)
    except TypeError:  # a class without a source file
        return False


def check_options(declared: dict[str, Any], given: dict[str, Any], section: str, known: list[str]) -> dict[str, Any]:
    """``given`` options completed with the ``declared`` defaults and converted to their types; ConfigError on
    ``section.KEY`` for a key that is not declared (``known``: the section's own keys, for suggestions) or a
    :data:`REQUIRED` one that is not given."""
    from ance_ir.train.arguments import coerce_option

    for key in given:
        if key not in declared:
            close = difflib.get_close_matches(key, [*known, *declared], n=1)
            raise ConfigError(f"{section}.{key}", "unknown setting" + (f"; did you mean {close[0]!r}?" if close
                                                                          else ""))
    missing = next((key for key, default in declared.items() if default is REQUIRED and key not in given), None)
    if missing is not None:
        raise ConfigError(f"{section}.{missing}", "is required (it has no default)")
    return {key: coerce_option(f"{section}.{key}", given.get(key, default), default)
            for key, default in declared.items()}
