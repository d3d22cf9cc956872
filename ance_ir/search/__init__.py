"""Dense and hybrid search to TREC runs.

Names are imported on first use, so that ``python -m ance_ir.search --help`` does not load torch.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["DenseSearcher", "encoder_for_index", "resolve_index"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'ance_ir.search' has no attribute {name!r}")
    return getattr(importlib.import_module("ance_ir.search.dense"), name)
