"""Training settings: one :class:`TrainConfig`, read from YAML/JSON (``--config``) and overridden by flags.

Every field is also a command-line flag (``n_negatives`` -> ``--n-negatives``; booleans take
``--in-batch/--no-in-batch``; ``none`` clears an optional value). The resolved settings are saved as
``OUTPUT/config.json``; a resumed run may change only the fields in :data:`RESUMABLE`.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import types
import typing
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from ance_ir.data import InputError, atomic_write
from ance_ir.modeling.inference import PRECISIONS as INFERENCE_PRECISIONS
from ance_ir.train.loss import LOSSES
from ance_ir.train.negatives import NEGATIVE_STRATEGIES

PRECISIONS = ("fp32", "bf16", "fp16")
REFRESH_MODES = ("async", "sync")
INDEX_TYPES = ("flat", "hnsw")
# Settings a resumed run may change: they decide when and how things are saved or run, not what is learned
# from which data (refresh_mode and max_staleness do change which negatives later steps see).
RESUMABLE = frozenset({"stop_at", "log_every", "save_every", "keep_checkpoints", "device", "inferencer_device",
                       "refresh_mode", "max_staleness", "progress", "encode_batch_size", "refresh_precision",
                       "threads", "inferencer_threads"})
ENCODER_FIELDS = ("pooling", "normalize", "head", "query_max_length", "passage_max_length")


def _opt(default: Any, help: str) -> Any:
    return field(default=default, metadata={"help": help})


class ConfigError(ValueError):
    """An invalid value of one setting."""

    def __init__(self, name: str, message: str):
        self.name = name
        super().__init__(f"{name}: {message}")


@dataclass
class TrainConfig:
    """Everything a training run needs; see each field's help (``python -m ance_ir.train --help``)."""

    output: str = _opt("", "run folder: config.json, log.jsonl, checkpoints/, negatives/, refresh/")
    model: str = _opt("minilm", "starting encoder: model dir, alias (minilm, bert-tiny) or Hugging Face id")
    init_from: str | None = _opt(None, "start from this encoder dir, or from the latest checkpoint of this "
                                       "run folder (e.g. a BM25 warm-up run); overrides model")
    corpus: str = _opt("", "corpus JSONL/TSV file or dataset name (rag24-mini)")
    train_topics: str = _opt("", "training topics: TSV file or name (rag24-mini-train)")
    train_qrels: str = _opt("", "training qrels: TREC file or name (rag24-mini-train)")
    eval_topics: str | None = _opt(None, "topics evaluated at each refresh (e.g. rag24-mini-test)")
    eval_qrels: str | None = _opt(None, "qrels for eval_topics (default: the qrels named like the topics)")
    min_positive_grade: int = _opt(2, "judgments of at least this grade are training positives")
    negative_exclude_grade: int = _opt(1, "documents judged at least this grade are never used as negatives")
    negatives: str = _opt("ance", "negative strategy: " + ", ".join(NEGATIVE_STRATEGIES))
    n_negatives: int = _opt(1, "sampled negatives per query (1 with no in-batch is ANCE's pairwise loss)")
    negative_depth: int = _opt(200, "ance/bm25/dpr/static: sample from this many top-ranked candidates")
    negatives_file: str | None = _opt(None, "static: JSONL {qid, negatives} or TSV qid<TAB>docid, best first")
    bm25_index: str | None = _opt(None, "bm25/dpr: Lucene index of the corpus (default: built in OUTPUT)")
    in_batch: bool = _opt(False, "also score each query against the other queries' passages in the batch")
    loss: str = _opt("nll", "loss: " + ", ".join(LOSSES))
    temperature: float = _opt(1.0, "scores are divided by this before the softmax (scale = 1/temperature)")
    batch_size: int = _opt(8, "queries per micro-batch, over all processes")
    grad_accumulation: int = _opt(1, "micro-batches per optimizer step")
    passage_buckets: int = _opt(4, "run a batch's passages as this many length-sorted sub-batches, each padded "
                                   "to its own longest (less padding, see docs/bench.md; 1: one batch)")
    lr: float = _opt(1e-5, "peak learning rate (AdamW)")
    warmup_steps: int = _opt(0, "linear warm-up steps (wins over warmup_ratio when > 0)")
    warmup_ratio: float = _opt(0.0, "linear warm-up as a fraction of all steps")
    weight_decay: float = _opt(0.01, "AdamW weight decay (not applied to biases and norms)")
    max_grad_norm: float = _opt(1.0, "clip the gradient norm to this (0: no clipping)")
    epochs: float = _opt(1.0, "passes over the (query, positive) pairs; ignored when max_steps is set")
    max_steps: int | None = _opt(None, "optimizer steps to train (sets the learning-rate schedule)")
    stop_at: int | None = _opt(None, "save a checkpoint and stop after this step; rerun to continue")
    precision: str = _opt("fp32", "fp32, bf16 or fp16 autocast (fp16 needs CUDA)")
    seed: int = _opt(42, "seed for data order, negative sampling and initialisation")
    device: str | None = _opt(None, "cpu, cuda or cuda:N (default: cuda when available)")
    refresh_every: int = _opt(500, "save a checkpoint every N steps; each is refreshed/evaluated (0: never)")
    refresh_mode: str = _opt("async", "async: an inferencer process refreshes while training goes on; "
                                      "sync: training waits for each refresh (exactly reproducible)")
    max_staleness: int | None = _opt(None, "async: wait when the negatives are more than N steps old")
    save_every: int = _opt(0, "extra checkpoints every N steps (0: only at refreshes, stops and the end)")
    keep_checkpoints: int = _opt(0, "keep only the newest N checkpoints (0: keep all)")
    log_every: int = _opt(10, "write a log.jsonl record every N steps")
    progress: bool = _opt(True, "show a progress bar")
    encode_batch_size: int = _opt(128, "refresh: passages per encoding batch")
    refresh_precision: str = _opt("auto", "refresh: encoding precision (" + ", ".join(INFERENCE_PRECISIONS) + "; "
                                          "auto = bf16 where the CPU has native bf16, see docs/bench.md)")
    index_type: str = _opt("flat", "refresh: faiss index type (" + ", ".join(INDEX_TYPES) + ")")
    eval_hits: int = _opt(1000, "refresh: passages retrieved per eval query")
    inferencer_device: str | None = _opt(None, "device of the async inferencer (default: device)")
    threads: int | None = _opt(None, "torch CPU threads of each training process (default: torch's choice)")
    inferencer_threads: int | None = _opt(None, "torch CPU threads of the async inferencer (default: torch's "
                                                "choice); trainer + inferencer threads should not exceed the cores")
    pooling: str | None = _opt(None, "encoder override: cls or mean")
    normalize: bool | None = _opt(None, "encoder override: L2-normalise vectors")
    head: bool | None = _opt(None, "encoder override: ANCE projection head (Linear + LayerNorm)")
    query_max_length: int | None = _opt(None, "encoder override: query tokens")
    passage_max_length: int | None = _opt(None, "encoder override: passage tokens")

    def __post_init__(self) -> None:
        self._validate()
        strategy = NEGATIVE_STRATEGIES[self.negatives]
        if strategy.forces_in_batch:
            self.in_batch = True
        if not strategy.sampled:
            self.n_negatives = 0
        if self.n_negatives == 0 and not self.in_batch:
            raise ConfigError("n_negatives", "is 0 and in_batch is off: a query would have no negatives")

    def _validate(self) -> None:
        for name in ("output", "corpus", "train_topics", "train_qrels"):
            if not getattr(self, name):
                raise ConfigError(name, "is required")
        choices = {"negatives": tuple(NEGATIVE_STRATEGIES), "loss": tuple(LOSSES), "precision": PRECISIONS,
                   "refresh_mode": REFRESH_MODES, "refresh_precision": INFERENCE_PRECISIONS, "index_type": INDEX_TYPES,
                   "pooling": ("cls", "mean", None)}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ConfigError(name, f"must be one of {', '.join(a for a in allowed if a)}, "
                                        f"got {getattr(self, name)!r}")
        positive = ("batch_size", "grad_accumulation", "passage_buckets", "negative_depth", "log_every",
                    "encode_batch_size", "eval_hits", "max_steps", "stop_at", "query_max_length",
                    "passage_max_length", "threads", "inferencer_threads")
        for name in positive:
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(name, f"must be at least 1, got {value}")
        for name in ("n_negatives", "warmup_steps", "refresh_every", "save_every", "keep_checkpoints",
                     "max_staleness", "min_positive_grade", "negative_exclude_grade"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ConfigError(name, f"must not be negative, got {value}")
        for name in ("lr", "temperature", "epochs"):
            if not getattr(self, name) > 0:
                raise ConfigError(name, f"must be positive, got {getattr(self, name)}")
        for name in ("weight_decay", "max_grad_norm"):
            if getattr(self, name) < 0:
                raise ConfigError(name, f"must not be negative, got {getattr(self, name)}")
        if not 0 <= self.warmup_ratio < 1:
            raise ConfigError("warmup_ratio", f"must be in [0, 1), got {self.warmup_ratio}")
        if self.negative_exclude_grade > self.min_positive_grade:
            raise ConfigError("negative_exclude_grade", f"({self.negative_exclude_grade}) must not exceed "
                                                        f"min_positive_grade ({self.min_positive_grade}): "
                                                        "a positive could be sampled as a negative")
        if self.negatives == "static" and not self.negatives_file:
            raise ConfigError("negatives_file", "is required by the static strategy")
        if self.max_staleness is not None and self.refresh_every == 0:
            raise ConfigError("max_staleness", "needs refresh_every > 0 (no newer negatives would ever come)")
        if self.max_staleness is not None and self.max_staleness < self.refresh_every:
            raise ConfigError("max_staleness", f"({self.max_staleness}) must be at least refresh_every "
                                               f"({self.refresh_every})")
        if self.eval_qrels and not self.eval_topics:
            raise ConfigError("eval_qrels", "is set but eval_topics is not")

    def encoder_overrides(self) -> dict[str, Any]:
        """The encoder settings given explicitly (EncoderConfig field -> value)."""
        return {name: getattr(self, name) for name in ENCODER_FIELDS if getattr(self, name) is not None}

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def save(self, path: str | Path) -> None:
        """Write the settings as JSON, atomically."""
        with atomic_write(path) as f:
            f.write(json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> TrainConfig:
        """Read a saved ``config.json`` (or any YAML/JSON settings file)."""
        return build_config(path, {})


def _field_types() -> dict[str, tuple[type, bool]]:
    """Field name -> (base type, optional)."""
    out = {}
    for name, hint in typing.get_type_hints(TrainConfig).items():
        args = typing.get_args(hint) if isinstance(hint, types.UnionType) else ()
        base = next(a for a in args if a is not type(None)) if args else hint
        out[name] = (base, bool(args))
    return out


FIELD_TYPES = _field_types()


def coerce(name: str, value: Any) -> Any:
    """Convert a file or command-line value to the type of setting ``name``; ConfigError if it does not fit."""
    base, optional = FIELD_TYPES[name]
    if value is None or (optional and isinstance(value, str) and value.lower() in ("none", "null")):
        if optional:
            return None
        raise ConfigError(name, "must be set")
    kind = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}[base]
    if base is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
            return value.lower() in ("true", "yes", "1")
    elif base is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value)
    elif base is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
    elif isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return str(value)
    raise ConfigError(name, f"must be {kind}, got {value!r}")


def read_config_file(path: str | Path) -> tuple[dict[str, Any], dict[str, int]]:
    """Settings from a YAML or JSON mapping, and the line each key is on."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "no such config file")
    text = path.read_text(encoding="utf-8")
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise InputError(path, f"not valid YAML or JSON ({getattr(e, 'problem', None) or e})",
                         mark.line + 1 if mark else None) from None
    if data is None:
        return {}, {}
    if not isinstance(data, dict):
        raise InputError(path, "expected a mapping of setting: value", 1)
    lines: dict[str, int] = {}
    for key, _ in node.value:
        name, line = str(key.value), key.start_mark.line + 1
        if name in lines:
            raise InputError(path, f"setting {name!r} given twice (first on line {lines[name]})", line)
        lines[name] = line
    return data, lines


def build_config(path: str | Path | None, overrides: dict[str, Any]) -> TrainConfig:
    """Defaults, then the settings file at ``path`` (if any), then ``overrides`` (flag values)."""
    values: dict[str, Any] = {}
    lines: dict[str, int] = {}
    if path is not None:
        data, lines = read_config_file(path)
        for key, value in data.items():
            if key not in FIELD_TYPES:
                close = difflib.get_close_matches(str(key), FIELD_TYPES, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise InputError(path, f"unknown setting {key!r}{hint}", lines.get(str(key)))
            try:
                values[key] = coerce(key, value)
            except ConfigError as e:
                raise InputError(path, str(e), lines.get(key)) from None
    for key, value in overrides.items():
        try:
            values[key] = coerce(key, value)
        except ConfigError as e:
            raise ValueError(f"--{key.replace('_', '-')}: {e}") from None
    try:
        return TrainConfig(**values)
    except ConfigError as e:
        if e.name in values and e.name not in overrides and path is not None:
            raise InputError(path, str(e), lines.get(e.name)) from None
        raise


def check_resumable(saved: TrainConfig, now: TrainConfig, where: Path) -> list[str]:
    """The changed RESUMABLE settings; ValueError naming the first other setting that differs."""
    changed = []
    for f in fields(TrainConfig):
        before, after = getattr(saved, f.name), getattr(now, f.name)
        if before == after:
            continue
        if f.name not in RESUMABLE:
            raise ValueError(f"{where}: this run has {f.name}={before!r}, now {after!r}; only "
                             f"{', '.join(sorted(RESUMABLE))} may change on resume (use a new output folder)")
        changed.append(f.name)
    return changed


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ance_ir.train", argument_default=argparse.SUPPRESS,
        description="Train a dense retriever (ANCE, BM25 warm-up and the baselines). Settings come from "
                    "--config FILE (YAML/JSON), then flags. Rerunning with the same OUTPUT resumes.")
    parser.add_argument("--config", help="YAML or JSON file of settings; flags override it")
    parser.add_argument("--resume", action="store_true",
                        help="fail unless OUTPUT has a checkpoint to continue from (resuming is automatic)")
    for f in fields(TrainConfig):
        flag = "--" + f.name.replace("_", "-")
        help_text = f.metadata["help"]
        if f.default == "":
            help_text += " (required)"
        elif "default" not in help_text:
            help_text += f" (default: {f.default})"
        if FIELD_TYPES[f.name][0] is bool:
            parser.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, help=help_text)
        else:
            parser.add_argument(flag, dest=f.name, metavar=FIELD_TYPES[f.name][0].__name__.upper(),
                                help=help_text)
    return parser


def parse_args(argv: list[str] | None = None) -> tuple[TrainConfig, bool]:
    """The config from ``--config`` and flags, and whether ``--resume`` was given."""
    args = vars(build_parser().parse_args(argv))
    path, resume = args.pop("config", None), args.pop("resume", False)
    return build_config(path, args), resume
