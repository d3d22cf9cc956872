"""Dense dual encoders for ANCE training and retrieval.

The Pyserini adapters live in :mod:`ance_ir.modeling.pyserini_adapters` (importing them loads Pyserini).
"""

from ance_ir.modeling.config import CONFIG_NAME, EncoderConfig
from ance_ir.modeling.encoder import DenseEncoder, Tower
from ance_ir.modeling.inference import PRECISIONS, model_precision, native_bf16, quantize_int8, resolve_precision
from ance_ir.modeling.resolve import ALIASES, ModelNotAvailableError, alias_defaults, resolve_model_path

__all__ = [
    "ALIASES", "CONFIG_NAME", "PRECISIONS", "DenseEncoder", "EncoderConfig", "ModelNotAvailableError", "Tower",
    "alias_defaults", "model_precision", "native_bf16", "quantize_int8", "resolve_model_path", "resolve_precision",
]
