"""Inner-product faiss indexes and dense index folders in Pyserini's on-disk layout."""

from ance_ir.index.dense_index import (
    DOCID_FILE,
    INDEX_FILE,
    META_FILE,
    VECTORS_FILE,
    DenseIndex,
    check_docid,
    concat_vectors,
    load_dense_index,
    merge_indexes,
    passage_index,
    single_vector_index,
    stored_vectors,
    write_dense_index,
)
from ance_ir.index.faiss_index import INDEX_TYPES, build_index, describe_index, ivfpq_defaults, to_gpu

__all__ = [
    "DOCID_FILE", "INDEX_FILE", "INDEX_TYPES", "META_FILE", "VECTORS_FILE", "DenseIndex", "build_index",
    "check_docid", "concat_vectors", "describe_index", "ivfpq_defaults", "load_dense_index", "merge_indexes",
    "passage_index", "single_vector_index", "stored_vectors", "to_gpu", "write_dense_index",
]
