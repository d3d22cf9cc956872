"""Run fusion: interpolation with Pyserini's min-score fill, and reciprocal rank fusion."""

from ance_ir.fusion.fuse import interpolate, interpolate_tables, reciprocal_rank_fusion, reciprocal_rank_fusion_tables

__all__ = ["interpolate", "interpolate_tables", "reciprocal_rank_fusion", "reciprocal_rank_fusion_tables"]
