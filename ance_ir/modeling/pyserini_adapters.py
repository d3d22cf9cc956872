"""Pyserini encoder interfaces over :class:`~ance_ir.modeling.DenseEncoder`, and the settings under which
Pyserini's own ``AutoQueryEncoder`` reproduces an ance-ir checkpoint (:func:`auto_query_encoder_kwargs`).

``FaissSearcher.search`` calls ``query_encoder.encode(text)`` and expects a 1-D vector; ``batch_search``
calls ``query_encoder.encode_batch(texts)`` when the encoder has it (else ``encode`` per query). Pyserini's
encoding loop calls ``DocumentEncoder.encode(texts=..., titles=..., fp16=..., max_length=..., add_sep=...)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pyserini.encode import DocumentEncoder, QueryEncoder

from ance_ir.modeling.config import EncoderConfig
from ance_ir.modeling.encoder import DenseEncoder
from ance_ir.modeling.kinds import load_model, saved_kind
from ance_ir.modeling.resolve import resolve_model_path


def _as_encoder(encoder: DenseEncoder | str | Path, device: str | None,
                overrides: dict[str, Any]) -> DenseEncoder:
    if isinstance(encoder, DenseEncoder):
        if overrides:
            raise ValueError("config overrides apply only when loading an encoder by name or path")
    else:
        encoder = load_model(encoder, **overrides)
    if encoder.kind != "dense":  # ME-BERT and the poly-encoder subclass DenseEncoder but give several vectors
        raise ValueError(f"a {encoder.kind!r} model has no single-vector encoding for Pyserini's FaissSearcher")
    return encoder.to(device) if device is not None else encoder


class AnceIrQueryEncoder(QueryEncoder):
    """Pyserini query encoder backed by a DenseEncoder (or a name/path loaded with ``config_overrides``)."""

    def __init__(self, encoder: DenseEncoder | str | Path, device: str | None = None, batch_size: int = 64,
                 **config_overrides: Any):
        super().__init__()
        self.encoder = _as_encoder(encoder, device, config_overrides)
        self.batch_size = batch_size
        self.has_model = True

    @classmethod
    def for_index(cls, index: str | Path, device: str | None = None, batch_size: int = 64) -> AnceIrQueryEncoder:
        """The query encoder that an index of ``python -m ance_ir.encode`` records in its ``meta.json``, with the
        settings it was encoded with (an index built with ``--pooling mean`` is searched with mean-pooled queries,
        as ``python -m ance_ir.search`` does; a name alone would load the model's own pooling)."""
        from ance_ir.index import load_dense_index
        from ance_ir.search.dense import encoder_for_index

        return cls(encoder_for_index(load_dense_index(index, mmap=True), None), device, batch_size)

    def encode(self, query: str, **kwargs: Any) -> np.ndarray:
        """The query's vector, float32 ``[D]``; extra Pyserini keyword arguments are ignored."""
        return self.encoder.encode_queries([query])[0]

    def encode_batch(self, queries: Sequence[str]) -> np.ndarray:
        """Vectors for many queries, float32 ``[N, D]`` (used by ``FaissSearcher.batch_search``)."""
        return self.encoder.encode_queries(queries, batch_size=self.batch_size)


class AnceIrDocumentEncoder(DocumentEncoder):
    """Pyserini passage encoder backed by a DenseEncoder (or a name/path loaded with ``config_overrides``)."""

    def __init__(self, encoder: DenseEncoder | str | Path, device: str | None = None, batch_size: int = 32,
                 **config_overrides: Any):
        self.encoder = _as_encoder(encoder, device, config_overrides)
        self.batch_size = batch_size

    def encode(self, texts: Sequence[str], titles: Sequence[str] | None = None, add_sep: bool = False,
               **kwargs: Any) -> np.ndarray:
        """Passage vectors, float32 ``[N, D]``; a title is joined to its text with a space.

        Truncation comes from the encoder config, so Pyserini's ``max_length`` and ``fp16`` are ignored;
        ``add_sep`` (title and text as a segment pair) is not supported.
        """
        if add_sep and titles is not None:
            raise ValueError("add_sep is not supported; titles are joined to texts with a space")
        if titles is not None:
            texts = [f"{title} {text}" for title, text in zip(titles, texts, strict=True)]
        return self.encoder.encode_passages(texts, batch_size=self.batch_size)


def _joins_with_one_space(prefix: str) -> bool:
    return not prefix or (prefix.endswith(" ") and not prefix[:-1].endswith(" ") and bool(prefix.strip()))


def auto_query_encoder_kwargs(path: str | Path) -> dict[str, Any]:
    """``pooling``, ``l2_norm`` and ``prefix`` for Pyserini's ``AutoQueryEncoder`` on a saved ance-ir encoder.

    ``AutoQueryEncoder(path, **auto_query_encoder_kwargs(path))`` (on the command line ``--encoder-class auto
    --pooling P [--l2-norm] [--query-prefix X]``) then gives the query vectors of ``encode_queries``: it runs
    the folder's backbone with ``AutoModel``, takes the first token or the mean over all tokens (the masked
    mean, as ``FaissSearcher`` encodes one unpadded query at a time), L2-normalises if asked, and prepends
    ``prefix + " "``. It never truncates at ``query_max_length``, so queries longer than that (64 tokens by
    default) differ.

    Raises ValueError for what it cannot reproduce: the ANCE head (it would return the pooled vector without
    Linear + LayerNorm, silently wrong), separate query/passage towers (no backbone at the top of the
    folder), and a query prefix that is not text followed by one space; use :class:`AnceIrQueryEncoder` for those.
    """
    folder = resolve_model_path(path)
    if not EncoderConfig.exists(folder):
        raise ValueError(f"{path}: not a saved ance-ir encoder folder (no ance_ir_encoder.json)")
    kind = saved_kind(folder)
    if kind not in (None, "dense"):
        raise ValueError(f"{path}: a {kind!r} model has no single-vector encoding for Pyserini's AutoQueryEncoder")
    config = EncoderConfig.load(folder)
    refused = [reason for reason, applies in (
        ("it has the ANCE head (Linear + LayerNorm after pooling), which AutoQueryEncoder does not apply",
         config.head),
        ("it has separate query and passage towers", not config.shared),
        (f"its query prefix {config.query_prefix!r} is not text followed by one space (AutoQueryEncoder "
         "joins prefix and query with one)", not _joins_with_one_space(config.query_prefix)),
    ) if applies]
    if refused:
        raise ValueError(f"{path}: Pyserini's AutoQueryEncoder cannot reproduce this encoder's query vectors: "
                         f"{'; '.join(refused)}. Use ance_ir.modeling.pyserini_adapters.AnceIrQueryEncoder.")
    return {"pooling": config.pooling, "l2_norm": config.normalize, "prefix": config.query_prefix[:-1] or None}
