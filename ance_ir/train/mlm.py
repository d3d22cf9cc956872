"""Masked-LM training (``task: mlm``): continued pretraining of a backbone with its MLM head on the corpus
passages, the domain-adaptive pretraining that comes before contrastive training (Chang et al., ICLR 2020; the
survey's "Domain-adaptive Pretraining").

BERT's masking (Devlin et al., 2019): each non-special token of a passage is chosen with probability
``mlm_probability`` (0.15); a chosen token becomes ``[MASK]`` with probability ``mask_share`` (0.8), a random
non-special vocabulary token with ``random_share`` (0.1), and stays itself otherwise; the loss is the cross-entropy
of the original token at the chosen positions (mean over the micro-batch's chosen tokens). Special tokens
(``[CLS]``, ``[SEP]``, ``[PAD]``, ``[UNK]``, ``[MASK]``, ...) are never chosen.

Every corpus passage (``data.docids``: the corpus of any data source; ``data.source: corpus`` loads it without
making pairs) is one example, cut at ``max_length`` tokens; batches of ``task.batch_size`` passages are drawn epoch
by epoch in a seeded order. The masks of a batch come from ``numpy.random.default_rng([seed, MASK_SEED, batch, row])``
for each global row, drawn over the row's own tokens only, so they depend neither on padding nor on the number of
processes, and a resumed run (the order's position and the batch counter are in every checkpoint) masks exactly as
a straight one. The model is kind ``mlm`` (:class:`~ance_ir.modeling.mlm.MaskedLM`): its ``final/`` is a plain
Hugging Face folder that ``model.name: RUN/final`` loads as the backbone of any other kind.

A checkpoint without an MLM head (a sentence-transformers model such as all-MiniLM-L6-v2) starts from a new one,
whose first gradients are noise for the encoder; ``task.head_warmup_steps`` N trains the head's own parameters alone
for the first N optimizer steps (the encoder, and a decoder tied to its input embeddings, stay as loaded), then
everything (one process only).

Jointly with a paragraph task (Chang et al., ICLR 2020, train MLM along with ICT, BFS and WLP): ``task.mlm_weight``
of the ``contrastive`` task adds that times the MLM loss of its batch's passages, masked the same way
(:class:`PassageMLM`).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ance_ir.modeling.kinds import text_positions
from ance_ir.modeling.mlm import mlm_head
from ance_ir.train.dataset import PairStream
from ance_ir.train.hooks import TrainingHook
from ance_ir.train.settings import ConfigError
from ance_ir.train.task import StepLoss, TaskContext, TrainingTask, register_task

MASK_SEED = 0x6D6C6D  # "mlm": keeps the mask draws apart from the other seeded draws of a run
IGNORE = -100


@dataclass(frozen=True)
class Masking:
    """BERT's masking rule: choose ``probability`` of the maskable tokens; of those, ``mask_share`` become the
    mask token, ``random_share`` a random token of ``random_ids``, the rest stay."""

    probability: float = 0.15
    mask_share: float = 0.8
    random_share: float = 0.1

    def apply(self, input_ids: torch.Tensor, maskable: torch.Tensor, lengths: Sequence[int],
              rngs: Sequence[np.random.Generator], mask_id: int, random_ids: torch.Tensor
              ) -> tuple[torch.Tensor, torch.Tensor]:
        """Masked copy of ``input_ids`` ``[B, L]`` and the labels ``[B, L]`` (the original id where a token was
        chosen, ``-100`` elsewhere). Row ``i`` draws from ``rngs[i]`` over its first ``lengths[i]`` tokens only;
        ``maskable`` (bool ``[B, L]``) is False for special tokens and padding."""
        inputs, labels = input_ids.clone(), torch.full_like(input_ids, IGNORE)
        for row, (length, rng) in enumerate(zip(lengths, rngs, strict=True)):
            choose = torch.from_numpy(rng.random(length) < self.probability) & maskable[row, :length]
            action = torch.from_numpy(rng.random(length))
            replacement = random_ids[torch.from_numpy(rng.integers(len(random_ids), size=length))]
            labels[row, :length][choose] = input_ids[row, :length][choose]
            to_mask = choose & (action < self.mask_share)
            to_random = choose & (action >= self.mask_share) & (action < self.mask_share + self.random_share)
            inputs[row, :length][to_mask] = mask_id
            inputs[row, :length][to_random] = replacement[to_random]
        return inputs, labels

    @staticmethod
    def check(options: Mapping[str, Any], section: str = "task") -> None:
        """ConfigError naming the first masking setting out of range."""
        p = options["mlm_probability"]
        if not 0 < p < 1:
            raise ConfigError(f"{section}.mlm_probability", f"must be in (0, 1), got {p}")
        for name in ("mask_share", "random_share"):
            if not 0 <= options[name] <= 1:
                raise ConfigError(f"{section}.{name}", f"must be in [0, 1], got {options[name]}")
        if options["mask_share"] + options["random_share"] > 1:
            raise ConfigError(f"{section}.random_share", f"mask_share + random_share must not exceed 1, got "
                                                         f"{options['mask_share']} + {options['random_share']}")


class TokenMasker:
    """Tokenizes texts and masks them with a :class:`Masking` rule, each global row from its own seeded draws."""

    def __init__(self, tokenizer: Any, masking: Masking, max_length: int, seed: int):
        self.tokenizer, self.masking, self.max_length, self.seed = tokenizer, masking, max_length, seed
        special = set(tokenizer.all_special_ids)
        self.special = torch.tensor(sorted(special), dtype=torch.long)
        self.random_ids = torch.tensor([i for i in range(len(tokenizer)) if i not in special], dtype=torch.long)
        if tokenizer.mask_token_id is None:
            raise ValueError("the tokenizer has no mask token")

    def __call__(self, texts: Sequence[str], batch: int, first_row: int
                 ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """Tokenized ``texts`` with masked ``input_ids``, and the labels ``[B, L]``; ``texts[i]`` is row
        ``first_row + i`` of the ``batch``-th global batch."""
        encoded = self.tokenizer(list(texts), padding="longest", truncation=True, max_length=self.max_length,
                                 return_tensors="pt")
        ids, attention = encoded["input_ids"], encoded["attention_mask"]
        maskable = attention.bool() & ~torch.isin(ids, self.special)
        lengths = attention.sum(1).tolist()  # right padding: a row's tokens come first
        rngs = [np.random.default_rng([self.seed, MASK_SEED, batch, first_row + i]) for i in range(len(texts))]
        masked, labels = self.masking.apply(ids, maskable, lengths, rngs, self.tokenizer.mask_token_id,
                                            self.random_ids)
        return {**encoded, "input_ids": masked}, labels


class MaskedLMModule(torch.nn.Module):
    """``forward(inputs, positions)`` -> vocabulary logits of the chosen positions (one ``forward``, as DDP needs)."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, inputs: Mapping[str, torch.Tensor], positions: torch.Tensor,
                head_only: bool = False) -> torch.Tensor:
        return self.model.logits_at(inputs, positions, head_only)


def mlm_loss(logits: torch.Tensor, labels: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Mean (or, with ``reduction="sum"``, summed) cross-entropy of the chosen tokens' logits ``[N, V]`` against their
    ids ``[N]`` (0, with the graph kept, when no token was chosen)."""
    if len(labels) == 0:
        return logits.sum() * 0.0
    return F.cross_entropy(logits.float(), labels.to(logits.device), reduction=reduction)


@register_task
class MLMTask(TrainingTask):
    """BERT's masked-LM objective on the corpus passages."""

    name = "mlm"
    model_kind = "mlm"
    own_loss = "the masked tokens' cross-entropy"
    reads = frozenset()
    evaluate_with = "python -m ance_ir.encode --encoder RUN, as a dense model, zero-shot"
    needs_pairs = False
    options = {"mlm_probability": 0.15, "mask_share": 0.8, "random_share": 0.1, "max_length": 256,
               "head_warmup_steps": 0}

    def __init__(self, ctx: TaskContext, model: torch.nn.Module):
        super().__init__(ctx, model)
        o = ctx.config.task.options
        data = ctx.data
        self.docids = list(data.docids)
        positions = text_positions(model.mlm.config) or o["max_length"]
        self.masker = TokenMasker(model.tokenizer, Masking(o["mlm_probability"], o["mask_share"], o["random_share"]),
                                  min(o["max_length"], positions), ctx.config.seed)
        self.stream = PairStream(len(self.docids), ctx.config.seed)
        self.batches = 0
        self._module = MaskedLMModule(model)
        if model.head_initialised:
            ctx.log.write({"event": "mlm_head", "step": 0, "initialised": True})
        if o["head_warmup_steps"] and ctx.dist.enabled:
            raise ConfigError("task.head_warmup_steps", "trains the head alone in one process only (under torchrun "
                              "every parameter must be in each step's graph)")
        if o["head_warmup_steps"] and mlm_head(model.mlm) is None:
            raise ConfigError("task.head_warmup_steps", f"{type(model.mlm).__name__}'s MLM head is not one module, "
                                                        "so it cannot train alone")

    @classmethod
    def check_config(cls, config: Any) -> None:
        o = config.task.options
        Masking.check(o)
        if o["head_warmup_steps"] < 0:
            raise ConfigError("task.head_warmup_steps", f"must not be negative, got {o['head_warmup_steps']}")
        if o["max_length"] < 3:
            raise ConfigError("task.max_length", f"must be at least 3 tokens, got {o['max_length']}")

    @property
    def module(self) -> torch.nn.Module:
        return self._module

    @property
    def examples(self) -> int:
        return len(self.docids)

    @property
    def epochs_done(self) -> float:
        return self.stream.epochs_done

    def next_batch(self) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        dist = self.ctx.dist
        docids = dist.local_share([self.docids[i] for i in self.stream.take(self.ctx.config.task.batch_size)])
        inputs, labels = self.masker([self.ctx.data.texts[d] for d in docids], self.batches, dist.rank * len(docids))
        self.batches += 1
        return inputs, labels

    def loss(self, module: torch.nn.Module, batch: tuple[dict[str, torch.Tensor], torch.Tensor],
             autocast: Callable[[], contextlib.AbstractContextManager]) -> StepLoss:
        inputs, labels = batch
        chosen = labels != IGNORE
        step = (self.batches - 1) // self.ctx.config.optim.grad_accumulation  # next_batch has counted this batch
        with autocast():
            logits = module(inputs, chosen, step < self.ctx.config.task.options["head_warmup_steps"])
        if not self.ctx.dist.enabled:
            return StepLoss(mlm_loss(logits, labels[chosen]))
        # the mean over the global batch's masked tokens
        return StepLoss(self.ctx.dist.global_mean(mlm_loss(logits, labels[chosen], "sum"), int(chosen.sum())))

    def state_dict(self) -> dict[str, Any]:
        return {"data": self.stream.state_dict(), "mlm_batches": self.batches}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.stream.load_state_dict(state["data"])
        self.batches = state["mlm_batches"]


# ---- joint MLM of the contrastive task (task.mlm_weight) ----


def passage_mlm_head(start: str, backbone: torch.nn.Module) -> torch.nn.Module:
    """The MLM head for a dense model's passage tower: the head of the starting checkpoint ``start`` when it has
    one (else new, with a ``note:`` line), on ``backbone``; its decoder tied to ``backbone``'s input embeddings
    where the config ties them."""
    from transformers import AutoModelForMaskedLM

    from ance_ir.modeling.encoder import quiet_transformers
    from ance_ir.modeling.mlm import MaskedLM, mlm_head
    from ance_ir.modeling.resolve import ModelNotAvailableError

    try:
        mlm = MaskedLM.from_pretrained(start).mlm
    except ModelNotAvailableError:
        raise
    except (OSError, ValueError):  # a folder of separate towers, or no masked-LM architecture: a new head
        print(f"note: task.mlm_weight: {start} has no masked-LM head to start from; a new one is trained",
              file=sys.stderr)
        with quiet_transformers():
            mlm = AutoModelForMaskedLM.from_config(backbone.config)
    head = mlm_head(mlm)
    if head is None:
        raise ValueError(f"task.mlm_weight: the masked-LM head of {type(mlm).__name__} is not one module (BERT's "
                         "cls, RoBERTa's lm_head); the joint MLM loss needs one")
    decoder, embeddings = mlm.get_output_embeddings(), backbone.get_input_embeddings()
    if getattr(mlm.config, "tie_word_embeddings", True) and decoder is not None:
        if decoder.weight.shape != embeddings.weight.shape:
            raise ValueError(f"task.mlm_weight: the MLM head of {start} has {tuple(decoder.weight.shape)} output "
                             f"embeddings, the model {tuple(embeddings.weight.shape)}")
        decoder.weight = embeddings.weight
    return head


class PassageMLM:
    """The contrastive task's joint MLM loss (``task.mlm_weight``: Chang et al., ICLR 2020, train MLM alongside the
    paragraph tasks): every passage of the batch, masked by BERT's rule (:class:`Masking` defaults) after the passage
    prefix, through the passage tower's backbone and an MLM head (:func:`passage_mlm_head`, trained with the model;
    its weights ride in the trainer state). The masks come from the seed, the batch counter and the global row, as in
    ``task: mlm``."""

    def __init__(self, ctx: TaskContext, model: torch.nn.Module):
        from ance_ir.train.checkpoint import resolve_init

        config = ctx.config
        start = resolve_init(config.model.init_from) if config.model.init_from else config.model.name
        self.backbone = model.passage_tower.backbone
        self.head = passage_mlm_head(start, self.backbone).to(ctx.device)
        self.prefix = model.config.passage_prefix
        self.masker = TokenMasker(model.tokenizer, Masking(), model.config.passage_max_length, config.seed)
        self.batches = 0
        self.losses: list[float] = []

    def draw(self, texts: Sequence[str], first_row: int) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """The next batch's masked passages (this process's ``texts``, global rows from ``first_row``)."""
        out = self.masker([self.prefix + t for t in texts], self.batches, first_row)
        self.batches += 1
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"mlm_head": {k: v.detach().cpu() for k, v in self.head.state_dict().items()},
                "mlm_batches": self.batches}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.head.load_state_dict(state["mlm_head"])
        self.batches = state["mlm_batches"]


class DualEncoderMLMModule(torch.nn.Module):
    """``forward(queries, passage_batches, restore, mlm_inputs, positions)`` -> query vectors, passage vectors and
    the MLM logits of the masked passages' chosen positions (one ``forward``, as DDP needs)."""

    def __init__(self, encoder: torch.nn.Module, head: torch.nn.Module):
        super().__init__()
        from ance_ir.train.modeling import DualEncoderModule

        self.dual, self.head = DualEncoderModule(encoder), head

    def forward(self, queries: Mapping[str, torch.Tensor], passage_batches: Sequence[Mapping[str, torch.Tensor]],
                restore: torch.Tensor | None, mlm_inputs: Mapping[str, torch.Tensor], positions: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        query_vectors, passages = self.dual(queries, passage_batches, restore)
        encoder = self.dual.encoder
        device = encoder.device
        hidden = encoder.passage_tower.backbone(**{k: v.to(device) for k, v in mlm_inputs.items()}).last_hidden_state
        return query_vectors, passages, self.head(hidden[positions.to(device)])


class MLMLossLog(TrainingHook):
    """Adds ``mlm_loss`` (the joint MLM loss, mean over the window's micro-batches of rank 0) to the log records."""

    def __init__(self, mlm: PassageMLM):
        self.mlm = mlm

    def log_fields(self, steps: int) -> dict[str, Any]:
        losses, self.mlm.losses = self.mlm.losses, []
        return {"mlm_loss": sum(losses) / len(losses)} if losses else {}
