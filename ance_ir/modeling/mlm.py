"""A masked language model, model kind ``mlm``: a transformer with its MLM head (any
``transformers.AutoModelForMaskedLM``), what the ``mlm`` training task (:mod:`ance_ir.train.mlm`) trains.

It is saved as a plain Hugging Face folder (weights with the head, config, tokenizer) and records no kind, so
that the result of domain-adaptive pretraining is a backbone every other kind starts from: ``model.name: RUN/final``
loads it as ``dense`` (the backbone, the head dropped), ``splade`` or ``cross-encoder``, exactly as it loads the
shipped ``bert-tiny``. A checkpoint without MLM head weights (a bare ``BertModel``) gets a freshly initialised head
(:attr:`MaskedLM.head_initialised` says so); the decoder is tied to the input embeddings where the config ties them.
The shipped ``bert-tiny`` (= ``splade-tiny``, SPLADE-tiny-msmarco) has its full head: SPLADE trained it, so it
starts as a term-weighting head rather than a plain MLM.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForMaskedLM, PreTrainedModel, PreTrainedTokenizerBase

from ance_ir.data.atomic import atomic_directory
from ance_ir.modeling.encoder import load_tokenizer, quiet_transformers, save_transformer
from ance_ir.modeling.kinds import register_model_kind
from ance_ir.modeling.module import KindModule
from ance_ir.modeling.resolve import resolve_model_path, unavailable


def mlm_head(model: PreTrainedModel) -> torch.nn.Module | None:
    """The module mapping a masked LM's last hidden states to vocabulary logits (BERT's ``cls``, RoBERTa's
    ``lm_head``), or None for an architecture whose head is not one module (then the whole forward runs)."""
    for name in ("cls", "lm_head"):
        head = getattr(model, name, None)
        if isinstance(head, torch.nn.Module):
            return head
    return None


def missing_head_weights(mlm: PreTrainedModel, info: dict[str, list[str]]) -> list[str]:
    """The MLM head's weights a checkpoint lacked (``from_pretrained(..., output_loading_info=True)``'s ``info``):
    newly initialised ones, as when a bare encoder is loaded as a masked LM."""
    return sorted(k for k in info["missing_keys"] if not k.startswith(f"{mlm.base_model_prefix}."))


def load_masked_lm(name_or_path: str | Path) -> tuple[PreTrainedTokenizerBase, PreTrainedModel, list[str]]:
    """The tokenizer and masked LM (float32) of ``name_or_path`` (model dir, alias or hub id), and the head weights
    the checkpoint lacked (newly initialised); ValueError for a checkpoint of no masked-LM architecture."""
    path = resolve_model_path(name_or_path)
    try:
        tokenizer = load_tokenizer(path)
        with quiet_transformers():
            mlm, info = AutoModelForMaskedLM.from_pretrained(path, dtype=torch.float32, output_loading_info=True)
    except OSError as error:
        raise unavailable(name_or_path, error) from error
    except ValueError as error:
        raise ValueError(f"{name_or_path}: has no masked-LM architecture ({str(error).splitlines()[0]})") from None
    return tokenizer, mlm, missing_head_weights(mlm, info)


@register_model_kind
class MaskedLM(KindModule):
    """A transformer and its MLM head; :meth:`logits_at` gives the vocabulary logits of chosen positions."""

    kind = "mlm"
    index = None
    options: dict[str, Any] = {}

    def __init__(self, mlm: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, head_initialised: bool = False):
        super().__init__()
        self.mlm, self.tokenizer = mlm, tokenizer
        #: whether the head was not in the checkpoint and was initialised at load
        self.head_initialised = head_initialised

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path, **unknown: Any) -> MaskedLM:
        """Load any masked-LM checkpoint (model dir, alias or hub id), or a bare encoder with a new head."""
        if unknown:
            raise ValueError(f"{', '.join(sorted(unknown))}: not a setting of an mlm model (it takes none; the "
                             "masking and max_length are settings of task: mlm)")
        tokenizer, mlm, missing = load_masked_lm(name_or_path)
        if missing:
            print(f"note: {name_or_path} has no MLM head weights ({', '.join(missing[:3])}"
                  f"{', ...' if len(missing) > 3 else ''}); the head is newly initialised", file=sys.stderr)
        if tokenizer.mask_token_id is None:
            raise ValueError(f"{name_or_path}: the tokenizer has no mask token")
        return cls(mlm, tokenizer, bool(missing)).eval()

    def save_pretrained(self, directory: str | Path) -> None:
        """A plain Hugging Face folder (model with its head, tokenizer), replacing ``directory`` as a whole; no kind
        is recorded, so any kind loads the backbone from it."""
        with atomic_directory(directory) as tmp:
            save_transformer(tmp, self.tokenizer, self.mlm)

    def records(self) -> dict[str, dict[str, Any]]:
        """None: a plain Hugging Face folder records no kind and no settings."""
        return {}

    def logits_at(self, inputs: Mapping[str, torch.Tensor], positions: torch.Tensor,
                  head_only: bool = False) -> torch.Tensor:
        """Vocabulary logits ``[N, V]`` of the ``N`` positions where ``positions`` (``[B, L]`` bool) is True; the
        head runs on those positions only (not on ``B*L`` of them) when it is one module.

        ``head_only``: gradients reach only the head's own parameters: the backbone runs without a graph, and a
        decoder tied to the input embeddings is used as a constant (a new head trained before the encoder)."""
        inputs = {k: v.to(self.device) for k, v in inputs.items()}
        positions = positions.to(self.device)
        head = mlm_head(self.mlm)
        if head is None:
            if head_only:
                raise ValueError(f"{type(self.mlm).__name__}: its MLM head is not one module, so it cannot train "
                                 "alone")
            return self.mlm(**inputs).logits[positions]
        if not head_only:
            return head(self.mlm.base_model(**inputs).last_hidden_state[positions])
        with torch.no_grad():
            hidden = self.mlm.base_model(**inputs).last_hidden_state[positions]
        backbone = {id(p) for p in self.mlm.base_model.parameters()}
        tied = {name: p.detach() for name, p in head.named_parameters(remove_duplicate=False) if id(p) in backbone}
        return torch.func.functional_call(head, tied, (hidden,))
