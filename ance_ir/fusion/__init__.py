"""Run fusion: interpolation and averaging with Pyserini's min-score fill, and reciprocal rank fusion."""

from ance_ir.fusion.fuse import (
    average,
    average_tables,
    interpolate,
    interpolate_tables,
    reciprocal_rank_fusion,
    reciprocal_rank_fusion_tables,
)

__all__ = ["average", "average_tables", "interpolate", "interpolate_tables", "reciprocal_rank_fusion",
           "reciprocal_rank_fusion_tables"]
