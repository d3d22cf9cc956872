"""Model kinds and the one loader every stage uses (train, refresh, encode, search, the Pyserini adapters).

A *model kind* is a class registered under a name with :func:`register_model_kind`. It says how a model
of that kind is loaded (``from_pretrained``), saved (``save_pretrained``, which writes its ``records()``: the kind in
``ance_ir_model.json`` and its settings, as loaded), how it encodes and scores, and which index its vectors go to
(``index``):

* ``dense``: one vector per text, dot product, a faiss index (:class:`~ance_ir.modeling.DenseEncoder`).
* ``cross-encoder``: scores a (query, passage) pair; ``index`` None: it reranks a run
  (:class:`~ance_ir.modeling.cross_encoder.CrossEncoder`, :mod:`ance_ir.rerank`).
* ``mebert``: a query vector against a passage's first ``m`` token vectors, best one counts; ``m`` rows per
  passage in a faiss index (:class:`~ance_ir.modeling.mebert.MeBertEncoder`).
* ``poly-encoder``: ``m`` code vectors of the query, mixed by attention to the passage vector; ``index`` None: it
  reranks a run (:class:`~ance_ir.modeling.poly_encoder.PolyEncoder`).
* ``colbert``: token vectors, MaxSim; ``index`` ``"tokens"``: a token index (:mod:`ance_ir.index.token_index`);
  it also scores pairs, so it reranks a run too (:class:`~ance_ir.modeling.colbert.ColBERT`).

* ``splade``: vocabulary-sized term weights from an MLM head; ``index`` ``"impact"``: a Lucene impact index
  through Pyserini (:class:`~ance_ir.modeling.splade.Splade`).
* ``deepct``: a weight for each word of a passage (its predicted query term recall); ``index`` ``"impact"`` as
  SPLADE's, queries as their words (:class:`~ance_ir.modeling.deepct.DeepCT`).
* ``generator``: a sequence-to-sequence model writing the queries a passage answers (doc2query); ``index`` None:
  it expands a corpus (:class:`~ance_ir.modeling.generator.QueryGenerator`, :mod:`ance_ir.expand`).
* ``mlm``: a transformer with its masked-LM head, what ``task: mlm`` trains; ``index`` None. It is saved as a plain
  Hugging Face folder recording no kind, so any kind starts from it (:class:`~ance_ir.modeling.mlm.MaskedLM`).

A new kind is one class with a ``kind`` name and an ``index`` value, decorated with
:func:`register_model_kind`; :func:`load_model` then finds it from what a saved folder records. The built-in kinds
build on :class:`~ance_ir.modeling.module.KindModule` (their ``device`` and ``records()``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from safetensors import SafetensorError

from ance_ir.data import InputError
from ance_ir.train.registry import Registry

MODEL_FILE = "ance_ir_model.json"
DEFAULT_KIND = "dense"


class ModelKind(Protocol):
    """What :func:`load_model` and the tools that save or compare models need of a registered kind."""

    kind: str
    index: str | None

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path, **overrides: Any) -> Any: ...

    def save_pretrained(self, directory: str | Path) -> None: ...

    def records(self) -> dict[str, dict[str, Any]]: ...


MODEL_KINDS = Registry("model kind", key="kind")
#: class decorator: make a model class loadable by its ``kind`` name
register_model_kind = MODEL_KINDS.register


def kind_records(kind: str, name: str, settings: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The records of a kind with one settings file: its kind in ``ance_ir_model.json``, its settings in ``name``."""
    return {MODEL_FILE: {"kind": kind}, name: settings}


def write_records(directory: str | Path, records: dict[str, dict[str, Any]]) -> None:
    """Write a saved model's records (its ``records()``: file name -> JSON object) into ``directory``."""
    for name, record in records.items():
        (Path(directory) / name).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


def read_settings(directory: str | Path, name: str) -> dict[str, Any]:
    """The settings a kind saved in ``directory/name`` ({} for a folder without them, e.g. a bare backbone);
    InputError naming the file for one that is not a JSON object."""
    from ance_ir.data.lines import read_json_object

    path = Path(directory) / name
    return read_json_object(path) if path.is_file() else {}


#: model types that number positions from ``pad_token_id + 1`` (RoBERTa's scheme): the ids below are never used
_POSITIONS_AFTER_PADDING = frozenset({"roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "roberta-prelayernorm",
                                      "data2vec-text", "xmod", "mpnet", "longformer", "ibert"})


def text_positions(config: Any) -> int | None:
    """The tokens a text of a model with the Hugging Face ``config`` can hold (None: no limit it records): its
    position embeddings, less RoBERTa's (and MPNet's) ``pad_token_id + 1`` unused ones (514 -> 512)."""
    positions = getattr(config, "max_position_embeddings", None)
    kind = getattr(config, "model_type", None)
    if positions and kind in _POSITIONS_AFTER_PADDING:
        padding = getattr(config, "pad_token_id", None)
        return positions - (1 if kind == "mpnet" or padding is None else padding) - 1  # MPNet's padding id is 1
    return positions


def choose_settings(given: dict[str, Any], saved: dict[str, Any], defaults: dict[str, Any],
                    positions: int | None = None, lengths: tuple[str, ...] = ()) -> dict[str, Any]:
    """Each of ``defaults``' settings: the given value (not None), else the saved one, else its default; the
    default of a setting in ``lengths`` (tokens) at most the model's ``positions``."""
    chosen = {}
    for name, default in defaults.items():
        if given.get(name) is not None:
            chosen[name] = given[name]
        elif name in saved:
            chosen[name] = saved[name]
        else:
            chosen[name] = min(default, positions) if name in lengths and positions else default
    return chosen


def saved_kind(directory: str | Path) -> str | None:
    """The kind a saved model folder records; None for a folder saved by other software (or a hub id)."""
    path = Path(directory) / MODEL_FILE
    if not path.is_file():
        return None
    try:
        return str(json.loads(path.read_text(encoding="utf-8"))["kind"])
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: not a valid model record ({e})") from None


def register_built_in_kinds() -> None:
    """Import the modules of the built-in kinds (each registers itself), e.g. before plugins may register theirs."""
    import ance_ir.modeling.colbert  # noqa: F401
    import ance_ir.modeling.cross_encoder  # noqa: F401
    import ance_ir.modeling.deepct  # noqa: F401
    import ance_ir.modeling.encoder  # noqa: F401
    import ance_ir.modeling.generator  # noqa: F401
    import ance_ir.modeling.mebert  # noqa: F401
    import ance_ir.modeling.mlm  # noqa: F401
    import ance_ir.modeling.poly_encoder  # noqa: F401
    import ance_ir.modeling.splade  # noqa: F401


def kind_class(kind: str) -> type[ModelKind]:
    """The class registered for ``kind``; ValueError naming the known kinds (and how plugins register)."""
    register_built_in_kinds()
    return MODEL_KINDS.require(kind)


def load_model(name_or_path: str | Path, kind: str | None = None, **overrides: Any) -> Any:
    """Load a model of any kind: a saved folder (its recorded kind), a run folder, an alias or a hub id.

    ``kind`` is what the caller expects: a folder that records another kind is refused; a folder or name
    that records none (a plain Hugging Face model) is loaded as ``kind`` (default: the alias's kind, e.g.
    ``splade`` for ``splade-tiny``, else ``dense``).
    ``overrides`` go to the kind's ``from_pretrained`` (e.g. pooling for ``dense``).
    """
    from ance_ir.modeling.resolve import ALIASES, alias_kind, check_loadable, resolve_model_path

    path = resolve_model_path(name_or_path)
    check_loadable(path)
    recorded = saved_kind(path) if Path(path).is_dir() else None
    if recorded is not None and kind is not None and recorded != kind:
        raise ValueError(f"{name_or_path}: is a {recorded!r} model, expected a {kind!r} model")
    # an alias goes on by name: its defaults (minilm: mean pooling, normalised) are looked up by name
    source = name_or_path if str(name_or_path).lower() in ALIASES else path
    cls = kind_class(recorded or kind or alias_kind(name_or_path) or DEFAULT_KIND)
    try:
        return cls.from_pretrained(source, **overrides)
    except SafetensorError as e:  # a weights file cut short or overwritten: the folder, not safetensors' internals
        raise InputError(path, f"a weights file is not readable safetensors ({e})") from None


def load_index_model(name: str | Path, kind: str, part: str, **overrides: Any) -> Any:
    """:func:`load_model` of the model that searches an index; ValueError when its ``part`` (the head or projection
    it scores with) was newly initialised at load time (a plain backbone): it would score with random weights."""
    model = load_model(name, kind, **overrides)
    if getattr(model, "fresh_head", False):
        raise ValueError(f"{name}: has no trained {model.kind} {part} (a plain backbone); search with the model that "
                         "encoded the index")
    return model
