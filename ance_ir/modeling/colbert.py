"""ColBERT late interaction, model kind ``colbert``: every token of a text through any ``transformers.AutoModel``
backbone and a ``Linear(hidden, dim)`` projection (128 by default), L2-normalised; a (query, passage) score is
MaxSim, the sum over query tokens of their largest dot product with a passage token.

Queries are ``[CLS] query [SEP]`` padded with ``[MASK]`` tokens to ``query_max_length`` (32): query augmentation.
The ``[MASK]`` positions are not attended to (ColBERTv2's default) but are encoded and scored like the others.
No ``[Q]``/``[D]`` marker tokens are inserted (not every backbone's vocabulary has an unused token for them):
queries and passages are told apart by the ``[MASK]`` padding only. In passages, padding and tokens that are a
single punctuation character are masked out: neither stored in a token index nor scored.

Its passage vectors go to a token index (``index = "tokens"``, :mod:`ance_ir.index.token_index`); it also scores
pairs (:meth:`ColBERT.score_pairs`), so it reranks a run like a cross-encoder (:mod:`ance_ir.rerank`).
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from transformers import BatchEncoding, PreTrainedModel, PreTrainedTokenizerBase

from ance_ir.data.atomic import atomic_directory
from ance_ir.modeling.encoder import load_backbone, load_tokenizer, save_transformer
from ance_ir.modeling.inference import batch_bar, evaluating
from ance_ir.modeling.kinds import (
    choose_settings,
    read_settings,
    register_model_kind,
    text_positions,
    write_records,
)
from ance_ir.modeling.module import KindModule
from ance_ir.modeling.resolve import resolve_model_path, unavailable

CONFIG_NAME = "ance_ir_colbert.json"
PROJECTION_NAME = "ance_ir_colbert_projection.safetensors"
DEFAULTS = {"dim": 128, "query_max_length": 32, "passage_max_length": 256}


def maxsim(queries: torch.Tensor, passages: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """MaxSim scores ``[B, P]`` of query tokens ``[B, Lq, D]`` against passage tokens ``[P, Lp, D]``; ``mask``
    ``[P, Lp]`` is True for the passage tokens that count."""
    sims = torch.einsum("bqd,pld->bpql", queries, passages)
    sims = sims.masked_fill(~mask[None, :, None, :], float("-inf"))
    return sims.max(dim=-1).values.sum(dim=-1)


def maxsim_one(query: np.ndarray, passages: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """MaxSim scores of one query ``[Lq, D]`` against passages stored back to back (``[sum(lengths), D]``)."""
    if not len(lengths):
        return np.empty(0, np.float32)
    sims = query @ passages.T
    starts = np.concatenate([[0], np.cumsum(lengths[:-1])])
    return np.maximum.reduceat(sims, starts, axis=1).sum(axis=0)


def _punctuation_ids(tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """Vocabulary ids of the tokens that are one punctuation character (with or without a ``##`` prefix)."""
    vocab = tokenizer.get_vocab()
    return sorted({vocab[t] for c in string.punctuation for t in (c, "##" + c, "\u0120" + c, "\u2581" + c)
                   if t in vocab})


@register_model_kind
class ColBERT(KindModule):
    """Token vectors compared by MaxSim (late interaction).

    ``fresh_head`` says the projection was newly initialised at load time (a plain backbone: it must be trained
    before its scores mean anything).
    """

    kind = "colbert"
    settings_file = CONFIG_NAME
    index = "tokens"
    #: settings a training config may override (``model.dim``; the lengths are ``model.*_max_length``)
    options = {"dim": DEFAULTS["dim"]}
    #: precision of encoding and scoring when the call names none (see :mod:`ance_ir.modeling.inference`)
    inference_precision: str = "fp32"

    def __init__(self, backbone: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, projection: torch.nn.Linear,
                 query_max_length: int, passage_max_length: int, fresh_head: bool = False):
        super().__init__()
        positions = text_positions(backbone.config)
        for name, value in (("query_max_length", query_max_length), ("passage_max_length", passage_max_length)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 3:
                raise ValueError(f"{name} must be an integer of at least 3 tokens, got {value!r}")
            if positions and value > positions:
                raise ValueError(f"{name} {value} exceeds the model's {positions} positions")
        if tokenizer.mask_token_id is None:
            raise ValueError("the tokenizer has no [MASK] token, which ColBERT's query augmentation needs")
        self.backbone, self.tokenizer, self.projection = backbone, tokenizer, projection
        self.query_max_length, self.passage_max_length, self.fresh_head = query_max_length, passage_max_length, \
            fresh_head
        self.register_buffer("skip_ids", torch.tensor(_punctuation_ids(tokenizer), dtype=torch.long),
                             persistent=False)

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path, dim: int | None = None, query_max_length: int | None = None,
                        passage_max_length: int | None = None, **unknown: Any) -> ColBERT:
        """Load a saved ColBERT or a bare backbone (model dir, alias or hub id; a new projection is initialised for
        a backbone). ``dim`` (of a new projection), ``query_max_length`` (32) and ``passage_max_length`` (256, at
        most the model's positions) win over the saved ones."""
        if unknown:
            raise ValueError(f"{', '.join(sorted(unknown))}: not a setting of a colbert model (it takes dim, "
                             "query_max_length and passage_max_length)")
        path = resolve_model_path(name_or_path)
        saved = read_settings(path, CONFIG_NAME)
        if saved and dim is not None and dim != saved["dim"]:
            raise ValueError(f"{name_or_path}: its projection has dimension {saved['dim']}, not {dim}")
        given = {"dim": dim, "query_max_length": query_max_length, "passage_max_length": passage_max_length}
        try:
            tokenizer = load_tokenizer(path)
            backbone = load_backbone(path)
        except OSError as error:
            raise unavailable(name_or_path, error) from error
        settings = choose_settings(given, saved, DEFAULTS, text_positions(backbone.config),
                                   ("query_max_length", "passage_max_length"))
        if not isinstance(settings["dim"], int) or settings["dim"] < 1:  # given or saved
            raise ValueError(f"dim must be a positive integer, got {settings['dim']!r}")
        projection = torch.nn.Linear(backbone.config.hidden_size, settings["dim"], bias=False)
        weights = Path(path) / PROJECTION_NAME
        fresh = not weights.is_file()
        if fresh:
            torch.nn.init.normal_(projection.weight, std=getattr(backbone.config, "initializer_range", 0.02))
        else:
            projection.load_state_dict(load_file(weights))
        return cls(backbone, tokenizer, projection, settings["query_max_length"], settings["passage_max_length"],
                   fresh).eval()

    def save_pretrained(self, directory: str | Path) -> None:
        """Write weights, tokenizer, projection and ``ance_ir_colbert.json``, replacing ``directory`` as a whole."""
        with atomic_directory(directory) as tmp:
            write_records(tmp, self.records())
            save_transformer(tmp, self.tokenizer, self.backbone)
            save_file({k: v.contiguous() for k, v in self.projection.state_dict().items()}, tmp / PROJECTION_NAME)

    @property
    def settings(self) -> dict[str, int]:
        """What ``ance_ir_colbert.json`` records (and a token index's ``meta.json``)."""
        return {"dim": self.dim, "query_max_length": self.query_max_length,
                "passage_max_length": self.passage_max_length}

    @property
    def dim(self) -> int:
        return self.projection.out_features

    def tokenize_queries(self, texts: Sequence[str]) -> BatchEncoding:
        """Queries cut at ``query_max_length`` and padded to it with ``[MASK]`` (attention mask 0 there)."""
        encoded = self.tokenizer(list(texts), padding="max_length", truncation=True,
                                 max_length=self.query_max_length, return_tensors="pt")
        ids = encoded["input_ids"]
        ids[encoded["attention_mask"] == 0] = self.tokenizer.mask_token_id
        return encoded

    def tokenize_passages(self, texts: Sequence[str]) -> BatchEncoding:
        """Passages cut at ``passage_max_length``, padded to the longest of them."""
        return self.tokenizer(list(texts), padding="longest", truncation=True, max_length=self.passage_max_length,
                              return_tensors="pt")

    def _vectors(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        hidden = self.backbone(**batch).last_hidden_state
        with torch.autocast(self.device.type, enabled=False):
            return F.normalize(self.projection(hidden.float()), p=2, dim=-1)

    def embed_queries(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Query token vectors ``[B, query_max_length, dim]`` (``[MASK]`` positions included), with autograd."""
        return self._vectors({k: v.to(self.device) for k, v in batch.items()})

    def embed_passages(self, batch: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Passage token vectors ``[B, L, dim]`` (zero where masked) and the mask ``[B, L]`` of the tokens that
        count (not padding, not punctuation), with autograd."""
        batch = {k: v.to(self.device) for k, v in batch.items()}
        mask = batch["attention_mask"].bool() & ~torch.isin(batch["input_ids"], self.skip_ids)
        return self._vectors(batch) * mask.unsqueeze(-1), mask

    def encode_queries(self, texts: Sequence[str], batch_size: int = 64, precision: str | None = None,
                       show_progress: bool = False) -> np.ndarray:
        """Query token vectors as float32 ``[N, query_max_length, dim]``, in input order."""
        out = np.empty((len(texts), self.query_max_length, self.dim), dtype=np.float32)
        with evaluating(self, precision) as model:
            for start in batch_bar(range(0, len(texts), batch_size), "encode queries", show_progress):
                batch = model.tokenize_queries(texts[start:start + batch_size])
                out[start:start + batch_size] = model.embed_queries(batch).float().cpu().numpy()
        return out

    def encode_passages(self, texts: Sequence[str], batch_size: int = 32, precision: str | None = None,
                        show_progress: bool = False) -> list[np.ndarray]:
        """The kept token vectors of each passage (float32 ``[n_i, dim]``), in input order; batches take passages
        of similar length."""
        if not texts:
            return []
        lengths = [len(ids) for ids in self.tokenizer(list(texts), truncation=True,
                                                      max_length=self.passage_max_length)["input_ids"]]
        order = sorted(range(len(texts)), key=lambda i: -lengths[i])
        out: list[np.ndarray] = [np.empty((0, self.dim), np.float32)] * len(texts)
        with evaluating(self, precision) as model:
            for start in batch_bar(range(0, len(order), batch_size), "encode passages", show_progress):
                rows = order[start:start + batch_size]
                vectors, mask = model.embed_passages(model.tokenize_passages([texts[i] for i in rows]))
                vectors, mask = vectors.float().cpu().numpy(), mask.cpu().numpy()
                for row, v, m in zip(rows, vectors, mask, strict=True):
                    out[row] = v[m]
        return out

    def score_pairs(self, queries: Sequence[str], passages: Sequence[str], batch_size: int = 32,
                    precision: str | None = None, show_progress: bool = False) -> np.ndarray:
        """MaxSim scores of the pairs ``(queries[i], passages[i])`` as float32 ``[N]``, in input order; each distinct
        query and passage is encoded once."""
        if len(queries) != len(passages):
            raise ValueError(f"{len(queries)} queries but {len(passages)} passages: pairs need one of each")
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        query_texts, passage_texts = list(dict.fromkeys(queries)), list(dict.fromkeys(passages))
        query_row = {q: i for i, q in enumerate(query_texts)}
        passage_row = {p: i for i, p in enumerate(passage_texts)}
        query_vectors = self.encode_queries(query_texts, batch_size, precision, show_progress)
        passage_vectors = self.encode_passages(passage_texts, batch_size, precision, show_progress)
        out = np.empty(len(queries), dtype=np.float32)
        by_query: dict[int, list[int]] = {}
        for i, query in enumerate(queries):
            by_query.setdefault(query_row[query], []).append(i)
        for q, pairs in by_query.items():
            chosen = [passage_vectors[passage_row[passages[i]]] for i in pairs]
            out[pairs] = maxsim_one(query_vectors[q], np.concatenate(chosen), np.array([len(v) for v in chosen]))
        return out

