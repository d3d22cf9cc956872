"""Resumable, chunked, optionally sharded corpus encoding into dense indexes (`python -m ance_ir.encode`)."""

from ance_ir.data.resume import work_folder
from ance_ir.encode.corpus_encoder import Shard, encode_corpus

__all__ = ["Shard", "encode_corpus", "work_folder"]
