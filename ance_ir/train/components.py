"""Checking a config's components: each section's chosen name is registered, its options are the ones the
component declares (completed with their defaults), the components agree with each other, and no setting they
all ignore is changed from its default (or named by a flag).

A component declares ``options`` (name -> default), may check the whole config in ``check_config`` and may say
which settings it ``reads`` (a task: which of the ``negatives``, ``refresh`` and ``loss`` sections, and whether
``task.passage_buckets``; a sampler: which ``negatives`` settings; a data source: which ``data`` settings). A
candidate source's options are the keyword parameters of its constructor.
"""

from __future__ import annotations

import inspect
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from ance_ir.plugins import load_plugins
from ance_ir.train.registry import check_options
from ance_ir.train.settings import ConfigError, LossSection, Section, field_default, section_fields

if TYPE_CHECKING:
    from ance_ir.train.arguments import TrainConfig


def _source_options(name: str) -> dict[str, Any]:
    from ance_ir.negatives.sources import CANDIDATE_SOURCES

    parameters = inspect.signature(CANDIDATE_SOURCES.lookup(name, "negatives.source").__init__).parameters.values()
    return {p.name: p.default for p in parameters
            if p.name != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def _sampler_options(config: TrainConfig) -> dict[str, Any]:
    """The options the config's sampler declares, with its candidate source's if it has one (name -> default)."""
    from ance_ir.train.negatives import NEGATIVE_STRATEGIES

    declared = dict(NEGATIVE_STRATEGIES.lookup(config.negatives.name, "negatives.name").options)
    if "source" in declared:
        declared.update(_source_options(str(config.negatives.options.get("source", declared["source"]))))
    return declared


def _check(section: Any, declared: dict[str, Any]) -> None:
    known = [section.qualified(n) for n in section_fields(type(section))]
    section.options = check_options(declared, section.options, section.section, known)


def _saved_kind(name: str) -> str | None:
    """The kind a local model folder (or a run folder's model) records; None for an alias, a hub id, a folder
    without a record or one that is gone (a resumed run loads its checkpoint, not ``model.name``)."""
    from pathlib import Path

    from ance_ir.modeling.kinds import saved_kind
    from ance_ir.modeling.resolve import resolve_model_path

    if not Path(name).expanduser().is_dir():
        return None
    path = resolve_model_path(name)
    return saved_kind(path) if Path(path).is_dir() else None


#: the ``task`` settings of drawing negatives, unused where the task reads no ``negatives`` settings
DRAWING = ("n_negatives", "in_batch", "cross_batch")


def _unread(section: Section, reads: frozenset[str] | None, kept: tuple[str, ...], why: str) -> dict[str, str]:
    """``section``'s settings outside ``reads`` and ``kept`` (qualified name -> ``why``); none when reads is None."""
    if reads is None:
        return {}
    return {section.qualified(n): why for n in section_fields(type(section)) if n not in reads and n not in kept}


def unused_settings(config: TrainConfig) -> dict[str, str]:
    """The settings none of the config's (checked) components reads: qualified name -> why."""
    from ance_ir.train.dataset import DATA_SOURCES
    from ance_ir.train.negatives import NEGATIVE_STRATEGIES
    from ance_ir.train.task import TASKS

    task, sampler = TASKS[config.task.name], NEGATIVE_STRATEGIES[config.negatives.name]
    data = DATA_SOURCES[config.data.source]
    unused = {**_unread(config.negatives, sampler.reads, ("name",), f"sampler {sampler.name!r} does not use it"),
              **_unread(config.data, data.reads, ("source", "corpus"), f"data source {data.name!r} does not read it")}
    for section, why in ((config.negatives, "samples no negatives"),
                         (config.refresh, "neither refreshes nor evaluates checkpoints while it trains (its "
                                          f"checkpoints: save_every){task.evaluate_hint()}"),
                         (config.loss, f"trains with its own loss ({task.own_loss})")):
        if not task.reads_setting(section.section):
            names = [*section_fields(type(section)), *getattr(section, "options", {})]
            reason = task.why_unread.get(section.section, f"task {task.name!r} {why}")
            unused.update({section.qualified(n): reason for n in names})
    if not task.reads_setting("negatives"):  # nor the task settings that say how they are drawn
        unused.update({f"task.{name}": unused["negatives.name"] for name in DRAWING})
    if not task.reads_setting("passage_buckets"):
        unused["task.passage_buckets"] = f"task {task.name!r} does not split its passages into sub-batches"
    return unused


def check_unused(config: TrainConfig, flagged: Collection[str] = ()) -> None:
    """ConfigError on the first setting that none of the chosen components reads and that differs from its
    default, or is ``flagged`` (named by a flag) with a value (None or an empty list, "not set", is no claim to be
    read)."""
    from ance_ir.train.loss import LOSSES

    unused = unused_settings(config)
    declared = {"negatives": _sampler_options(config), "loss": LOSSES[config.loss.name].options}
    for section in (config.task, config.negatives, config.refresh, config.loss, config.data):
        values = {name: (getattr(section, name), field_default(f)) for name, f in section_fields(type(section)).items()}
        values |= {name: (value, declared.get(section.section, {}).get(name))
                   for name, value in getattr(section, "options", {}).items()}
        for name, (value, default) in values.items():
            qualified = section.qualified(name)
            if qualified in unused and (value != default or qualified in flagged and value not in (None, [])):
                raise ConfigError(qualified, f"is set ({value!r}) but not used: {unused[qualified]}")


def check_components(config: TrainConfig, flagged: Collection[str] | None = ()) -> None:
    """Import the config's plugins, then check every component it names; ConfigError on the first problem.
    Settings no component reads are refused last (:func:`check_unused`, ``flagged`` the settings flags name);
    ``flagged`` None: not at all (a run's saved config)."""
    import ance_ir.pretrain_data  # noqa: F401 - registers the pretraining data sources
    import ance_ir.train.adore  # noqa: F401 - registers the built-in tasks
    import ance_ir.train.colbert  # noqa: F401
    import ance_ir.train.contrastive  # noqa: F401
    import ance_ir.train.cross_encoder  # noqa: F401
    import ance_ir.train.deepct  # noqa: F401
    import ance_ir.train.generator  # noqa: F401
    import ance_ir.train.mebert  # noqa: F401
    import ance_ir.train.mlm  # noqa: F401
    import ance_ir.train.moco  # noqa: F401
    import ance_ir.train.poly_encoder  # noqa: F401
    import ance_ir.train.rocketqa  # noqa: F401
    import ance_ir.train.splade  # noqa: F401
    import ance_ir.train.tas  # noqa: F401
    from ance_ir.modeling.kinds import kind_class
    from ance_ir.train.contrastive import GroupTask
    from ance_ir.train.dataset import DATA_SOURCES
    from ance_ir.train.loss import LOSSES
    from ance_ir.train.task import TASKS

    try:
        load_plugins(config.imports)
    except (FileNotFoundError, ValueError) as e:
        raise ConfigError("imports", str(e)) from None
    task = TASKS.lookup(config.task.name, "task.name")
    if config.task.grad_cache_chunk and not task.grad_cache:
        raise ConfigError("task.grad_cache_chunk", f"task {task.name!r} has no gradient cache (the dual-encoder "
                                                   "tasks have)")
    if config.model.kind is None and task.model_kind is not None:
        config.model.kind = task.model_kind
    try:
        kind = kind_class(config.model.kind or "dense")
    except ValueError as e:
        raise ConfigError("model.kind", str(e)) from None
    if task.model_kind is not None and not issubclass(kind, kind_class(task.model_kind)):
        raise ConfigError("model.kind", f"task {task.name!r} trains {task.model_kind!r} models, got "
                                        f"{config.model.kind!r}")
    saved = _saved_kind(config.model.name) if config.model.kind is None and not config.model.init_from else None
    if saved is not None and not issubclass(kind_class(saved), kind_class(task.model_kind or "dense")):
        raise ConfigError("model.name", f"{config.model.name} is a saved {saved!r} model; task {task.name!r} trains "
                                        f"{task.model_kind or 'dense'!r} models")
    declared = getattr(kind, "options", {})
    given = check_options(declared, config.model.options, "model",
                          [config.model.qualified(n) for n in section_fields(type(config.model))])
    config.model.options = {k: given[k] for k in config.model.options}  # unset ones stay the saved model's
    data = DATA_SOURCES.lookup(config.data.source, "data.source")
    _check(config.data, data.options)
    _check(config.task, task.options)
    loss = LOSSES.lookup(config.loss.name, "loss.name")
    _check(config.loss, loss.options)
    if config.loss.teacher_index and not loss.needs_teacher:
        raise ConfigError("loss.teacher_index", f"loss {config.loss.name!r} uses no teacher scores (the "
                                                "distillation losses do: mse, margin-mse, kl)")
    if config.loss.teacher_index and not issubclass(task, GroupTask):
        raise ConfigError("loss.teacher_index", f"task {task.name!r} does not train on groups of passages a "
                                                "teacher could score")
    if loss.needs_teacher and not data.teacher_scores and not config.loss.teacher_index:
        raise ConfigError("loss.name", f"{config.loss.name!r} distils teacher scores, which data source "
                                       f"{config.data.source!r} does not bring; use data.source: groups with groups "
                                       "scored by python -m ance_ir.rerank --groups, or set loss.teacher_index")
    _check(config.negatives, _sampler_options(config))
    data.check_config(config)
    d, grades = config.data, {"min_positive_grade", "negative_exclude_grade"}
    if (data.reads is None or grades <= data.reads) and d.negative_exclude_grade > d.min_positive_grade:
        raise ConfigError("data.negative_exclude_grade", f"({d.negative_exclude_grade}) must not exceed "
                                                         f"min_positive_grade ({d.min_positive_grade}): a positive "
                                                         "could be sampled as a negative")
    task.check_config(config)
    renamed = config.loss.name != LossSection().name
    if task.own_loss and (renamed or config.loss.options):
        setting = "loss.name" if renamed else f"loss.{next(iter(config.loss.options))}"
        raise ConfigError(setting, f"task {task.name!r} trains with its own loss ({task.own_loss}); loss.name "
                                   "and a loss's options are not used")
    if flagged is not None:
        check_unused(config, flagged)
