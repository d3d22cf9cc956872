"""Dense and hybrid search to TREC runs."""

from ance_ir.search.dense import DenseSearcher, encoder_for_index, resolve_index

__all__ = ["DenseSearcher", "encoder_for_index", "resolve_index"]
