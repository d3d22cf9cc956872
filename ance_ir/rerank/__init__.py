"""Reranking a first-stage run (BM25, dense, hybrid) with a cross-encoder; ``python -m ance_ir.rerank``.

Torch-free to import (the model comes in as an argument), so that ``--help`` starts at once.
"""

from ance_ir.rerank.rerank import check_run, passages_for, rerank

__all__ = ["check_run", "passages_for", "rerank"]
