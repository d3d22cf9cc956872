"""Query generator (doc2query), model kind ``generator``: a sequence-to-sequence model that writes the queries a
passage answers.

Started from a plain encoder checkpoint (``bert-tiny``, ``minilm``, any BERT), it is a ``transformers``
:class:`~transformers.EncoderDecoderModel` warm-started from it (Rothe et al.'s BERT2BERT): encoder and decoder
both load the checkpoint's weights (the ``decoder`` setting names another one with the same vocabulary), the
decoder gets causal self-attention and new cross-attention layers, and decoding starts at ``[CLS]`` and ends at
``[SEP]``. Such a model is ``fresh`` until trained (``task: generator``). A public sequence-to-sequence checkpoint
(``castorini/doc2query-t5-base-msmarco``, any ``AutoModelForSeq2SeqLM``) loads by name as it is, for online users.

:meth:`QueryGenerator.generate` samples with top-k and nucleus (top-p) filtering. Its randomness is not torch's
global generator: the draw for sample ``j`` of a passage at decoding step ``t`` is a uniform number hashed from
(``seed``, the passage's text, ``j``, ``t``), inverted through the filtered distribution's cumulative sum. A
passage's queries therefore depend on its text, the seed and the settings alone, not on its position, on the
other passages of its batch or on how a corpus is cut into chunks (up to float rounding, which can differ between
batch shapes; a fixed batch size repeats bit for bit). Identical passages get identical queries.
:meth:`QueryGenerator.perplexity` is the exponentiated mean token cross-entropy of (passage, query) pairs under
teacher forcing, the end-of-query token included.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm
from transformers import (
    AutoConfig,
    AutoModelForSeq2SeqLM,
    EncoderDecoderModel,
    GenerationConfig,
    LogitsProcessor,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from ance_ir.data.atomic import atomic_directory
from ance_ir.modeling.encoder import load_backbone, load_tokenizer, quiet_transformers, save_transformer
from ance_ir.modeling.inference import evaluating
from ance_ir.modeling.kinds import (
    choose_settings,
    read_settings,
    register_model_kind,
    text_positions,
    write_records,
)
from ance_ir.modeling.module import KindModule
from ance_ir.modeling.resolve import resolve_model_path, unavailable

CONFIG_NAME = "ance_ir_generator.json"
DEFAULTS = {"query_max_length": 64, "passage_max_length": 256}
IGNORE = -100  # label of a padding position


def _length(name: str, value: Any, positions: int | None) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 2:
        raise ValueError(f"{name} must be an integer of at least 2 tokens, got {value!r}")
    if positions and value > positions:
        raise ValueError(f"{name} {value} exceeds the model's {positions} positions")
    return value


def sample_keys(texts: Sequence[str], n: int, seed: int) -> np.ndarray:
    """The 64-bit key of sample ``j`` of each text, ``[len(texts) * n]`` (text-major): from SHA-256 of (seed,
    text, j)."""
    keys = [int.from_bytes(hashlib.sha256(f"{seed}\0{j}\0{text}".encode()).digest()[:8], "little")
            for text in texts for j in range(n)]
    return np.array(keys, dtype=np.uint64)


def uniforms(keys: np.ndarray, step: int) -> np.ndarray:
    """A uniform number in [0, 1) per key for decoding step ``step``: SplitMix64 of the key and the step (float64,
    53 bits)."""
    with np.errstate(over="ignore"):
        z = keys + np.uint64((step + 1) * 0x9E3779B97F4A7C15 % 2 ** 64)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) / float(2 ** 53)


def sample_tokens(logits: torch.Tensor, u: torch.Tensor, top_k: int, top_p: float,
                  temperature: float) -> torch.Tensor:
    """One token per row of ``logits`` ``[R, V]``: the row's distribution at ``temperature``, cut to its ``top_k``
    most likely tokens (0: all) and then to the smallest set of them whose probability reaches ``top_p``, renormalised
    and inverted at ``u`` ``[R]`` (float64 cumulative sums; ties ordered by token id)."""
    logits = logits.float()
    if top_k and top_k < logits.shape[1]:  # the k best (far cheaper than sorting the vocabulary), by token id...
        values, order = torch.topk(logits, top_k, dim=-1)
        order, by_id = torch.sort(order, dim=-1)
        values = values.gather(1, by_id)
        values, best = torch.sort(values, dim=-1, descending=True, stable=True)  # ...then best first, ties by id
        order = order.gather(1, best)
    else:
        values, order = torch.sort(logits, dim=-1, descending=True, stable=True)
    probs = torch.softmax(values.double() / temperature, dim=-1)
    if top_p < 1.0:
        before = probs.cumsum(dim=-1) - probs  # mass of the more likely tokens
        probs = probs.masked_fill(before >= top_p, 0.0)
    cumulative = probs.cumsum(dim=-1)
    target = (u.to(cumulative) * cumulative[:, -1]).unsqueeze(-1)
    pick = torch.searchsorted(cumulative, target, right=True).clamp(max=cumulative.shape[1] - 1)
    pick = torch.minimum(pick, (probs > 0).sum(dim=-1, keepdim=True) - 1)
    return order.gather(1, pick).squeeze(-1)


class _Sampler(LogitsProcessor):
    """Turns a greedy ``generate`` into seeded sampling: each row's scores become 0 for the token drawn by
    :func:`sample_tokens` with the row's uniform of this step, -inf elsewhere. The padding token is never drawn,
    the end of the query not as the first token."""

    def __init__(self, keys: np.ndarray, start: int, top_k: int, top_p: float, temperature: float,
                 banned: Sequence[int], eos: int):
        self.keys, self.start, self.top_k, self.top_p, self.temperature = keys, start, top_k, top_p, temperature
        self.banned, self.eos = list(banned), eos

    def __call__(self, input_ids: torch.LongTensor, scores: torch.Tensor) -> torch.Tensor:
        step = input_ids.shape[1] - self.start
        logits = scores.float().clone()
        logits[:, self.banned] = float("-inf")
        if step == 0:
            logits[:, self.eos] = float("-inf")
        u = torch.from_numpy(uniforms(self.keys, step))
        tokens = sample_tokens(logits, u, self.top_k, self.top_p, self.temperature)
        out = torch.full_like(scores, float("-inf"))
        out.scatter_(1, tokens.unsqueeze(-1).to(out.device), 0.0)
        return out


@contextmanager
def _plain_generation(model: PreTrainedModel, config: GenerationConfig) -> Iterator[None]:
    """``model.generation_config`` replaced by ``config`` for the block: ``generate`` fills what a config leaves unset
    from the model's own, which could add its repetition penalties, banned words or minimum length to the sampling."""
    saved = model.generation_config
    model.generation_config = config
    try:
        yield
    finally:
        model.generation_config = saved


def _warm_start(encoder: str, decoder: str, tokenizer: PreTrainedTokenizerBase) -> EncoderDecoderModel:
    """BERT2BERT: an encoder-decoder whose two halves load the weights of ``encoder`` and ``decoder``."""
    with quiet_transformers():
        model = EncoderDecoderModel.from_encoder_decoder_pretrained(
            encoder_model=load_backbone(encoder), decoder_pretrained_model_name_or_path=decoder,
            decoder_dtype=torch.float32)
    if model.config.encoder.vocab_size != model.config.decoder.vocab_size:
        raise ValueError(f"{decoder}: a decoder vocabulary of {model.config.decoder.vocab_size} tokens, the "
                         f"encoder's has {model.config.encoder.vocab_size}; they must share one tokenizer")
    start = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
    eos = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
    if start is None or eos is None or tokenizer.pad_token_id is None:
        raise ValueError(f"{encoder}: its tokenizer has no [CLS]/[SEP]/[PAD] (or BOS/EOS/PAD) tokens to start, end "
                         "and pad a query")
    model.config.decoder_start_token_id = start
    model.config.pad_token_id = tokenizer.pad_token_id
    model.generation_config = GenerationConfig(decoder_start_token_id=start, eos_token_id=eos,
                                               pad_token_id=tokenizer.pad_token_id)
    return model


def _first(value: Any) -> int | None:
    return value[0] if isinstance(value, (list, tuple)) and value else value


@register_model_kind
class QueryGenerator(KindModule):
    """A sequence-to-sequence model with its tokenizer: passage in, query out.

    ``fresh`` says the model was just warm-started from a plain encoder (it must be trained before its queries
    mean anything).
    """

    kind = "generator"
    settings_file = CONFIG_NAME
    index = None
    #: settings a training config may give in ``model`` besides the lengths (``model.decoder``)
    options: dict[str, Any] = {"decoder": None}
    inference_precision: str = "fp32"

    def __init__(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, query_max_length: int,
                 passage_max_length: int, fresh: bool = False):
        super().__init__()
        encoder = model.get_encoder().config
        decoder = getattr(model.config, "decoder", model.config)
        self.passage_max_length = _length("passage_max_length", passage_max_length,
                                          text_positions(encoder))
        self.decoder_positions = text_positions(decoder)
        self.query_max_length = _length("query_max_length", query_max_length, self.decoder_positions)
        self.model, self.tokenizer, self.fresh = model, tokenizer, fresh
        generation = model.generation_config
        start = _first(model.config.decoder_start_token_id) if model.config.decoder_start_token_id is not None \
            else _first(generation.decoder_start_token_id)
        eos = _first(generation.eos_token_id)
        if eos is None:
            eos = _first(getattr(model.config, "eos_token_id", None))
        if eos is None:
            eos = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else tokenizer.sep_token_id
        pad = model.config.pad_token_id if model.config.pad_token_id is not None else tokenizer.pad_token_id
        if start is None or eos is None or pad is None:
            raise ValueError("the model names no decoder start, end or padding token")
        self.start_id, self.eos_id, self.pad_id = int(start), int(eos), int(pad)

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path, query_max_length: int | None = None,
                        passage_max_length: int | None = None, decoder: str | None = None,
                        **unknown: Any) -> QueryGenerator:
        """Load a saved generator or a sequence-to-sequence checkpoint (model dir, alias or hub id), or warm-start
        one from an encoder checkpoint (``decoder``: the decoder's checkpoint, default the same). The lengths win
        over the saved ones (defaults 64 query and 256 passage tokens, at most the model's positions)."""
        if unknown:
            raise ValueError(f"{', '.join(sorted(unknown))}: not a setting of a generator (it takes "
                             "query_max_length, passage_max_length and decoder)")
        path = resolve_model_path(name_or_path)
        saved = read_settings(path, CONFIG_NAME)
        try:
            config = AutoConfig.from_pretrained(path)
            tokenizer = load_tokenizer(path)
            fresh = not getattr(config, "is_encoder_decoder", False)
            if not fresh:
                if decoder is not None:
                    raise ValueError(f"decoder: {name_or_path} is a sequence-to-sequence model already; decoder "
                                     "names the checkpoint a new generator's decoder starts from")
                with quiet_transformers():
                    if config.model_type == "encoder-decoder":
                        model = EncoderDecoderModel.from_pretrained(path, dtype=torch.float32)
                        if getattr(model.encoder, "pooler", None) is not None:  # unused, and never saved
                            model.encoder.pooler = None
                    else:
                        model = AutoModelForSeq2SeqLM.from_pretrained(path, dtype=torch.float32)
            else:
                model = _warm_start(path, resolve_model_path(decoder) if decoder else path, tokenizer)
        except OSError as error:
            raise unavailable(name_or_path, error) from error
        given = {"query_max_length": query_max_length, "passage_max_length": passage_max_length}
        settings = choose_settings(given, saved, DEFAULTS, text_positions(model.get_encoder().config), tuple(DEFAULTS))
        return cls(model, tokenizer, settings["query_max_length"], settings["passage_max_length"], fresh).eval()

    def save_pretrained(self, directory: str | Path) -> None:
        """Write the model, tokenizer and ``ance_ir_generator.json``, replacing ``directory`` as a whole."""
        with atomic_directory(directory) as tmp:
            write_records(tmp, self.records())
            save_transformer(tmp, self.tokenizer, self.model)

    @property
    def settings(self) -> dict[str, int]:
        """What ``ance_ir_generator.json`` records."""
        return {"query_max_length": self.query_max_length, "passage_max_length": self.passage_max_length}

    # ---- teacher forcing ----

    def tokenize_passages(self, passages: Sequence[str]) -> dict[str, torch.Tensor]:
        """Passages cut at ``passage_max_length`` tokens, padded to the longest (ids and attention mask)."""
        encoded = self.tokenizer(list(passages), padding="longest", truncation=True,
                                 max_length=self.passage_max_length, return_tensors="pt")
        return {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"]}

    def tokenize_queries(self, queries: Sequence[str]) -> torch.Tensor:
        """Target ids ``[B, T]``: each query's tokens cut to ``query_max_length - 1``, then the end token; padding is
        ``-100``."""
        pieces = self.tokenizer(list(queries), add_special_tokens=False, truncation=True,
                                max_length=self.query_max_length - 1)["input_ids"]
        width = max(len(p) for p in pieces) + 1
        labels = torch.full((len(pieces), width), IGNORE, dtype=torch.long)
        for row, ids in enumerate(pieces):
            labels[row, :len(ids) + 1] = torch.tensor([*ids, self.eos_id])
        return labels

    def forward(self, inputs: Mapping[str, torch.Tensor], labels: torch.Tensor) -> torch.Tensor:
        """Next-token logits ``[B, T, V]`` of the targets ``labels`` (decoder input: the start token, then the
        targets shifted right), with autograd."""
        inputs = {k: v.to(self.device) for k, v in inputs.items()}
        labels = labels.to(self.device)
        known = labels.masked_fill(labels == IGNORE, self.pad_id)
        start = torch.full_like(known[:, :1], self.start_id)
        decoder_ids = torch.cat([start, known[:, :-1]], dim=1)
        return self.model(**inputs, decoder_input_ids=decoder_ids, decoder_attention_mask=(labels != IGNORE).long(),
                          use_cache=False).logits

    @staticmethod
    def token_losses(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Cross-entropy of every target token ``[B, T]`` (float32; 0 at padding)."""
        labels = labels.to(logits.device)
        losses = F.cross_entropy(logits.float().transpose(1, 2), labels.clamp(min=0), reduction="none")
        return losses * (labels != IGNORE)

    @torch.inference_mode()
    def perplexity(self, pairs: Sequence[tuple[str, str]], batch_size: int = 32,
                   precision: str | None = None) -> float:
        """``exp`` of the mean cross-entropy per target token (the end token included) of (passage, query) pairs."""
        if not pairs:
            raise ValueError("perplexity needs at least one (passage, query) pair")
        total, count = 0.0, 0
        with evaluating(self, precision) as model:
            for start in range(0, len(pairs), batch_size):
                chunk = pairs[start:start + batch_size]
                labels = model.tokenize_queries([q for _, q in chunk])
                logits = model(model.tokenize_passages([p for p, _ in chunk]), labels)
                total += float(self.token_losses(logits, labels).sum())
                count += int((labels != IGNORE).sum())
        return math.exp(total / count)

    # ---- sampling ----

    @torch.inference_mode()
    def generate(self, passages: Sequence[str], n: int = 10, seed: int = 0, top_k: int = 10, top_p: float = 1.0,
                 max_length: int | None = None, temperature: float = 1.0, batch_size: int = 16,
                 precision: str | None = None, show_progress: bool = False) -> list[list[str]]:
        """``n`` sampled queries for each passage, in input order.

        Each token is drawn from the ``top_k`` most likely (0: no cut), then the smallest most-likely set of
        probability ``top_p`` (1: no cut), at ``temperature``; a query has at most ``max_length`` tokens (default
        ``query_max_length``), the end token counted when it comes. ``batch_size`` passages (times ``n`` samples) decode
        together, longest first; the passages are encoded once and their states shared by their ``n`` samples.
        """
        if n < 1 or batch_size < 1:
            raise ValueError(f"n and batch_size must be at least 1, got {n} and {batch_size}")
        if top_k < 0 or not 0.0 < top_p <= 1.0 or not temperature > 0:
            raise ValueError(f"top_k must be >= 0, top_p in (0, 1] and temperature > 0; got {top_k}, {top_p}, "
                             f"{temperature}")
        max_length = self.query_max_length if max_length is None else max_length
        if max_length < 1 or (self.decoder_positions and max_length > self.decoder_positions):
            raise ValueError(f"max_length must be at least 1 and at most the decoder's {self.decoder_positions} "
                             f"positions, got {max_length}")
        passages = list(passages)
        if not passages:
            return []
        lengths = [len(ids) for ids in self.tokenizer(passages, truncation=True, max_length=self.passage_max_length)
                   ["input_ids"]]
        order = sorted(range(len(passages)), key=lambda i: -lengths[i])
        out: list[list[str]] = [[] for _ in passages]
        banned = sorted({self.pad_id} - {self.eos_id})
        config = GenerationConfig(do_sample=False, num_beams=1, max_new_tokens=max_length,
                                  decoder_start_token_id=self.start_id, eos_token_id=self.eos_id,
                                  pad_token_id=self.pad_id)
        with evaluating(self, precision) as model:
            for start in tqdm(range(0, len(order), batch_size), desc="generate", unit="batch",
                              disable=not show_progress):
                rows = order[start:start + batch_size]
                inputs = {k: v.to(self.device) for k, v in model.tokenize_passages([passages[i] for i in rows]).items()}
                encoded = model.model.get_encoder()(**inputs)
                encoded.last_hidden_state = encoded.last_hidden_state.repeat_interleave(n, dim=0)
                sampler = _Sampler(sample_keys([passages[i] for i in rows], n, seed), 1, top_k, top_p, temperature,
                                   banned, self.eos_id)
                with quiet_transformers(), _plain_generation(model.model, config):
                    ids = model.model.generate(encoder_outputs=encoded,
                                               attention_mask=inputs["attention_mask"].repeat_interleave(n, dim=0),
                                               generation_config=config, logits_processor=[sampler])
                texts = self.tokenizer.batch_decode(ids, skip_special_tokens=True)
                for k, row in enumerate(rows):
                    out[row] = [" ".join(t.split()) for t in texts[k * n:(k + 1) * n]]
        return out
