"""Cross-encoder (BERT_CAT), model kind ``cross-encoder``: ``[CLS] query [SEP] passage [SEP]`` through any
``transformers.AutoModel`` backbone, scored by ``Linear(hidden, 1)`` on the CLS state.

Every query-passage pair is one forward pass, so it reranks a first-stage run (:mod:`ance_ir.rerank`) rather than
indexing a corpus (``index`` is None). A Hugging Face sequence-classification checkpoint with one label (the
public ``cross-encoder/ms-marco-*`` models) loads too and scores with its own head.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from transformers import (
    AutoConfig,
    AutoModelForSequenceClassification,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from ance_ir.data.atomic import atomic_directory
from ance_ir.modeling.encoder import load_backbone, load_tokenizer, quiet_transformers, save_transformer
from ance_ir.modeling.first_tokens import first_token_bert, first_token_states
from ance_ir.modeling.inference import batch_bar, running
from ance_ir.modeling.kinds import (
    choose_settings,
    read_settings,
    register_model_kind,
    text_positions,
    write_records,
)
from ance_ir.modeling.module import KindModule
from ance_ir.modeling.resolve import resolve_model_path, unavailable
from ance_ir.modeling.tokenize import tokenize_in_threads

CONFIG_NAME = "ance_ir_cross_encoder.json"
HEAD_NAME = "ance_ir_cross_encoder_head.safetensors"
DEFAULT_MAX_LENGTH = 320

Encoded = Mapping[str, Sequence[Sequence[int]]]


def first_stage_problem(weight: Any, depth: Any) -> tuple[str, str] | None:
    """The first of the residual settings (``first_stage_weight``, ``first_stage_depth``; None: not given) whose
    value is not one, with what is wrong: ``(name, message)``; None when both are fine."""
    if weight is not None and (isinstance(weight, bool) or not isinstance(weight, (int, float))
                               or not 0 <= weight < math.inf):
        return "first_stage_weight", f"must be a finite number >= 0, got {weight!r}"
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
        return "first_stage_depth", f"must be a positive integer, got {depth!r}"
    return None


def _is_classifier(config: PretrainedConfig) -> bool:
    """Whether a checkpoint is a whole sequence-classification model (rather than a bare backbone)."""
    return any(a.endswith("ForSequenceClassification") for a in config.architectures or ())


@register_model_kind
class CrossEncoder(KindModule):
    """Scores (query, passage) pairs jointly: a transformer over both texts and a one-number head.

    ``head`` is the ``Linear(hidden, 1)`` on the CLS state, or None when ``backbone`` is a whole
    sequence-classification model whose single logit is the score. ``fresh_head`` says the head was newly
    initialised at load time (a plain backbone: it must be trained before its scores mean anything).
    ``first_stage_weight`` > 0: the model was trained as a residual over a first stage (``task.first_stage``): a
    pair's ranking score is its score plus this times the first stage's score, min-max normalised over the query's
    top ``first_stage_depth`` hits, as :func:`ance_ir.rerank.rerank` adds it; :meth:`score_pairs` returns the
    model's own part.
    """

    kind = "cross-encoder"
    settings_file = CONFIG_NAME
    index = None
    #: settings a training config may override (``model.max_length``)
    options = {"max_length": DEFAULT_MAX_LENGTH, "first_stage_weight": 0.0, "first_stage_depth": 100}
    #: precision of :meth:`score_pairs` when the call names none (see :mod:`ance_ir.modeling.inference`)
    inference_precision: str = "fp32"

    def __init__(self, backbone: PreTrainedModel, tokenizer: PreTrainedTokenizerBase,
                 head: torch.nn.Linear | None, max_length: int, fresh_head: bool = False,
                 first_stage_weight: float = 0.0, first_stage_depth: int = 100):
        super().__init__()
        positions = text_positions(backbone.config)
        if not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 3:
            raise ValueError(f"max_length must be an integer of at least 3 tokens, got {max_length!r}")
        if positions and max_length > positions:
            raise ValueError(f"max_length {max_length} exceeds the model's {positions} positions")
        if problem := first_stage_problem(first_stage_weight, first_stage_depth):
            raise ValueError(" ".join(problem))
        self.first_stage_weight, self.first_stage_depth = float(first_stage_weight), first_stage_depth
        self.backbone, self.head, self.tokenizer = backbone, head, tokenizer
        self.max_length, self.fresh_head = max_length, fresh_head

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path, max_length: int | None = None,
                        first_stage_weight: float | None = None, first_stage_depth: int | None = None,
                        **unknown: Any) -> CrossEncoder:
        """Load a saved cross-encoder, a sequence-classification checkpoint with one label, or a bare backbone
        (model dir, alias or hub id; a new head is initialised for a backbone).

        ``max_length`` (pair tokens, special tokens included) wins over the saved one; default 320, at most
        the model's positions. ``first_stage_weight`` (default 0: no first stage) and ``first_stage_depth``
        (100) likewise.
        """
        if unknown:
            raise ValueError(f"{', '.join(sorted(unknown))}: not a setting of a cross-encoder (it takes max_length, "
                             "first_stage_weight and first_stage_depth)")
        path = resolve_model_path(name_or_path)
        try:
            config = AutoConfig.from_pretrained(path)
            tokenizer = load_tokenizer(path)
            if _is_classifier(config):
                if config.num_labels != 1:
                    raise ValueError(f"{name_or_path}: a sequence-classification model with {config.num_labels} "
                                     "labels; a cross-encoder scores with one")
                with quiet_transformers():
                    backbone = AutoModelForSequenceClassification.from_pretrained(path, dtype=torch.float32)
                head, fresh = None, False
            else:
                backbone = load_backbone(path)
                head = torch.nn.Linear(backbone.config.hidden_size, 1)
                head_file = Path(path) / HEAD_NAME
                fresh = not head_file.is_file()
                if fresh:
                    torch.nn.init.normal_(head.weight, std=getattr(backbone.config, "initializer_range", 0.02))
                    torch.nn.init.zeros_(head.bias)
                else:
                    head.load_state_dict(load_file(head_file))
        except OSError as error:
            raise unavailable(name_or_path, error) from error
        settings = choose_settings({"max_length": max_length, "first_stage_weight": first_stage_weight,
                                    "first_stage_depth": first_stage_depth},
                                   read_settings(path, CONFIG_NAME), cls.options,
                                   text_positions(config), ("max_length",))
        return cls(backbone, tokenizer, head, settings["max_length"], fresh, settings["first_stage_weight"],
                   settings["first_stage_depth"]).eval()

    def save_pretrained(self, directory: str | Path) -> None:
        """Write weights, tokenizer, head and ``ance_ir_cross_encoder.json``, replacing ``directory`` as a whole."""
        with atomic_directory(directory) as tmp:
            write_records(tmp, self.records())
            save_transformer(tmp, self.tokenizer, self.backbone)
            if self.head is not None:
                save_file({k: v.contiguous() for k, v in self.head.state_dict().items()}, tmp / HEAD_NAME)

    @property
    def settings(self) -> dict[str, Any]:
        """What ``ance_ir_cross_encoder.json`` records."""
        return {"max_length": self.max_length, "first_stage_weight": self.first_stage_weight,
                "first_stage_depth": self.first_stage_depth}

    def tokenize_pairs(self, queries: Sequence[str], passages: Sequence[str]) -> Encoded:
        """Token ids of each ``[CLS] query [SEP] passage [SEP]``, unpadded, cut to ``max_length`` (longest text
        first, as sentence-transformers' CrossEncoder cuts); long lists are tokenized on all torch's threads."""
        if len(queries) != len(passages):
            raise ValueError(f"{len(queries)} queries but {len(passages)} passages: pairs need one of each")
        encoded = tokenize_in_threads(self.tokenizer, queries, passages, truncation="longest_first",
                                      max_length=self.max_length)
        return {k: v for k, v in encoded.items() if k in self.tokenizer.model_input_names}

    def collate(self, encoded: Encoded, rows: Sequence[int]) -> dict[str, torch.Tensor]:
        """Tensors of the pairs ``rows`` of ``encoded``, padded on the right to the longest of them."""
        width = max(len(encoded["input_ids"][i]) for i in rows)
        out = {}
        for key, values in encoded.items():
            fill = self.tokenizer.pad_token_id if key == "input_ids" else 0
            out[key] = torch.tensor([list(values[i]) + [fill] * (width - len(values[i])) for i in rows],
                                    dtype=torch.long)
        return out

    def forward(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Scores ``[B]`` (float32) of a collated batch, with autograd; the linear head runs in float32.

        In eval mode a BERT backbone's last layer runs for the CLS token alone (:mod:`ance_ir.modeling.first_tokens`).
        """
        batch = {k: v.to(self.device) for k, v in batch.items()}
        bert = first_token_bert(self, self.backbone)
        if bert is not None:
            cls = first_token_states(bert, batch)
            if self.head is None:  # BertForSequenceClassification: its pooler and classifier (dropout off in eval)
                return self.backbone.classifier(bert.pooler(cls)).squeeze(-1).float()
            cls = cls[:, 0]
        elif self.head is None:
            return self.backbone(**batch).logits[:, 0].float()
        else:
            cls = self.backbone(**batch).last_hidden_state[:, 0]
        with torch.autocast(self.device.type, enabled=False):
            return self.head(cls.float()).squeeze(-1)

    @torch.inference_mode()
    def score_pairs(self, queries: Sequence[str], passages: Sequence[str], batch_size: int = 32,
                    precision: str | None = None, show_progress: bool = False) -> np.ndarray:
        """Scores of the pairs ``(queries[i], passages[i])`` as float32 ``[N]``, in input order.

        Pairs run longest first in batches padded to their own longest; the scores stay on the device until the
        last batch, so that the host pads the next batch while a GPU scores this one. ``precision``: auto, fp32,
        bf16, fp16 or int8 (default ``inference_precision``, fp32; auto = bf16 where the hardware has it natively).
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        encoded = self.tokenize_pairs(queries, passages)
        lengths = [len(ids) for ids in encoded["input_ids"]]
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        was_training = self.training
        self.eval()
        try:
            with running(self, precision or self.inference_precision) as model:
                starts = range(0, len(order), batch_size)
                scores = [model(model.collate(encoded, order[start:start + batch_size]))
                          for start in batch_bar(starts, "score pairs", show_progress)]
        finally:
            self.train(was_training)
        out = np.empty(len(lengths), dtype=np.float32)
        if scores:
            out[order] = torch.cat(scores).float().cpu().numpy()
        return out

