"""Settings of a :class:`~ance_ir.modeling.DenseEncoder`, saved as ``ance_ir_encoder.json`` in its dir."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CONFIG_NAME = "ance_ir_encoder.json"
POOLINGS = ("cls", "mean")


@dataclass(frozen=True)
class EncoderConfig:
    """How token states become one vector per text.

    ``pooling`` picks the first token ("cls") or the mask-aware token mean ("mean"). ``head`` adds ANCE's
    projection, ``Linear(hidden, head_dim)`` then ``LayerNorm(head_dim)``; ``head_dim`` ``None`` means the
    hidden size. ``normalize`` L2-normalises the final vector. ``shared`` makes queries and passages use one
    tower; otherwise each side has its own. Prefixes are prepended verbatim (include any trailing space).
    """

    pooling: str = "cls"
    head: bool = False
    head_dim: int | None = None
    normalize: bool = False
    query_max_length: int = 64
    passage_max_length: int = 256
    shared: bool = True
    query_prefix: str = ""
    passage_prefix: str = ""

    def __post_init__(self) -> None:
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {self.pooling!r}")
        for name in ("query_max_length", "passage_max_length", "head_dim"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name, kind in (("head", bool), ("normalize", bool), ("shared", bool), ("query_prefix", str),
                           ("passage_prefix", str)):
            if not isinstance(getattr(self, name), kind):
                raise ValueError(f"{name} must be a {'boolean' if kind is bool else 'string'}, "
                                 f"got {getattr(self, name)!r}")

    def replace(self, **changes: Any) -> EncoderConfig:
        """A copy with ``changes`` applied; unknown field names raise ValueError."""
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise ValueError(f"unknown encoder config field(s): {', '.join(sorted(unknown))}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EncoderConfig:
        return cls().replace(**data)

    def save(self, directory: str | Path) -> Path:
        """Write ``ance_ir_encoder.json`` into ``directory`` and return its path."""
        path = Path(directory) / CONFIG_NAME
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, directory: str | Path) -> EncoderConfig:
        """Read ``ance_ir_encoder.json`` from ``directory``; InputError naming it for invalid settings."""
        from ance_ir.data import InputError
        from ance_ir.modeling.kinds import read_settings

        path, settings = Path(directory) / CONFIG_NAME, read_settings(directory, CONFIG_NAME)
        try:
            return cls.from_dict(settings)
        except ValueError as e:
            raise InputError(path, str(e)) from None

    @staticmethod
    def exists(directory: str | Path) -> bool:
        """Whether ``directory`` holds a saved encoder config."""
        return (Path(directory) / CONFIG_NAME).is_file()
