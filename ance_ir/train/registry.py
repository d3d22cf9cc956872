"""Registries: one dict per kind of component (tasks, losses, samplers, data sources, ...), filled by a
class decorator, each class selectable by its ``name`` and declaring the options it takes."""

from __future__ import annotations

import difflib
from typing import Any, TypeVar

from ance_ir.train.settings import ConfigError

T = TypeVar("T", bound=type)


class Registry(dict):
    """``name -> class``; ``register`` is the decorator. ``what`` names the kind in error messages."""

    def __init__(self, what: str):
        super().__init__()
        self.what = what

    def register(self, cls: T) -> T:
        self[cls.name] = cls
        return cls

    def lookup(self, name: str, setting: str) -> type:
        """The class registered as ``name``; ConfigError on ``setting`` listing the known names."""
        if name not in self:
            raise ConfigError(setting, f"must be one of {', '.join(self)}, got {name!r} (a {self.what} from a "
                                       "plugin is registered by importing it: 'imports:' in the config)")
        return self[name]


def check_options(declared: dict[str, Any], given: dict[str, Any], section: str, known: list[str]) -> dict[str, Any]:
    """``given`` options completed with the ``declared`` defaults and converted to their types; ConfigError on
    ``section.KEY`` for a key that is not declared (``known``: the section's own keys, for suggestions)."""
    from ance_ir.train.arguments import coerce_option

    for key in given:
        if key not in declared:
            close = difflib.get_close_matches(key, [*known, *declared], n=1)
            raise ConfigError(f"{section}.{key}", "unknown setting" + (f"; did you mean {close[0]!r}?" if close
                                                                          else ""))
    return {key: coerce_option(f"{section}.{key}", given.get(key, default), default)
            for key, default in declared.items()}
