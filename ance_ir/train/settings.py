"""Training settings in sections: ``model``, ``data``, ``task``, ``negatives``, ``loss``, ``refresh``, ``optim``
and the run's own top-level keys. Torch-free, so that ``--help`` starts at once.

Each section validates its own fields. Sections that pick a registered component by ``name`` (``model`` by
``kind``, ``data`` by ``source``) also carry ``options``: the keys that component declares (see
:mod:`ance_ir.train.components`), checked when the config is built. Every field also has a flat *legacy*
name (``lr``, ``negative_depth``, ``refresh_every``, ...): the command-line flag and the key older flat
config files use.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

PRECISIONS = ("fp32", "bf16", "fp16")
INFERENCE_PRECISIONS = ("auto", "fp32", "bf16", "fp16", "int8")  # ance_ir.modeling.inference.PRECISIONS
REFRESH_MODES = ("async", "sync")
INDEX_TYPES = ("flat", "hnsw")
POOLINGS = ("cls", "mean")


class ConfigError(ValueError):
    """An invalid value of one setting (``name``: its qualified name, e.g. ``optim.lr``)."""

    def __init__(self, name: str, message: str):
        self.name = name
        super().__init__(f"{name}: {message}")


def _opt(default: Any, help: str, legacy: str | None = None, metavar: str | None = None) -> Any:
    metadata = {"help": help, "legacy": legacy, **({"metavar": metavar} if metavar else {})}
    if isinstance(default, (dict, list)):
        return field(default_factory=type(default), metadata=metadata)
    return field(default=default, metadata=metadata)


class Section:
    """A group of settings; subclasses are dataclasses with a ``section`` name ("" for the top level)."""

    section: str = ""

    def qualified(self, name: str) -> str:
        return f"{self.section}.{name}" if self.section else name

    def check(self) -> None:
        """Raise ConfigError for the first invalid field."""

    def _at_least(self, minimum: int, *names: str) -> None:
        for name in names:
            value = getattr(self, name)
            if value is not None and value < minimum:
                word = "at least 1" if minimum == 1 else "not be negative"
                raise ConfigError(self.qualified(name), f"must {'be ' if minimum == 1 else ''}{word}, got {value}")

    def _one_of(self, name: str, allowed: tuple[Any, ...]) -> None:
        value = getattr(self, name)
        if value is not None and value not in allowed:
            raise ConfigError(self.qualified(name), f"must be one of {', '.join(allowed)}, got {value!r}")


@dataclass
class ModelSection(Section):
    section = "model"
    name: str = _opt("minilm", "starting model: model dir, run folder, alias (minilm, bert-tiny) or Hugging Face id",
                     "model")
    kind: str | None = _opt(None, "model kind: dense, cross-encoder, colbert, mebert, poly-encoder, splade, deepct, "
                                   "generator, mlm or a plugin's (default: the task's kind if it has one, else what "
                                   "the model folder records, else dense)", "kind")
    init_from: str | None = _opt(None, "start from this model dir, or from this run folder's model (its final/, else "
                                       "its newest complete checkpoint; e.g. a BM25 warm-up run); overrides name",
                                 "init_from")
    pooling: str | None = _opt(None, "dense override: cls or mean", "pooling")
    normalize: bool | None = _opt(None, "dense override: L2-normalise vectors", "normalize")
    head: bool | None = _opt(None, "dense override: ANCE projection head (Linear + LayerNorm)", "head")
    query_max_length: int | None = _opt(None, "override: query tokens", "query_max_length")
    passage_max_length: int | None = _opt(None, "override: passage tokens", "passage_max_length")
    options: dict[str, Any] = _opt({}, "further overrides the model kind declares")

    def check(self) -> None:
        self._one_of("pooling", POOLINGS)
        self._at_least(1, "query_max_length", "passage_max_length")

    def overrides(self) -> dict[str, Any]:
        """The model settings given explicitly (passed to the kind's ``from_pretrained``)."""
        names = ("pooling", "normalize", "head", "query_max_length", "passage_max_length")
        return {**{n: getattr(self, n) for n in names if getattr(self, n) is not None}, **self.options}


@dataclass
class DataSection(Section):
    section = "data"
    source: str = _opt("qrels", "training data source: qrels (topics + qrels), groups (JSONL training groups) or "
                                "a pretraining source made from the corpus (ict, bfs, wlp, spider, simcse, "
                                "contriever, qgen); corpus: the passages alone (task: mlm)",
                       "data_source")
    corpus: str = _opt("", "corpus JSONL/TSV file or dataset name (rag24-mini)", "corpus")
    topics: str | None = _opt(None, "training topics: TSV file or name (rag24-mini-train); required by the qrels "
                                    "source", "train_topics")
    qrels: str | None = _opt(None, "training qrels: TREC file or name (rag24-mini-train); required by the qrels "
                                   "source, optional for groups (judged passages are then never negatives)",
                             "train_qrels")
    groups: list[str] = _opt([], "groups source: JSONL training groups files, several (a list, or --groups A "
                                 "--groups B) read as one, a query id in two of them refused (python -m "
                                 "ance_ir.negatives writes them)", "groups")
    min_positive_grade: int = _opt(1, "judgments of at least this grade are training positives (1 fits binary "
                                      "0/1 qrels; graded ones such as rag24-mini's 0-3 may want 2)",
                                   "min_positive_grade")
    negative_exclude_grade: int = _opt(1, "documents judged at least this grade are never used as negatives",
                                       "negative_exclude_grade")
    options: dict[str, Any] = _opt({}, "further settings the data source declares")

    def groups_named(self) -> str:
        """The groups files as a message names them."""
        return ", ".join(self.groups)

    def check(self) -> None:
        if not self.corpus:
            raise ConfigError(self.qualified("corpus"), "is required")
        self._at_least(0, "min_positive_grade", "negative_exclude_grade")


@dataclass
class TaskSection(Section):
    section = "task"
    name: str = _opt("contrastive", "training task: contrastive, tas, tas-b, adore, rocketqa-v2, cross-encoder, "
                                    "colbert, mebert, poly-encoder, splade, deepct, generator, mlm, moco (built in) "
                                    "or a plugin's", "task")
    batch_size: int = _opt(8, "queries per micro-batch, over all processes", "batch_size")
    passage_buckets: int | None = _opt(None, "run a batch's passages as this many length-sorted sub-batches, "
                                             "each padded to its own longest (1: one batch). Unset: 4 on a CPU "
                                             "(less padding), 1 on a GPU (fewer kernel launches); docs/bench.md",
                                       "passage_buckets")
    n_negatives: int = _opt(1, "sampled negatives per query (1 with no in-batch is ANCE's pairwise loss)",
                            "n_negatives")
    in_batch: bool = _opt(False, "also score each query against the other queries' passages in the batch",
                          "in_batch")
    cross_batch: bool = _opt(True, "with in_batch under torchrun: score each query against every process's passages "
                                   "(RocketQA's cross-batch negatives); false: its own process's only", "cross_batch")
    grad_cache_chunk: int = _opt(0, "gradient cache (dual-encoder tasks): encode a batch in chunks of this many "
                                    "queries and their passages, the big batch's gradients with one chunk's "
                                    "activations (0: off)", "grad_cache_chunk")
    options: dict[str, Any] = _opt({}, "further settings the task declares")

    def check(self) -> None:
        self._at_least(1, "batch_size", "passage_buckets")
        self._at_least(0, "n_negatives", "grad_cache_chunk")


@dataclass
class NegativesSection(Section):
    section = "negatives"
    name: str = _opt("ance", "negative sampler: random, inbatch, bm25, dpr, bm25-rand, ance, static, groups, "
                             "candidates", "negatives")
    depth: int = _opt(200, "candidate samplers: draw from this many top-ranked candidates", "negative_depth")
    file: str | None = _opt(None, "static: JSONL {qid, negatives} or TSV qid<TAB>docid, best first",
                            "negatives_file")
    bm25_index: str | None = _opt(None, "bm25/dpr: Lucene index of the corpus (default: built in OUTPUT)",
                                  "bm25_index")
    options: dict[str, Any] = _opt({}, "further settings the sampler (and its candidate source) declares")

    def check(self) -> None:
        self._at_least(1, "depth")


@dataclass
class LossSection(Section):
    section = "loss"
    name: str = _opt("nll", "loss: nll (listwise), hardest (NCE Neg: the hardest in-batch negative), bce (pointwise), "
                           "ranknet (pairwise, STAR), mse, margin-mse, kl (distillation from teacher scores in groups; "
                           "built in) or a plugin's", "loss")
    temperature: float = _opt(1.0, "scores are divided by this before the softmax (scale = 1/temperature)",
                              "temperature")
    teacher_index: str | None = _opt(None, "distillation from a dense teacher: its dense index of the corpus "
                                           "(python -m ance_ir.encode); its recorded encoder's query vectors "
                                           "score every passage the task scores, in-batch ones too, instead of "
                                           "the groups' teacher scores", "teacher_index")
    options: dict[str, Any] = _opt({}, "further settings the loss declares")

    def check(self) -> None:
        if not self.temperature > 0:
            raise ConfigError(self.qualified("temperature"), f"must be positive, got {self.temperature}")


@dataclass
class RefreshSection(Section):
    section = "refresh"
    every: int = _opt(500, "save a checkpoint every N steps; each is refreshed/evaluated (0: never). Read by the "
                           "tasks with the refresh hook (contrastive, tas, tas-b, mebert, poly-encoder, moco); the "
                           "others refuse it (their checkpoints: save_every)", "refresh_every")
    mode: str = _opt("async", "async: an inferencer process refreshes while training goes on; sync: training "
                              "waits for each refresh (exactly reproducible)", "refresh_mode")
    max_staleness: int | None = _opt(None, "async: wait when the negatives are more than N steps old",
                                     "max_staleness")
    precision: str = _opt("auto", "encoding precision (" + ", ".join(INFERENCE_PRECISIONS) + "; auto = bf16 "
                                  "where the hardware has native bf16, fp16 on older GPUs, on other CPUs int8 for "
                                  "normalised vectors, else fp32; docs/bench.md)", "refresh_precision")
    index_type: str = _opt("flat", "faiss index type (" + ", ".join(INDEX_TYPES) + ")", "index_type")
    batch_size: int = _opt(128, "passages per encoding batch", "encode_batch_size")
    hits: int = _opt(1000, "passages retrieved per eval query", "eval_hits")
    device: str | None = _opt(None, "device of the async inferencer (default: the run's device)",
                              "inferencer_device")
    threads: int | None = _opt(None, "torch CPU threads of the async inferencer (default: torch's choice); "
                                     "trainer + inferencer threads should not exceed the cores", "inferencer_threads")
    reencode_share: float = _opt(0.2, "share of the corpus a refresh that mines negatives re-encodes (1: all). "
                                      "Below 1: the training queries' top priority_depth latest negatives, then "
                                      "the passages encoded longest ago; the rest keep their vectors (the first "
                                      "refresh, and refreshes that only evaluate, encode all). 0.2 costs 0.2 of a "
                                      "full refresh and its top-200 negatives overlap a full one's by 0.97 "
                                      "(MiniLM, docs/bench.md)", "reencode_share")
    priority_depth: int = _opt(5, "partial refresh: each training query's top N latest negatives are always "
                                  "re-encoded", "priority_depth")
    passage_max_length: int | None = _opt(None, "passage tokens a refresh encodes (default: the model's "
                                          "passage_max_length); fewer cost less and move the negatives further "
                                          "from a full-length refresh's (docs/bench.md)",
                                          "refresh_passage_max_length")
    final: bool = _opt(True, "refresh the last checkpoint too (its metrics; its negatives are never trained on)",
                       "refresh_final")
    keep_index: bool = _opt(False, "keep each refresh's faiss index as a dense index folder, refresh/step-N.index/ "
                                   "(searchable by python -m ance_ir.search while its checkpoint is kept; after a "
                                   "full refresh of the final checkpoint it saves an encode)",
                            "keep_refresh_index")
    eval_topics: str | None = _opt(None, "topics evaluated at each refresh (e.g. rag24-mini-test)", "eval_topics")
    eval_qrels: str | None = _opt(None, "qrels for eval_topics (default: the qrels named like the topics; a "
                                        "topics file needs them)", "eval_qrels")

    def check(self) -> None:
        self._one_of("mode", REFRESH_MODES)
        self._one_of("precision", INFERENCE_PRECISIONS)
        self._one_of("index_type", INDEX_TYPES)
        self._at_least(1, "batch_size", "hits", "threads", "priority_depth", "passage_max_length")
        if not 0 < self.reencode_share <= 1:
            raise ConfigError(self.qualified("reencode_share"), f"must be in (0, 1], got {self.reencode_share}")
        self._at_least(0, "every", "max_staleness")
        if self.max_staleness is not None and self.every == 0:
            raise ConfigError(self.qualified("max_staleness"), "needs refresh.every > 0 (no newer negatives "
                                                               "would ever come)")
        if self.max_staleness is not None and self.max_staleness < self.every:
            raise ConfigError(self.qualified("max_staleness"), f"({self.max_staleness}) must be at least "
                                                               f"refresh.every ({self.every})")
        if self.eval_qrels and not self.eval_topics:
            raise ConfigError(self.qualified("eval_qrels"), "is set but eval_topics is not")


@dataclass
class OptimSection(Section):
    section = "optim"
    lr: float = _opt(1e-5, "peak learning rate (AdamW)", "lr")
    warmup_steps: int = _opt(0, "linear warm-up steps (wins over warmup_ratio when > 0)", "warmup_steps")
    warmup_ratio: float = _opt(0.0, "linear warm-up as a fraction of all steps", "warmup_ratio")
    weight_decay: float = _opt(0.01, "AdamW weight decay (not applied to biases and norms)", "weight_decay")
    max_grad_norm: float = _opt(1.0, "clip the gradient norm to this (0: no clipping)", "max_grad_norm")
    grad_accumulation: int = _opt(1, "micro-batches per optimizer step", "grad_accumulation")
    epochs: float = _opt(1.0, "passes over the training examples; ignored when max_steps is set", "epochs")
    max_steps: int | None = _opt(None, "optimizer steps to train (sets the learning-rate schedule)", "max_steps")
    precision: str = _opt("fp32", "fp32, bf16 or fp16 autocast (fp16 needs CUDA)", "precision")

    def check(self) -> None:
        self._one_of("precision", PRECISIONS)
        self._at_least(1, "grad_accumulation", "max_steps")
        self._at_least(0, "warmup_steps")
        for name in ("lr", "epochs"):
            value = getattr(self, name)
            if not (value > 0 and value != float("inf")):
                raise ConfigError(self.qualified(name), f"must be a positive finite number, got {value}")
        for name in ("weight_decay", "max_grad_norm"):
            value = getattr(self, name)
            if not 0 <= value < float("inf"):
                raise ConfigError(self.qualified(name), f"must be a finite number >= 0, got {value}")
        if not 0 <= self.warmup_ratio < 1:
            raise ConfigError(self.qualified("warmup_ratio"), f"must be in [0, 1), got {self.warmup_ratio}")


@dataclass
class RunSection(Section):
    """The top-level keys: where the run lives and how it is run."""

    output: str = _opt("", "run folder: config.json, log.jsonl, checkpoints/, negatives/, refresh/, final/",
                       "output")
    seed: int = _opt(42, "seed for data order, negative sampling and initialisation", "seed")
    device: str | None = _opt(None, "cpu, cuda or cuda:N (default: cuda when available)", "device")
    threads: int | None = _opt(None, "torch CPU threads of each training process (default: torch's choice)",
                               "threads")
    stop_at: int | None = _opt(None, "save a checkpoint and stop after this step; rerun to continue", "stop_at")
    save_every: int = _opt(0, "extra checkpoints every N steps (0: only at refreshes, stops and the end)",
                           "save_every")
    keep_checkpoints: int = _opt(0, "keep only the newest N checkpoints (0: keep all)", "keep_checkpoints")
    log_every: int = _opt(10, "write a log.jsonl record every N steps", "log_every")
    progress: bool = _opt(True, "show a progress bar", "progress")
    imports: list[str] = _opt([], "plugin files or modules to import first (they register components)", "import",
                              "FILE_OR_MODULE")

    def check(self) -> None:
        if not self.output:
            raise ConfigError("output", "is required")
        self._at_least(1, "threads", "stop_at", "log_every")
        self._at_least(0, "save_every", "keep_checkpoints")
        if not 0 <= self.seed < 2 ** 32:
            raise ConfigError("seed", f"must be from 0 to 2**32 - 1 (numpy's seeds), got {self.seed}")


SECTIONS: dict[str, type[Section]] = {"model": ModelSection, "data": DataSection, "task": TaskSection,
                                      "negatives": NegativesSection, "loss": LossSection,
                                      "refresh": RefreshSection, "optim": OptimSection}
#: the field a section's scalar shorthand sets (``negatives: bm25`` is ``negatives: {name: bm25}``)
SHORTHAND_FIELD = {"model": "name", "data": "source", "task": "name", "negatives": "name", "loss": "name"}


def section_fields(cls: type[Section]) -> dict[str, dataclasses.Field]:
    """The settable fields of a section, by name (``options`` excluded)."""
    return {f.name: f for f in dataclasses.fields(cls) if f.name != "options"}


def field_default(f: dataclasses.Field) -> Any:
    """A settings field's default (a new empty list or dict for one made by a factory)."""
    return f.default_factory() if f.default is dataclasses.MISSING else f.default


def legacy_names() -> dict[str, tuple[str | None, str]]:
    """Flat (legacy/flag) name -> (section or None for top level, field)."""
    out: dict[str, tuple[str | None, str]] = {}
    for section, cls in [(None, RunSection), *SECTIONS.items()]:
        for name, f in section_fields(cls).items():
            if f.metadata.get("legacy"):
                out[f.metadata["legacy"]] = (section, name)
    return out


LEGACY = legacy_names()
