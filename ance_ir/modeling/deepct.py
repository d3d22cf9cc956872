"""DeepCT (Dai and Callan, 2020), model kind ``deepct``: a BERT that predicts each word's importance in its passage.

A linear head on every token's state regresses the word's query term recall, ``QTR(t, d)``: the share of the
queries judged relevant to ``d`` that contain ``t`` (:func:`term_recall`, the training target of ``task: deepct``).
A word's weight is the head's output on its first word piece, its largest over the word's occurrences, at least 0.
Words are the lowercased ``\\w+`` runs of the text (:func:`words`), for passages and queries alike.

The weights go to a Lucene impact index like SPLADE's (``index = "impact"``, :mod:`ance_ir.index.impact`): each word
of a passage with the integer ``round(scale * weight)``, DeepCT's term frequency with scale 100; a query is its
words with weight 1, so a passage scores the sum of its query words' impacts. :func:`rewrite` writes the same term
frequencies as text (each word repeated), the passage BM25 indexes in DeepCT's own setup.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from tqdm import tqdm
from transformers import AutoModel, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from ance_ir.data.atomic import atomic_directory
from ance_ir.modeling.cross_encoder import _quiet
from ance_ir.modeling.inference import evaluating
from ance_ir.modeling.kinds import register_model_kind, write_kind
from ance_ir.modeling.resolve import resolve_model_path, unavailable

CONFIG_NAME = "ance_ir_deepct.json"
HEAD_NAME = "ance_ir_deepct_head.safetensors"
DEFAULT_MAX_LENGTH = 256
_WORD = re.compile(r"\w+")


def words(text: str) -> list[str]:
    """The lowercased ``\\w+`` runs of ``text``, in order."""
    return _WORD.findall(text.lower())


def term_recall(passage: str, queries: Sequence[str]) -> dict[str, float]:
    """``QTR(t, d)`` of every word ``t`` of ``passage``: the share of ``queries`` (those judged relevant to it) that
    contain ``t``."""
    query_words = [set(words(q)) for q in queries]
    return {t: sum(t in q for q in query_words) / len(query_words) for t in dict.fromkeys(words(passage))}


def rewrite(weights: Mapping[str, float], scale: float) -> str:
    """A passage as DeepCT indexes it for BM25: each word repeated ``round(scale * weight)`` times."""
    return " ".join(" ".join([t] * round(scale * w)) for t, w in weights.items() if round(scale * w) > 0)


@register_model_kind
class DeepCT(torch.nn.Module):
    """A transformer with a linear head scoring each word of a text."""

    kind = "deepct"
    index = "impact"
    options = {"max_length": DEFAULT_MAX_LENGTH}
    inference_precision: str = "fp32"

    def __init__(self, backbone: PreTrainedModel, head: torch.nn.Linear, tokenizer: PreTrainedTokenizerBase,
                 max_length: int):
        super().__init__()
        positions = getattr(backbone.config, "max_position_embeddings", None)
        if not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 3:
            raise ValueError(f"max_length must be an integer of at least 3 tokens, got {max_length!r}")
        if positions and max_length > positions:
            raise ValueError(f"max_length {max_length} exceeds the model's {positions} positions")
        if not tokenizer.is_fast:
            raise ValueError("DeepCT needs a fast tokenizer (word alignment of the word pieces)")
        self.backbone, self.head, self.tokenizer, self.max_length = backbone, head, tokenizer, max_length

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path, max_length: int | None = None, **unknown: Any) -> DeepCT:
        """Load a saved DeepCT model or start one from any encoder checkpoint (a new head)."""
        if unknown:
            raise ValueError(f"{', '.join(sorted(unknown))}: not a setting of a deepct model (it takes max_length)")
        path = resolve_model_path(name_or_path)
        settings_file = Path(path) / CONFIG_NAME
        saved = json.loads(settings_file.read_text(encoding="utf-8")) if settings_file.is_file() else {}
        try:
            tokenizer = AutoTokenizer.from_pretrained(path)
            with _quiet():
                backbone = AutoModel.from_pretrained(path, dtype=torch.float32)
        except OSError as error:
            raise unavailable(name_or_path, error) from error
        head = torch.nn.Linear(backbone.config.hidden_size, 1)
        if (Path(path) / HEAD_NAME).is_file():
            head.load_state_dict(load_file(Path(path) / HEAD_NAME))
        positions = getattr(backbone.config, "max_position_embeddings", None) or DEFAULT_MAX_LENGTH
        length = max_length if max_length is not None else saved.get("max_length", min(DEFAULT_MAX_LENGTH,
                                                                                          positions))
        return cls(backbone, head, tokenizer, length).eval()

    def save_pretrained(self, directory: str | Path) -> None:
        """Write the backbone, head, tokenizer and ``ance_ir_deepct.json``, replacing ``directory`` as a whole."""
        with atomic_directory(directory) as tmp:
            write_kind(tmp, self.kind)
            (tmp / CONFIG_NAME).write_text(json.dumps({"max_length": self.max_length}, indent=2) + "\n",
                                           encoding="utf-8")
            self.tokenizer.save_pretrained(tmp)
            with _quiet():
                self.backbone.save_pretrained(tmp)
            save_file({k: v.contiguous() for k, v in self.head.state_dict().items()}, tmp / HEAD_NAME)

    @property
    def settings(self) -> dict[str, int]:
        """What an impact index's ``meta.json`` records of the model."""
        return {"max_length": self.max_length}

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def tokenize(self, texts: Sequence[Sequence[str]]) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """Word lists as model inputs, and ``[B, W]`` the position of each word's first word piece (-1 where the
        text was cut before it; ``W`` the longest list)."""
        encoded = self.tokenizer([list(t) for t in texts], is_split_into_words=True, truncation=True,
                                 max_length=self.max_length, padding="longest", return_tensors="pt")
        first = torch.full((len(texts), max((len(t) for t in texts), default=0)), -1, dtype=torch.long)
        for row in range(len(texts)):
            for position, word in reversed(list(enumerate(encoded.word_ids(row)))):
                if word is not None:
                    first[row, word] = position
        return {k: v for k, v in encoded.items() if k != "token_type_ids" or v.any()}, first

    def word_scores(self, inputs: Mapping[str, torch.Tensor], first: torch.Tensor) -> torch.Tensor:
        """The head's output on each word's first word piece ``[B, W]`` (0 where ``first`` is -1), with autograd."""
        inputs = {k: v.to(self.device) for k, v in inputs.items()}
        tokens = self.head(self.backbone(**inputs).last_hidden_state).squeeze(-1)
        first = first.to(self.device)
        return tokens.gather(1, first.clamp(min=0)) * (first >= 0)

    def encode_passages(self, texts: Sequence[str], batch_size: int = 32, precision: str | None = None,
                        show_progress: bool = False) -> list[dict[str, float]]:
        """Each passage's words with a positive weight ``{word: weight}`` (the largest over its occurrences)."""
        split = [words(t) for t in texts]
        out: list[dict[str, float]] = [{} for _ in texts]
        order = sorted(range(len(texts)), key=lambda i: -len(split[i]))
        with evaluating(self, precision) as model:
            for start in tqdm(range(0, len(order), batch_size), desc="encode", unit="batch",
                              disable=not show_progress):
                rows = order[start:start + batch_size]
                scores = model.word_scores(*model.tokenize([split[i] for i in rows])).float().cpu()
                for row, values in zip(rows, scores.tolist(), strict=True):
                    weights: dict[str, float] = {}
                    for word, value in zip(split[row], values, strict=False):
                        if value > weights.get(word, 0.0):
                            weights[word] = value
                    out[row] = weights
        return out

    def encode_queries(self, texts: Sequence[str], batch_size: int = 64, precision: str | None = None,
                       show_progress: bool = False) -> list[dict[str, float]]:
        """Each query's words with weight 1 (a passage then scores the sum of their impacts)."""
        return [dict.fromkeys(words(t), 1.0) for t in texts]
