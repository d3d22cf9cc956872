"""SPLADE, model kind ``splade``: a text to vocabulary-sized term weights, the max over its tokens of
``log(1 + ReLU(MLM logits))`` (padding masked out), through any ``transformers.AutoModelForMaskedLM``; a (query,
passage) score is the dot product of the two weight vectors.

Weights go to a Lucene impact index (``index = "impact"``, :mod:`ance_ir.index.impact`) as integers,
``round(scale * weight)`` (:func:`quantize`); queries are quantised the same way and searched with Pyserini's
``LuceneImpactSearcher`` (:mod:`ance_ir.search.impact`). The shipped SPLADE-tiny-msmarco loads as ``splade-tiny``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from ance_ir.data.atomic import atomic_directory
from ance_ir.modeling.encoder import save_transformer
from ance_ir.modeling.inference import batch_bar, evaluating
from ance_ir.modeling.kinds import (
    choose_settings,
    read_settings,
    register_model_kind,
    text_positions,
    write_records,
)
from ance_ir.modeling.mlm import load_masked_lm
from ance_ir.modeling.module import KindModule
from ance_ir.modeling.resolve import resolve_model_path

CONFIG_NAME = "ance_ir_splade.json"
DEFAULTS = {"query_max_length": 64, "passage_max_length": 256}
DEFAULT_SCALE = 100


def quantize(weights: Mapping[str, float], scale: float) -> dict[str, int]:
    """Integer impacts ``round(scale * w)``; terms that round to 0 are dropped."""
    out = {t: round(scale * w) for t, w in weights.items()}
    return {t: q for t, q in out.items() if q > 0}


def sparse_dot(query: Mapping[str, int | float], passage: Mapping[str, int | float]) -> int | float:
    """The dot product of two term -> weight vectors."""
    return sum(w * passage[t] for t, w in query.items() if t in passage)


def flops(weights: torch.Tensor) -> torch.Tensor:
    """The FLOPS regulariser of a batch of term weights ``[B, V]``: ``sum_j (mean_i w_ij)^2`` (Paria et al.)."""
    return weights.abs().mean(dim=0).pow(2).sum()


@register_model_kind
class Splade(KindModule):
    """Term weights from an MLM head, max-pooled over the text's tokens."""

    kind = "splade"
    settings_file = CONFIG_NAME
    index = "impact"
    options: dict[str, Any] = {}
    inference_precision: str = "fp32"

    def __init__(self, mlm: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, query_max_length: int,
                 passage_max_length: int, fresh_head: bool = False):
        super().__init__()
        self.fresh_head = fresh_head  # the MLM head was newly initialised (a bare encoder): train it before use
        positions = text_positions(mlm.config)
        for name, value in (("query_max_length", query_max_length), ("passage_max_length", passage_max_length)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 3:
                raise ValueError(f"{name} must be an integer of at least 3 tokens, got {value!r}")
            if positions and value > positions:
                raise ValueError(f"{name} {value} exceeds the model's {positions} positions")
        self.mlm, self.tokenizer = mlm, tokenizer
        self.query_max_length, self.passage_max_length = query_max_length, passage_max_length
        vocab = tokenizer.get_vocab()
        size = mlm.config.vocab_size
        terms = [""] * size
        for term, i in vocab.items():
            if i < size:
                terms[i] = term
        if any(not t or any(c.isspace() for c in t) for t in terms):
            raise ValueError("the tokenizer's vocabulary does not name every output of the MLM head with a term "
                             "free of whitespace (an impact index needs one per dimension)")
        self.terms = terms

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path, query_max_length: int | None = None,
                        passage_max_length: int | None = None, **unknown: Any) -> Splade:
        """Load a saved SPLADE model or any masked-LM checkpoint (model dir, alias or hub id); the lengths win over
        the saved ones (defaults 64 and 256 tokens, at most the model's positions)."""
        if unknown:
            raise ValueError(f"{', '.join(sorted(unknown))}: not a setting of a splade model (it takes "
                             "query_max_length and passage_max_length)")
        saved = read_settings(resolve_model_path(name_or_path), CONFIG_NAME)
        given = {"query_max_length": query_max_length, "passage_max_length": passage_max_length}
        tokenizer, mlm, missing = load_masked_lm(name_or_path)
        settings = choose_settings(given, saved, DEFAULTS, text_positions(mlm.config),
                                   tuple(DEFAULTS))
        return cls(mlm, tokenizer, settings["query_max_length"], settings["passage_max_length"],
                   bool(missing)).eval()

    def save_pretrained(self, directory: str | Path) -> None:
        """Write the MLM, tokenizer and ``ance_ir_splade.json``, replacing ``directory`` as a whole."""
        with atomic_directory(directory) as tmp:
            write_records(tmp, self.records())
            save_transformer(tmp, self.tokenizer, self.mlm)

    @property
    def settings(self) -> dict[str, int]:
        """What ``ance_ir_splade.json`` records (and an impact index's ``meta.json``)."""
        return {"query_max_length": self.query_max_length, "passage_max_length": self.passage_max_length}

    def tokenize(self, texts: Sequence[str], max_length: int) -> Mapping[str, torch.Tensor]:
        """Texts cut at ``max_length`` tokens, padded to the longest."""
        return self.tokenizer(list(texts), padding="longest", truncation=True, max_length=max_length,
                              return_tensors="pt")

    def embed(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Term weights ``[B, V]``: max over the attended tokens of ``log(1 + ReLU(logits))``, with autograd.

        ``log(1 + ReLU(x))`` is non-decreasing, so it is applied after the max over the tokens: the same weights
        (and gradients) without three ``[B, L, V]`` tensors."""
        batch = {k: v.to(self.device) for k, v in batch.items()}
        logits = self.mlm(**batch).logits
        with torch.autocast(self.device.type, enabled=False):
            padding = (batch["attention_mask"] == 0).unsqueeze(-1)
            top = logits.float().masked_fill(padding, float("-inf")).max(dim=1).values
            return torch.log1p(torch.relu(top))

    def encode(self, texts: Sequence[str], max_length: int, batch_size: int = 32, precision: str | None = None,
               show_progress: bool = False) -> list[dict[str, float]]:
        """Each text's non-zero term weights ``{term: weight}``, in input order (batches of similar length)."""
        if not texts:
            return []
        lengths = [len(ids) for ids in self.tokenizer(list(texts), truncation=True, max_length=max_length)
                   ["input_ids"]]
        order = sorted(range(len(texts)), key=lambda i: -lengths[i])
        out: list[dict[str, float]] = [{} for _ in texts]
        with evaluating(self, precision) as model:
            for start in batch_bar(range(0, len(order), batch_size), "encode", show_progress):
                rows = order[start:start + batch_size]
                weights = model.embed(model.tokenize([texts[i] for i in rows], max_length)).cpu()
                for row, w in zip(rows, weights, strict=True):
                    nonzero = w.nonzero().squeeze(-1).tolist()
                    out[row] = dict(zip((self.terms[j] for j in nonzero), w[nonzero].tolist(), strict=True))
        return out

    def encode_queries(self, texts: Sequence[str], batch_size: int = 64, precision: str | None = None,
                       show_progress: bool = False) -> list[dict[str, float]]:
        return self.encode(texts, self.query_max_length, batch_size, precision, show_progress)

    def encode_passages(self, texts: Sequence[str], batch_size: int = 32, precision: str | None = None,
                        show_progress: bool = False) -> list[dict[str, float]]:
        return self.encode(texts, self.passage_max_length, batch_size, precision, show_progress)
