"""DeepCT (Dai and Callan, 2020), model kind ``deepct``: a BERT that predicts each word's importance in its passage.

A linear head on every token's state regresses the word's query term recall, ``QTR(t, d)``: the share of the
queries judged relevant to ``d`` that contain ``t`` (:func:`term_recall`, the training target of ``task: deepct``).
A word's weight is the head's output on its first word piece, its largest over the word's occurrences, at least 0.
Words are the lowercased ``\\w+`` runs of the text (:func:`words`), for passages and queries alike.

A text longer than ``max_length`` word pieces loses its end, as in DeepCT; with ``windows`` > 1 (HDCT, Dai and
Callan's document version) it is cut into consecutive windows of ``max_length`` pieces, the first ``windows`` are
scored, and each word's weights over them are aggregated (``aggregation``: max, sum, or sum decayed by position).

The weights go to a Lucene impact index like SPLADE's (``index = "impact"``, :mod:`ance_ir.index.impact`): each word
of a passage with the integer ``round(scale * weight)``, DeepCT's term frequency with scale 100; a query is its
words with weight 1, so a passage scores the sum of its query words' impacts. ``python -m ance_ir.index.rewrite``
writes those impacts as text (each word repeated), the passages BM25 indexes in DeepCT's own setup.

DeepCT-Query (``target: query``) weights the other side: trained on each training query's term recall ``TR(t, q)``,
the share of the passages judged relevant to ``q`` that contain ``t``, it gives a query's words their predicted
weights (``encode_queries``), which ``python -m ance_ir.bm25 search --query-weights MODEL`` turns into a weighted
BM25 query over the unchanged passages.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from transformers import PreTrainedModel, PreTrainedTokenizerBase

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

CONFIG_NAME = "ance_ir_deepct.json"
HEAD_NAME = "ance_ir_deepct_head.safetensors"
DEFAULTS = {"max_length": 256, "windows": 1, "aggregation": "max", "target": "passage"}
AGGREGATIONS = ("max", "sum", "decay")
#: what the model weights: passage words (DeepCT, HDCT) or query words (DeepCT-Query)
TARGETS = ("passage", "query")
_WORD = re.compile(r"\w+")


def words(text: str) -> list[str]:
    """The lowercased ``\\w+`` runs of ``text``, in order."""
    return _WORD.findall(text.lower())


def term_recall(passage: str, queries: Sequence[str]) -> dict[str, float]:
    """``QTR(t, d)`` of every word ``t`` of ``passage``: the share of ``queries`` (those judged relevant to it) that
    contain ``t``."""
    query_words = [set(words(q)) for q in queries]
    return {t: sum(t in q for q in query_words) / len(query_words) for t in dict.fromkeys(words(passage))}


@register_model_kind
class DeepCT(KindModule):
    """A transformer with a linear head scoring each word of a text."""

    kind = "deepct"
    settings_file = CONFIG_NAME
    index = "impact"
    options = dict(DEFAULTS)
    inference_precision: str = "fp32"

    def __init__(self, backbone: PreTrainedModel, head: torch.nn.Linear, tokenizer: PreTrainedTokenizerBase,
                 max_length: int, windows: int = 1, aggregation: str = "max", target: str = "passage",
                 fresh_head: bool = False):
        super().__init__()
        self.fresh_head = fresh_head  # the term-weight head was newly initialised (a bare backbone): train it first
        if target not in TARGETS:
            raise ValueError(f"target must be one of {', '.join(TARGETS)}, got {target!r}")
        self.target = target
        if not isinstance(windows, int) or isinstance(windows, bool) or windows < 1:
            raise ValueError(f"windows must be a positive integer, got {windows!r}")
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation must be one of {', '.join(AGGREGATIONS)}, got {aggregation!r}")
        self.windows, self.aggregation = windows, aggregation
        positions = text_positions(backbone.config)
        if not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 3:
            raise ValueError(f"max_length must be an integer of at least 3 tokens, got {max_length!r}")
        if positions and max_length > positions:
            raise ValueError(f"max_length {max_length} exceeds the model's {positions} positions")
        if not tokenizer.is_fast:
            raise ValueError("DeepCT needs a fast tokenizer (word alignment of the word pieces)")
        self.backbone, self.head, self.tokenizer, self.max_length = backbone, head, tokenizer, max_length

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path, max_length: int | None = None, windows: int | None = None,
                        aggregation: str | None = None, target: str | None = None, **unknown: Any) -> DeepCT:
        """Load a saved DeepCT model or start one from any encoder checkpoint (a new head); the settings given win
        over the saved ones."""
        if unknown:
            raise ValueError(f"{', '.join(sorted(unknown))}: not a setting of a deepct model (it takes max_length, "
                             "windows, aggregation and target)")
        path = resolve_model_path(name_or_path)
        saved = read_settings(path, CONFIG_NAME)
        try:
            tokenizer = load_tokenizer(path)
            backbone = load_backbone(path)  # no pooler: a parameter without gradient stops DDP
        except OSError as error:
            raise unavailable(name_or_path, error) from error
        head, fresh = torch.nn.Linear(backbone.config.hidden_size, 1), not (Path(path) / HEAD_NAME).is_file()
        if not fresh:
            head.load_state_dict(load_file(Path(path) / HEAD_NAME))
        given = {"max_length": max_length, "windows": windows, "aggregation": aggregation, "target": target}
        settings = choose_settings(given, saved, DEFAULTS, text_positions(backbone.config),
                                   ("max_length",))
        return cls(backbone, head, tokenizer, **settings, fresh_head=fresh).eval()

    def save_pretrained(self, directory: str | Path) -> None:
        """Write the backbone, head, tokenizer and ``ance_ir_deepct.json``, replacing ``directory`` as a whole."""
        with atomic_directory(directory) as tmp:
            write_records(tmp, self.records())
            save_transformer(tmp, self.tokenizer, self.backbone)
            save_file({k: v.contiguous() for k, v in self.head.state_dict().items()}, tmp / HEAD_NAME)

    @property
    def settings(self) -> dict[str, Any]:
        """What ``ance_ir_deepct.json`` and an impact index's ``meta.json`` record of the model."""
        return {"max_length": self.max_length, "windows": self.windows, "aggregation": self.aggregation,
                "target": self.target}

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

    def split_windows(self, text_words: Sequence[str]) -> list[list[str]]:
        """A text's words in consecutive windows of at most ``max_length`` word pieces (special tokens included),
        the first ``windows`` of them; one window cut at ``max_length`` when ``windows`` is 1 (DeepCT)."""
        if self.windows == 1:
            return [list(text_words)]
        pieces = self.tokenizer(list(text_words), is_split_into_words=True, add_special_tokens=False).word_ids()
        counts = [0] * len(text_words)
        for word in pieces:
            counts[word] += 1
        budget = self.max_length - self.tokenizer.num_special_tokens_to_add()
        out: list[list[str]] = [[]]
        used = 0
        for word, count in zip(text_words, counts, strict=True):
            if out[-1] and used + count > budget:
                if len(out) == self.windows:
                    break
                out.append([])
                used = 0
            out[-1].append(word)
            used += count
        return out

    def encode_passages(self, texts: Sequence[str], batch_size: int = 32, precision: str | None = None,
                        show_progress: bool = False) -> list[dict[str, float]]:
        """Each passage's words with their predicted weights (:meth:`term_weights`); refused by a DeepCT-Query
        model."""
        if self.target == "query":
            raise ValueError("a DeepCT-Query model (target: query) weights query words, not passages: search a BM25 "
                             "index of the passages with it (python -m ance_ir.bm25 search --query-weights MODEL)")
        return self.term_weights(texts, batch_size, precision, show_progress)

    def term_weights(self, texts: Sequence[str], batch_size: int = 32, precision: str | None = None,
                     show_progress: bool = False) -> list[dict[str, float]]:
        """Each text's words with a positive weight ``{word: weight}``: the largest over a window's occurrences,
        then, over the windows of a long text (HDCT), their ``aggregation``: the largest, the sum, or the sum with
        window ``i`` (from 0) weighted ``1 / (i + 1)`` (decay)."""
        windows = [(row, i, w) for row, text in enumerate(texts) for i, w in enumerate(self.split_windows(words(text)))]
        order = sorted(range(len(windows)), key=lambda k: -len(windows[k][2]))
        out: list[dict[str, float]] = [{} for _ in texts]
        with evaluating(self, precision) as model:
            for start in batch_bar(range(0, len(order), batch_size), "encode", show_progress):
                chosen = [windows[k] for k in order[start:start + batch_size]]
                scores = model.word_scores(*model.tokenize([w for _, _, w in chosen])).float().cpu()
                for (row, i, window), values in zip(chosen, scores.tolist(), strict=True):
                    self._aggregate(out[row], window, values, i)
        return [{t: w for t, w in weights.items() if w > 0} for weights in out]

    def _aggregate(self, weights: dict[str, float], window: Sequence[str], values: Sequence[float], i: int) -> None:
        """Add window ``i``'s word weights (each word's largest, at least 0) into the text's ``weights``."""
        local: dict[str, float] = {}
        for word, value in zip(window, values, strict=False):
            local[word] = max(local.get(word, 0.0), value)
        for word, value in local.items():
            if self.aggregation == "max":
                weights[word] = max(weights.get(word, 0.0), value)
            else:
                weights[word] = weights.get(word, 0.0) + (value / (i + 1) if self.aggregation == "decay" else value)

    def encode_queries(self, texts: Sequence[str], batch_size: int = 64, precision: str | None = None,
                       show_progress: bool = False) -> list[dict[str, float]]:
        """Each query's words with weight 1 (a passage then scores the sum of their impacts); a DeepCT-Query model's:
        with their predicted weights, those above 0."""
        if self.target == "query":
            return self.term_weights(texts, batch_size, precision, show_progress)
        return [dict.fromkeys(words(t), 1.0) for t in texts]
