"""ME-BERT (Luan et al., 2021), model kind ``mebert``: a query is one vector (its CLS state, as the dense
encoder's), a passage is the states of its first ``m`` tokens (CLS first), and the score is the largest dot
product of the query vector with the ``m`` passage vectors. ``m = 1`` is the dense CLS dual encoder (BERT_DOT).

A passage of fewer than ``m`` tokens (special tokens counted) fills its missing vectors with copies of its CLS
vector, which leaves the maximum unchanged and every passage with exactly ``m`` vectors. The ``m`` vectors of each
passage go to a faiss index in Pyserini's layout (``index = "mebert"``, see :mod:`ance_ir.index.dense_index`): row
``i*m + j`` is vector ``j`` of passage ``i`` and the ``docid`` file repeats each docid ``m`` times; its search
keeps each passage's best vector.

The towers, tokenizer, head, normalisation, saving and loading are the :class:`~ance_ir.modeling.DenseEncoder`'s;
``m`` is saved in ``ance_ir_mebert.json``. Pooling is always ``cls``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedTokenizerBase

from ance_ir.data import InputError
from ance_ir.modeling.config import EncoderConfig
from ance_ir.modeling.encoder import DenseEncoder, Tower
from ance_ir.modeling.first_tokens import last_states
from ance_ir.modeling.kinds import read_settings, register_model_kind

SETTINGS_NAME = "ance_ir_mebert.json"
DEFAULT_M = 4


def max_scores(queries: torch.Tensor, passages: torch.Tensor) -> torch.Tensor:
    """ME-BERT scores ``[..., P]``: query vectors ``[..., D]`` against passages' vectors ``[..., P, m, D]``, each
    passage scored by its best vector (the leading dimensions broadcast)."""
    return torch.einsum("...d,...pmd->...pm", queries, passages).amax(dim=-1)


@register_model_kind
class MeBertEncoder(DenseEncoder):
    """A dense encoder whose passages are their first ``m`` token vectors, scored by the best of them."""

    kind = "mebert"
    index = "mebert"
    options = {**DenseEncoder.options, "m": DEFAULT_M}
    sentence_transformers = False  # one vector per text is not what this model computes

    def __init__(self, towers: Mapping[str, Tower], tokenizer: PreTrainedTokenizerBase, config: EncoderConfig,
                 m: int = DEFAULT_M):
        if not isinstance(m, int) or isinstance(m, bool) or m < 1:
            raise ValueError(f"m (vectors per passage) must be a positive integer, got {m!r}")
        if config.pooling != "cls":
            raise ValueError(f"ME-BERT encodes a query as its CLS vector: pooling must be cls, got {config.pooling!r}")
        super().__init__(towers, tokenizer, config)
        self.m = m

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path, m: int | None = None,
                        **config_overrides: Any) -> MeBertEncoder:
        """Load as :meth:`DenseEncoder.from_pretrained` does (pooling cls unless overridden); ``m``: the saved one,
        else 4."""
        path, towers, tokenizer, config = cls._load_parts(name_or_path, **{"pooling": "cls", **config_overrides})
        if m is None:
            m = read_settings(path, SETTINGS_NAME).get("m", DEFAULT_M)
            if not isinstance(m, int) or isinstance(m, bool) or m < 1:
                raise InputError(path / SETTINGS_NAME, f"m (vectors per passage) must be a positive integer, "
                                                       f"got {m!r}")
        return cls(towers, tokenizer, config, m).eval()

    def records(self) -> dict[str, dict[str, Any]]:
        """The dense encoder's records, and ``m`` in ``ance_ir_mebert.json``."""
        return {**super().records(), SETTINGS_NAME: {"m": self.m}}

    @property
    def vectors_per_passage(self) -> int:
        """Rows each passage takes in the index: ``m``."""
        return self.m

    def embed_passages(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Passage vectors ``[B, m, D]``: the first ``m`` token states (CLS copies past a passage's end); in eval
        mode a BERT's last layer runs for those ``m`` tokens alone (:mod:`ance_ir.modeling.first_tokens`)."""
        batch = {k: v.to(self.device) for k, v in batch.items()}
        hidden = last_states(self, self.passage_tower.backbone, batch, self.m)
        positions = torch.arange(self.m, device=hidden.device)
        inside = positions < hidden.shape[1]
        taken = hidden[:, positions.clamp(max=hidden.shape[1] - 1)]
        real = batch["attention_mask"][:, positions.clamp(max=hidden.shape[1] - 1)].bool() & inside
        vectors = torch.where(real.unsqueeze(-1), taken, hidden[:, :1])
        return self._project(self.passage_tower, vectors)

    @staticmethod
    def score(queries: torch.Tensor, passages: torch.Tensor) -> torch.Tensor:
        """Scores ``[Q, P]`` of query vectors ``[Q, D]`` against passage vectors ``[P, m, D]``."""
        return max_scores(queries, passages)

    def _vector_shape(self, side: str) -> tuple[int, ...]:
        return (self.dim,) if side == "query" else (self.m, self.dim)
