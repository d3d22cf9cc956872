"""The pipeline's negatives stage: candidate sources (BM25, dense, a run file), mining, training groups."""

from ance_ir.negatives.mining import MiningReport, build_groups, check_mining_params, mine, positive_score
from ance_ir.negatives.sources import (
    CANDIDATE_SOURCES,
    BM25Source,
    CandidateSource,
    DenseSource,
    RunSource,
    build_source,
    register_source,
)

__all__ = [
    "CANDIDATE_SOURCES", "BM25Source", "CandidateSource", "DenseSource", "MiningReport", "RunSource",
    "build_groups", "build_source", "check_mining_params", "mine", "positive_score", "register_source",
]
