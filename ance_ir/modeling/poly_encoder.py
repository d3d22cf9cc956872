"""Poly-encoder (Humeau et al., 2020), model kind ``poly-encoder``: ``m`` learned code vectors attend over a
query's token states (softmax of their dot products, padding masked) giving ``m`` query vectors; a passage is one
vector (its CLS state); the passage vector attends over the ``m`` query vectors (softmax of dot products), which
gives one query vector, and the score is that vector's dot product with the passage vector.

Why it reranks (``index`` None, :mod:`ance_ir.rerank`) rather than indexing the corpus: the final query vector is a
mixture of the ``m`` code vectors weighted by the *passage*, so the score is not a fixed function of precomputed
query and passage parts that a nearest-neighbour index can search. ColBERT's MaxSim is a sum over query tokens of
a maximum over passage vectors, each term found by an inner-product search of the stored passage vectors; a
poly-encoder score is ``sum_i softmax_i(p . q) (p . q_i)``, not an inner product nor a maximum of inner products,
so no faiss search finds its best passages (one would have to score every passage of the corpus per query).
Passage vectors could be cached, but ranking still needs every (query, passage) pair scored.

The towers, tokenizer, head, saving and loading are the :class:`~ance_ir.modeling.DenseEncoder`'s; the codes are
saved in ``ance_ir_poly_codes.safetensors`` (``m`` is their count). Pooling is always ``cls`` and vectors are not
normalised (the attention needs their dot products).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from transformers import PreTrainedTokenizerBase

from ance_ir.modeling.config import EncoderConfig
from ance_ir.modeling.encoder import DenseEncoder, Tower
from ance_ir.modeling.kinds import register_model_kind

CODES_NAME = "ance_ir_poly_codes.safetensors"
DEFAULT_M = 16
PAIR_BATCH = 4096  # pairs scored at a time from their encodings


def poly_scores(codes: torch.Tensor, passages: torch.Tensor) -> torch.Tensor:
    """Poly-encoder scores ``[..., P]``: each query's ``m`` code vectors ``[..., m, D]`` against passage vectors
    ``[..., P, D]`` (the leading dimensions broadcast). Passage ``p`` weighs the code vectors ``q_i`` by
    ``softmax_i(p . q_i)``; the score is ``p`` dotted with that mixture."""
    logits = torch.einsum("...md,...pd->...pm", codes, passages)
    return (logits.softmax(dim=-1) * logits).sum(dim=-1)


@register_model_kind
class PolyEncoder(DenseEncoder):
    """A query as ``m`` code-attended vectors, a passage as its CLS vector, scored by passage-to-code attention."""

    kind = "poly-encoder"
    index = None
    options = {**DenseEncoder.options, "m": DEFAULT_M}
    sentence_transformers = False  # one vector per text is not what this model computes

    def __init__(self, towers: Mapping[str, Tower], tokenizer: PreTrainedTokenizerBase, config: EncoderConfig,
                 codes: torch.Tensor | int = DEFAULT_M):
        """``codes``: the learned code vectors ``[m, D]``, or a count ``m`` of new ones (initialised as BERT's
        weights are: normal, std ``initializer_range``)."""
        if config.pooling != "cls":
            raise ValueError(f"a poly-encoder encodes a passage as its CLS vector: pooling must be cls, got "
                             f"{config.pooling!r}")
        if config.normalize:
            raise ValueError("a poly-encoder attends with dot products of unnormalised vectors: normalize must be "
                             "false")
        super().__init__(towers, tokenizer, config)
        #: the codes are newly initialised (from a backbone, or another m): to be trained before scores mean anything
        self.fresh_head = isinstance(codes, int)
        if isinstance(codes, int):
            if isinstance(codes, bool) or codes < 1:
                raise ValueError(f"m (code vectors) must be a positive integer, got {codes!r}")
            std = getattr(self.query_tower.backbone.config, "initializer_range", 0.02)
            codes = torch.randn(codes, self.dim) * std
        if codes.ndim != 2 or codes.shape[1] != self.dim:
            raise ValueError(f"codes must have shape [m, {self.dim}], got {tuple(codes.shape)}")
        self.codes = torch.nn.Parameter(codes.float().clone())

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path, m: int | None = None,
                        **config_overrides: Any) -> PolyEncoder:
        """Load as :meth:`DenseEncoder.from_pretrained` does (pooling cls, no normalisation unless overridden),
        with the saved codes; ``m`` other than their count (or a model without codes) gets ``m`` new ones (16)."""
        path, towers, tokenizer, config = cls._load_parts(
            name_or_path, **{"pooling": "cls", "normalize": False, **config_overrides})
        codes_file = path / CODES_NAME
        saved = load_file(codes_file)["codes"] if codes_file.is_file() else None
        fresh = saved is None or m not in (None, len(saved))
        return cls(towers, tokenizer, config, (DEFAULT_M if m is None else m) if fresh else saved).eval()

    def _save_files(self, directory: Path) -> None:
        super()._save_files(directory)
        save_file({"codes": self.codes.detach().float().cpu().contiguous()}, directory / CODES_NAME)

    @property
    def m(self) -> int:
        """The number of code vectors."""
        return len(self.codes)

    def embed_queries(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Query code vectors ``[B, m, D]``: each code's softmax attention over the query's token vectors."""
        batch = {k: v.to(self.device) for k, v in batch.items()}
        tokens = self._project(self.query_tower, self.query_tower.backbone(**batch).last_hidden_state)
        logits = torch.einsum("md,btd->bmt", self.codes.to(tokens.dtype), tokens)
        padding = ~batch["attention_mask"].bool().unsqueeze(1)
        weights = logits.masked_fill(padding, float("-inf")).softmax(dim=-1)
        return weights @ tokens

    @staticmethod
    def score(queries: torch.Tensor, passages: torch.Tensor) -> torch.Tensor:
        """Scores ``[Q, P]`` of query code vectors ``[Q, m, D]`` against passage vectors ``[P, D]``."""
        return poly_scores(queries, passages)

    def _vector_shape(self, side: str) -> tuple[int, ...]:
        return (self.m, self.dim) if side == "query" else (self.dim,)

    @torch.inference_mode()
    def score_pairs(self, queries: Sequence[str], passages: Sequence[str], batch_size: int = 32,
                    precision: str | None = None, show_progress: bool = False) -> np.ndarray:
        """Scores of the pairs ``(queries[i], passages[i])`` as float32 ``[N]``, in input order.

        Each distinct query and passage text is encoded once (``batch_size`` texts a batch), then every pair is
        scored from its two encodings. ``precision`` as for ``encode_*``.
        """
        if len(queries) != len(passages):
            raise ValueError(f"{len(queries)} queries but {len(passages)} passages: pairs need one of each")
        query_texts, query_rows = _distinct(queries)
        passage_texts, passage_rows = _distinct(passages)
        codes = self.encode_queries(query_texts, batch_size=batch_size, precision=precision,
                                    show_progress=show_progress)
        vectors = self.encode_passages(passage_texts, batch_size=batch_size, precision=precision,
                                       show_progress=show_progress)
        out = np.empty(len(queries), dtype=np.float32)
        for start in range(0, len(queries), PAIR_BATCH):
            rows = slice(start, start + PAIR_BATCH)
            pair_codes = torch.from_numpy(codes[query_rows[rows]])
            pair_vectors = torch.from_numpy(vectors[passage_rows[rows]]).unsqueeze(1)
            out[rows] = poly_scores(pair_codes, pair_vectors)[:, 0].numpy()
        return out


def _distinct(texts: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """The distinct texts (first-seen order) and, for each input, the row of its text among them."""
    rows: dict[str, int] = {}
    index = np.array([rows.setdefault(t, len(rows)) for t in texts], dtype=np.int64)
    return list(rows), index
