"""Run fusion: interpolation with Pyserini's min-score fill, and reciprocal rank fusion."""

from ance_ir.fusion.fuse import interpolate, reciprocal_rank_fusion

__all__ = ["interpolate", "reciprocal_rank_fusion"]
