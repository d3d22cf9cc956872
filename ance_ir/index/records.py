"""The model an index's ``meta.json`` records (``encoder``, ``kind``, ``encoder_config``), checked for its types."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ance_ir.data import InputError

#: each recorded field, the type it must have, and how an error names it
MODEL_FIELDS = (("encoder", str, "a string"), ("kind", str, "a string"),
                ("encoder_config", dict, "a JSON object of the encoder's settings"))


def check_model_record(path: str | Path, meta: dict[str, Any]) -> None:
    """InputError naming ``path`` (the ``meta.json``) for a recorded model field of the wrong type."""
    for key, kind, what in MODEL_FIELDS:
        if key in meta and not isinstance(meta[key], kind):
            raise InputError(path, f"{key} must be {what}, got {meta[key]!r}")
