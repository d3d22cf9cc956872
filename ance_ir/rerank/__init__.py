"""Reranking a first-stage run (BM25, dense, hybrid) with a cross-encoder or ColBERT, and their scores as teacher
scores of training groups; ``python -m ance_ir.rerank``.

Torch-free to import (the model comes in as an argument), so that ``--help`` starts at once.
"""

from ance_ir.rerank.rerank import check_run, check_standalone, load_reranker, passages_for, rerank
from ance_ir.rerank.teacher import MeanScorer, group_passages, score_groups

__all__ = ["MeanScorer", "check_run", "check_standalone", "group_passages", "load_reranker", "passages_for", "rerank",
           "score_groups"]
