"""ANCE-style dual encoder over any ``transformers.AutoModel`` backbone, scored by dot product."""

from __future__ import annotations

import copy
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from transformers import AutoModel, AutoTokenizer, BatchEncoding, PreTrainedModel, PreTrainedTokenizerBase
from transformers.utils import logging as transformers_logging

from ance_ir.data import InputError
from ance_ir.data.atomic import atomic_directory
from ance_ir.modeling.config import CONFIG_NAME, EncoderConfig
from ance_ir.modeling.first_tokens import last_states
from ance_ir.modeling.inference import batch_bar, nested_progress, running
from ance_ir.modeling.kinds import register_model_kind, text_positions, write_records
from ance_ir.modeling.module import KindModule
from ance_ir.modeling.resolve import alias_defaults, resolve_model_path, unavailable
from ance_ir.modeling.sentence_transformers_files import write_sentence_transformers_files
from ance_ir.modeling.tokenize import tokenize_in_threads

HEAD_NAME = "ance_ir_head.safetensors"
SIDES = ("query", "passage")
#: texts tokenized together, their passages batched longest first: vectors depend on which window a text is in
ENCODE_WINDOW = 10_000


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' load reports and progress bars off (real errors still raise)."""
    verbosity, bars = transformers_logging.get_verbosity(), transformers_logging.is_progress_bar_enabled()
    transformers_logging.set_verbosity_error()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        transformers_logging.set_verbosity(verbosity)
        if bars:
            transformers_logging.enable_progress_bar()


def load_backbone(path: str | Path) -> PreTrainedModel:
    """Load the bare transformer in float32, without the unused pooler layer when the model class has one.

    transformers' load report (checkpoint keys of heads we do not use) is silenced; real errors still raise.
    """
    with quiet_transformers():
        try:
            return AutoModel.from_pretrained(path, dtype=torch.float32, add_pooling_layer=False)
        except TypeError:
            return AutoModel.from_pretrained(path, dtype=torch.float32)


#: files of which a saved tokenizer has at least one (fast, its config, BERT's, BPE's vocabulary; or a *.model)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json")


def load_tokenizer(path: str | Path) -> PreTrainedTokenizerBase:
    """``path``'s tokenizer, padding on the right whatever its saved config says: the models here give their
    backbone no position ids and read the first tokens' states at position 0, so a batch padded on the left would
    shift every text shorter than the longest. InputError for a folder without tokenizer files, which transformers
    would stand in for with an empty vocabulary (every word [UNK])."""
    folder = Path(path)
    if folder.is_dir() and not (any((folder / name).is_file() for name in TOKENIZER_FILES)
                                or any(folder.glob("*.model"))):
        raise InputError(folder, f"holds no tokenizer (none of {', '.join(TOKENIZER_FILES)} or a *.model); save "
                                 "the model's tokenizer beside it")
    return AutoTokenizer.from_pretrained(path, padding_side="right")


def save_tokenizer(folder: Path, tokenizer: PreTrainedTokenizerBase) -> None:
    """Write ``tokenizer`` into ``folder``; a fast tokenizer's last truncation and padding, which it keeps set
    after a call, are cleared first so that they are not saved with it."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        backend.no_truncation()
        backend.no_padding()
    tokenizer.save_pretrained(folder)


def save_transformer(folder: Path, tokenizer: PreTrainedTokenizerBase, model: PreTrainedModel) -> None:
    """Write a tokenizer (:func:`save_tokenizer`) and a transformers model into ``folder``, quietly."""
    save_tokenizer(folder, tokenizer)
    with quiet_transformers():
        model.save_pretrained(folder)


class Tower(torch.nn.Module):
    """One side of the dual encoder: a transformer backbone and the optional ANCE head."""

    def __init__(self, backbone: PreTrainedModel, config: EncoderConfig):
        super().__init__()
        self.backbone = backbone
        self.head: torch.nn.Sequential | None = None
        if config.head:
            hidden = backbone.config.hidden_size
            head_dim = config.head_dim or hidden
            self.head = torch.nn.Sequential(torch.nn.Linear(hidden, head_dim), torch.nn.LayerNorm(head_dim))
            linear = self.head[0]
            torch.nn.init.normal_(linear.weight, std=getattr(backbone.config, "initializer_range", 0.02))
            torch.nn.init.zeros_(linear.bias)

    def save(self, directory: Path) -> None:
        with quiet_transformers():
            self.backbone.save_pretrained(directory)
        if self.head is not None:
            save_file({k: v.contiguous() for k, v in self.head.state_dict().items()}, directory / HEAD_NAME)

    @classmethod
    def load(cls, directory: str | Path, config: EncoderConfig) -> Tower:
        """Backbone from ``directory``; head weights from its head file if present, else newly initialised
        (InputError for a head file of other dimensions than ``config.head_dim``)."""
        tower = cls(load_backbone(directory), config)
        head_file = Path(directory) / HEAD_NAME
        if tower.head is not None and head_file.is_file():
            saved = load_file(head_file)
            expected = {k: tuple(v.shape) for k, v in tower.head.state_dict().items()}
            if {k: tuple(v.shape) for k, v in saved.items()} != expected:
                raise InputError(head_file, f"the saved head's weights do not fit head_dim {config.head_dim} "
                                            f"(its Linear is {tuple(saved.get('0.weight', torch.empty(0)).shape)}, "
                                            f"expected {expected['0.weight']})")
            tower.head.load_state_dict(saved)
        return tower


#: the token lengths of each side's texts, in SIDES' order
LENGTHS = ("query_max_length", "passage_max_length")


def _length_limits(towers: Mapping[str, Tower]) -> dict[str, int | None]:
    """Each length setting's limit: the positions of the backbone that encodes that side's texts (None: none)."""
    return {name: text_positions(towers.get(side, towers["query"]).backbone.config)
            for side, name in zip(SIDES, LENGTHS, strict=True)}


@register_model_kind
class DenseEncoder(KindModule):
    """Query and passage towers (one shared, or two) that map texts to vectors compared by dot product.

    Model kind ``dense``: its passage vectors go to a faiss index (:mod:`ance_ir.index`).
    """

    kind = "dense"
    settings_file = CONFIG_NAME
    index = "dense"
    #: settings a training config may also override (EncoderConfig fields -> a value of their type; the ones
    #: not given keep the saved model's)
    options = {"head_dim": 0, "shared": True, "query_prefix": "", "passage_prefix": ""}

    #: precision of ``encode_*`` when the call names none (see :mod:`ance_ir.modeling.inference`)
    inference_precision: str = "fp32"
    #: whether saving writes sentence-transformers files (one vector per text, as this class computes it)
    sentence_transformers: bool = True

    @property
    def cpu_auto_precision(self) -> str:
        """What ``auto`` means on a CPU without native bf16: int8 for L2-normalised vectors (within 0.005 nDCG@10 of
        fp32 for MiniLM, mean or CLS pooling), fp32 for unnormalised ones, whose dot products int8 moves more (their
        lengths move too: -0.011 and -0.021 nDCG@10 for MiniLM's; ``docs/bench.md``, quality of each precision)."""
        return "int8" if self.config.normalize else "fp32"

    def __init__(self, towers: Mapping[str, Tower], tokenizer: PreTrainedTokenizerBase,
                 config: EncoderConfig):
        super().__init__()
        if set(towers) != ({"query"} if config.shared else set(SIDES)):
            raise ValueError("towers must be {'query'} when shared, {'query', 'passage'} otherwise")
        if config.head and config.head_dim is None:
            config = config.replace(head_dim=towers["query"].backbone.config.hidden_size)
        for name, positions in _length_limits(towers).items():
            if positions and getattr(config, name) > positions:
                raise ValueError(f"{name} {getattr(config, name)} exceeds the model's {positions} positions")
        self.towers = torch.nn.ModuleDict(towers)
        self.tokenizer = tokenizer
        self.config = config

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path, **config_overrides: Any) -> DenseEncoder:
        """Load from a saved DenseEncoder dir, a plain Hugging Face model dir, an alias or a hub id.

        A saved dir brings its own config; otherwise the alias defaults (if any) apply. ``config_overrides``
        (EncoderConfig fields) win over both. A head not found on disk is freshly initialised. Lengths not given
        are cut to the backbone's positions; a given one above them is a ValueError.
        """
        _, towers, tokenizer, config = cls._load_parts(name_or_path, **config_overrides)
        return cls(towers, tokenizer, config).eval()

    @staticmethod
    def _load_parts(name_or_path: str | Path, **config_overrides: Any
                    ) -> tuple[Path, dict[str, Tower], PreTrainedTokenizerBase, EncoderConfig]:
        """The resolved path, towers, tokenizer and config :meth:`from_pretrained` builds a model of (a subclass
        adds what it saves beside them)."""
        path = resolve_model_path(name_or_path)
        saved = EncoderConfig.exists(path)
        base = EncoderConfig.load(path) if saved else EncoderConfig().replace(**alias_defaults(name_or_path))
        config = base.replace(**config_overrides)
        split = saved and not base.shared  # towers saved under query/ and passage/
        if split and config.shared:
            raise ValueError(f"{path} holds separate query and passage towers; it cannot be loaded as shared")
        sides = SIDES[:1] if config.shared else SIDES
        try:
            tokenizer = load_tokenizer(path)
            towers = {side: Tower.load(Path(path) / side if split else path, config) for side in sides}
        except OSError as error:
            raise unavailable(name_or_path, error) from error
        for name, positions in _length_limits(towers).items():  # lengths not given: at most the positions
            value = getattr(config, name)
            if positions and value > positions and name not in config_overrides:
                if saved:  # recorded before lengths were checked: it could only fail on a long text
                    print(f"note: {path}: its {name} {value} exceeds the model's {positions} positions; "
                          f"{positions} is used", file=sys.stderr)
                config = config.replace(**{name: positions})
        return Path(path), towers, tokenizer, config

    def save_pretrained(self, directory: str | Path) -> None:
        """Write weights, tokenizer and ``ance_ir_encoder.json``, replacing ``directory`` as a whole.

        Unshared towers go to ``query/`` and ``passage/`` subfolders; the tokenizer and config stay on top.
        sentence-transformers files (``modules.json`` and the rest, see
        :mod:`ance_ir.modeling.sentence_transformers_files`) let ``SentenceTransformer(directory)`` load it too.
        """
        with atomic_directory(directory) as tmp:
            self._save_files(tmp)

    @property
    def settings(self) -> dict[str, Any]:
        """What ``ance_ir_encoder.json`` records: the encoder's config."""
        return self.config.to_dict()

    def _save_files(self, directory: Path) -> None:
        """Write the model into the (new, empty) ``directory``; a subclass adds its own files."""
        write_records(directory, self.records())
        save_tokenizer(directory, self.tokenizer)
        if self.config.shared:
            self.towers["query"].save(directory)
        else:
            for side in SIDES:
                (directory / side).mkdir()
                self.towers[side].save(directory / side)
        if self.sentence_transformers:
            write_sentence_transformers_files(directory, self.config, self.towers, self.tokenizer)

    def untie(self) -> None:
        """Give the passage side its own copy of a shared tower (nothing to do when the towers are separate)."""
        if self.config.shared:
            self.towers["passage"] = copy.deepcopy(self.towers["query"])
            self.config = self.config.replace(shared=False)

    @property
    def query_tower(self) -> Tower:
        return self.towers["query"]

    @property
    def passage_tower(self) -> Tower:
        return self.towers["query" if self.config.shared else "passage"]

    @property
    def dim(self) -> int:
        """Length of the output vectors."""
        return self.config.head_dim if self.config.head else self.query_tower.backbone.config.hidden_size

    def tokenize_queries(self, texts: Sequence[str]) -> BatchEncoding:
        """Tokenize queries (prefix added), padded to the longest and cut at ``query_max_length``."""
        return self._tokenize(texts, self.config.query_prefix, self.config.query_max_length)

    def tokenize_passages(self, texts: Sequence[str]) -> BatchEncoding:
        """Tokenize passages (prefix added), padded to the longest and cut at ``passage_max_length``."""
        return self._tokenize(texts, self.config.passage_prefix, self.config.passage_max_length)

    def _tokenize(self, texts: Sequence[str], prefix: str, max_length: int) -> BatchEncoding:
        return self.tokenizer([prefix + t for t in texts], padding="longest", truncation=True,
                              max_length=max_length, return_tensors="pt")

    def embed_queries(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Query vectors ``[B, D]`` for a tokenized batch, with autograd."""
        return self._embed(self.query_tower, batch)

    def embed_passages(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Passage vectors ``[B, D]`` for a tokenized batch, with autograd."""
        return self._embed(self.passage_tower, batch)

    @staticmethod
    def score(queries: torch.Tensor, passages: torch.Tensor) -> torch.Tensor:
        """Dot-product scores ``[Q, P]``."""
        return queries @ passages.T

    def _embed(self, tower: Tower, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Pooled, projected vectors; CLS pooling in eval mode runs a BERT's last layer for the CLS token alone
        (:mod:`ance_ir.modeling.first_tokens`)."""
        batch = {k: v.to(self.device) for k, v in batch.items()}
        if self.config.pooling == "cls":
            vectors = last_states(self, tower.backbone, batch, 1)[:, 0]
        else:
            hidden = tower.backbone(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            vectors = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
        return self._project(tower, vectors)

    def _project(self, tower: Tower, vectors: torch.Tensor) -> torch.Tensor:
        """Pooled states ``[..., hidden]`` through the tower's head (if any), then L2-normalised if configured."""
        if tower.head is not None:
            vectors = tower.head(vectors)
        return F.normalize(vectors, p=2, dim=-1) if self.config.normalize else vectors

    def _vector_shape(self, side: str) -> tuple[int, ...]:
        """Shape of one text's output of ``encode_*`` for ``side`` (query or passage): one vector."""
        return (self.dim,)

    def encode_queries(self, texts: Sequence[str], batch_size: int = 64, show_progress: bool = False,
                       precision: str | None = None) -> np.ndarray:
        """Query vectors as float32 ``[N, D]``, in input order.

        ``precision``: auto, fp32, bf16, fp16 or int8 (default: ``inference_precision``, fp32).
        """
        return self._encode(texts, "query", batch_size, show_progress, precision)

    def encode_passages(self, texts: Sequence[str], batch_size: int = 32, show_progress: bool = False,
                        precision: str | None = None) -> np.ndarray:
        """Passage vectors as float32 ``[N, D]``, in input order; batches group passages of similar length
        (longest first, within each window of 10,000 passages).

        ``precision``: auto, fp32, bf16, fp16 or int8 (default: ``inference_precision``, fp32).
        """
        return self._encode(texts, "passage", batch_size, show_progress, precision)

    def token_ids(self, texts: Sequence[str], side: str) -> BatchEncoding:
        """``texts`` tokenized as :meth:`tokenize_queries` (``side`` query) or :meth:`tokenize_passages` would,
        unpadded (lists): sort or split them by length, then :meth:`pad` batches from them."""
        prefix, max_length = ((self.config.query_prefix, self.config.query_max_length) if side == "query"
                              else (self.config.passage_prefix, self.config.passage_max_length))
        return tokenize_in_threads(self.tokenizer, [prefix + t for t in texts], truncation=True, max_length=max_length)

    def pad(self, encoded: BatchEncoding, rows: Sequence[int]) -> BatchEncoding:
        """Rows ``rows`` of :meth:`token_ids`'s output as one batch of tensors, padded to its longest: the same
        as tokenizing their texts together."""
        return self.tokenizer.pad({k: [v[i] for i in rows] for k, v in encoded.items()}, padding="longest",
                                  return_tensors="pt")

    @torch.inference_mode()
    def _encode(self, texts: Sequence[str], side: str, batch_size: int, show_progress: bool,
                precision: str | None = None) -> np.ndarray:
        """Encode ``texts`` (eval mode) and return rows in input order.

        Each window of texts is tokenized once; passages are batched longest first within it, so that a batch
        pads little. A window's vectors stay on the device until it ends: a GPU computes while the host
        tokenizes and pads the next batch.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        out = np.empty((len(texts), *self._vector_shape(side)), dtype=np.float32)
        windows = range(0, len(texts), ENCODE_WINDOW)
        batches = sum(-(-min(ENCODE_WINDOW, len(texts) - start) // batch_size) for start in windows)
        bar = batch_bar(range(batches), f"encode {side}s", nested_progress(show_progress))  # under encode's bar
        was_training = self.training
        self.eval()
        try:
            with running(self, precision or self.inference_precision) as model:
                embed = model.embed_queries if side == "query" else model.embed_passages
                for start in windows:
                    encoded = self.token_ids(texts[start:start + ENCODE_WINDOW], side)
                    ids = encoded["input_ids"]
                    order = (list(range(len(ids))) if side == "query"
                             else sorted(range(len(ids)), key=lambda i: -len(ids[i])))
                    vectors = []
                    for first in range(0, len(order), batch_size):
                        rows = order[first:first + batch_size]
                        vectors.append(embed(self.pad(encoded, rows)))
                        bar.update()
                    out[[start + i for i in order]] = torch.cat(vectors).float().cpu().numpy()
        finally:
            self.train(was_training)
            bar.close()
        return out
