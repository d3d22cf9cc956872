"""Dense dual encoders for ANCE training and retrieval.

The Pyserini adapters live in :mod:`ance_ir.modeling.pyserini_adapters` (importing them loads Pyserini).
"""

from ance_ir.modeling.config import CONFIG_NAME, EncoderConfig
from ance_ir.modeling.encoder import DenseEncoder, Tower
from ance_ir.modeling.resolve import ALIASES, ModelNotAvailableError, alias_defaults, resolve_model_path

__all__ = [
    "ALIASES", "CONFIG_NAME", "DenseEncoder", "EncoderConfig", "ModelNotAvailableError", "Tower",
    "alias_defaults", "resolve_model_path",
]
