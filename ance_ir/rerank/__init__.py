"""Reranking a first-stage run (BM25, dense, hybrid) with a cross-encoder or a poly-encoder, and their scores as
teacher scores of training groups; ``python -m ance_ir.rerank``.

Torch-free to import (the model comes in as an argument), so that ``--help`` starts at once.
"""

from ance_ir.rerank.rerank import RERANK_KINDS, check_run, load_reranker, passages_for, rerank
from ance_ir.rerank.teacher import group_passages, score_groups

__all__ = ["RERANK_KINDS", "check_run", "group_passages", "load_reranker", "passages_for", "rerank", "score_groups"]
