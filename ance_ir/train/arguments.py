"""Reading training settings: YAML/JSON files (``--config``) in sections or flat, then flags. Torch-free.

A file may be written in sections (``optim: {lr: 2e-5}``) or with the flat legacy names (``lr: 2e-5``);
``negatives: bm25`` names a section's component directly. Every field is also a flag under its legacy
name (``negative_depth`` -> ``--negative-depth``; booleans take ``--in-batch/--no-in-batch``; ``none``
clears an optional value), and ``--set SECTION.KEY=VALUE`` sets anything, a component's options included.
The resolved settings are saved as ``OUTPUT/config.json`` (in sections); a resumed run may change only the
settings in :data:`RESUMABLE`.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ance_ir.cli import ArgumentParser
from ance_ir.data import InputError, atomic_write
from ance_ir.data.lines import read_text
from ance_ir.train.settings import (
    LEGACY,
    SECTIONS,
    SHORTHAND_FIELD,
    ConfigError,
    DataSection,
    LossSection,
    ModelSection,
    NegativesSection,
    OptimSection,
    RefreshSection,
    RunSection,
    Section,
    TaskSection,
    field_default,
    section_fields,
)

#: the settings files shipped with the package, named by ``--config NAME``
PRESETS = Path(__file__).resolve().parent.parent / "presets"

# Settings a resumed run may change: they decide when and how things are saved or run, not what is learned
# from which data (refresh.mode, refresh.max_staleness and refresh.precision do change which negatives later steps
# see, so a run resumed with another of them is no longer the one it would have been).
RESUMABLE = frozenset({"stop_at", "log_every", "save_every", "keep_checkpoints", "device", "progress", "threads",
                       "refresh.device", "refresh.mode", "refresh.max_staleness", "refresh.batch_size",
                       "refresh.precision", "refresh.threads", "refresh.final", "refresh.keep_index"})


@dataclass
class TrainConfig(RunSection):
    """Everything a training run needs: the top-level run settings and one object per section."""

    model: ModelSection = field(default_factory=ModelSection)
    data: DataSection = field(default_factory=DataSection)
    task: TaskSection = field(default_factory=TaskSection)
    negatives: NegativesSection = field(default_factory=NegativesSection)
    loss: LossSection = field(default_factory=LossSection)
    refresh: RefreshSection = field(default_factory=RefreshSection)
    optim: OptimSection = field(default_factory=OptimSection)

    def sections(self) -> list[Section]:
        return [self, *(getattr(self, name) for name in SECTIONS)]

    def check(self) -> None:
        RunSection.check(self)
        for name in SECTIONS:
            getattr(self, name).check()

    def flat(self) -> dict[str, Any]:
        """Qualified name (``optim.lr``; top-level keys bare; options as ``loss.NAME``) -> value."""
        out = {}
        for section in self.sections():
            for name in section_fields(type(section) if section is not self else RunSection):
                out[section.qualified(name)] = getattr(section, name)
            out.update({section.qualified(k): v for k, v in getattr(section, "options", {}).items()})
        return out

    def to_dict(self) -> dict[str, Any]:
        """Nested plain values, each section's options inlined into it (what a config file holds)."""
        out = {name: getattr(self, name) for name in section_fields(RunSection)}
        for name in SECTIONS:
            section = dataclasses.asdict(getattr(self, name))
            options = section.pop("options", {})
            out[name] = {**section, **options}
        return out

    def save(self, path: str | Path) -> None:
        """Write the settings as JSON, atomically."""
        with atomic_write(path) as f:
            f.write(json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> TrainConfig:
        """Read a saved ``config.json`` (or any YAML/JSON settings file)."""
        return build_config(path, {}, unused=False)


def _field_type(cls: type, name: str) -> tuple[type, bool]:
    """(base type, optional) of a section field."""
    hint = typing.get_type_hints(cls)[name]
    args = typing.get_args(hint) if isinstance(hint, types.UnionType) else ()
    base = next(a for a in args if a is not type(None)) if args else hint
    return typing.get_origin(base) or base, bool(args)


def coerce(name: str, value: Any, base: type, optional: bool) -> Any:
    """Convert a file or command-line value to ``base``; ConfigError naming setting ``name`` if it does not fit."""
    if base is list and (value is None or value in (["none"], ["null"], "none", "null")):  # unset: empty
        return []
    if value is None or (optional and isinstance(value, str) and value.lower() in ("none", "null")):
        if optional:
            return None
        raise ConfigError(name, "must be set")
    kind = {bool: "true or false", int: "an integer", float: "a number", str: "a string",
            list: "a list of strings"}[base]
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
    elif base is list:
        items = value if isinstance(value, list) else [value]
        if all(isinstance(v, str) for v in items):
            return list(items)
    elif isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return str(value)
    raise ConfigError(name, f"must be {kind}, got {value!r}")


def coerce_option(name: str, value: Any, default: Any) -> Any:
    """A component option's value, converted to the type of its declared default (None or REQUIRED: as given)."""
    from ance_ir.train.registry import REQUIRED

    if default is None or default is REQUIRED:
        return value
    return coerce(name, value, type(default) if not isinstance(default, list) else list, False)


def config_path(given: str | Path) -> Path:
    """The settings file ``given`` names: the file, else a preset shipped with ance-ir by name (``bert-tiny``,
    ``minilm``, ``cross-encoder``, ...: ``ance_ir/presets/NAME.yaml``, also ``configs/presets/`` in a checkout)."""
    path = Path(given)
    preset = PRESETS / f"{given}.yaml"
    return preset if not path.is_file() and path.name == str(given) and preset.is_file() else path


def read_config_file(path: str | Path) -> tuple[dict[str, Any], dict[str, int]]:
    """Settings from a YAML or JSON mapping, and the line of each key (nested keys as ``section.key``)."""
    path = config_path(path)
    if not path.is_file():
        names = ", ".join(sorted(p.stem for p in PRESETS.glob("*.yaml")))
        raise InputError(path, f"no such config file (or preset name: {names})")
    text = read_text(path)
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = min(mark.line + 1, len(text.splitlines()) or 1) if mark else None  # end of file: its last line
        raise InputError(path, f"not valid YAML or JSON ({getattr(e, 'problem', None) or e})", line) from None
    if data is None:
        return {}, {}
    if not isinstance(data, dict):
        raise InputError(path, "expected a mapping of setting: value", 1)
    lines: dict[str, int] = {}

    def walk(mapping: yaml.MappingNode, prefix: str) -> None:
        for key, value in mapping.value:
            name, line = prefix + str(key.value), key.start_mark.line + 1
            if name in lines:
                raise InputError(path, f"setting {name!r} given twice (first on line {lines[name]})", line)
            lines[name] = line
            if not prefix and isinstance(value, yaml.MappingNode):
                walk(value, name + ".")

    walk(node, "")
    return data, lines


def _known_names() -> list[str]:
    qualified = [f"{s}.{n}" for s, cls in SECTIONS.items() for n in section_fields(cls)]
    return [*LEGACY, *section_fields(RunSection), *SECTIONS, *qualified]


def _unknown(key: str, candidates: list[str]) -> str:
    close = difflib.get_close_matches(key, candidates, n=1)
    return f"{key}: unknown setting" + (f"; did you mean {close[0]!r}?" if close else "")


def _place(key: str, value: Any) -> list[tuple[str, Any]]:
    """A file's top-level entry as (qualified name, value) pairs; KeyError(message) when unknown."""
    if key in SECTIONS and isinstance(value, dict | None):  # ``optim:`` with every setting commented out: none
        return [(f"{key}.{k}", v) for k, v in (value or {}).items()]
    if key in section_fields(RunSection):
        return [(key, value)]
    if key in LEGACY:
        section, name = LEGACY[key]
        return [(f"{section}.{name}" if section else name, value)]
    if key in SECTIONS:  # ``data: groups``: the section's component
        if key not in SHORTHAND_FIELD:
            raise KeyError(f"{key}: a section takes a mapping of its settings ({key}: {{KEY: VALUE}}), got {value!r}")
        return [(f"{key}.{SHORTHAND_FIELD[key]}", value)]
    section, _, name = key.partition(".")
    if section in SECTIONS and name and "." not in name:  # ``task.name: mlm``, as --set writes it
        return [(key, value)]
    raise KeyError(_unknown(key, _known_names()))


def _assign(config: TrainConfig, qualified: str, value: Any) -> None:
    """Set one qualified setting; keys a section does not define become its component's options."""
    section_name, _, name = qualified.rpartition(".")
    if section_name and section_name not in SECTIONS or not name:
        raise KeyError(_unknown(qualified, _known_names()))
    section: Section = getattr(config, section_name) if section_name else config
    cls = type(section) if section_name else RunSection
    fields = section_fields(cls)
    if name in fields:
        setattr(section, name, coerce(qualified, value, *_field_type(cls, name)))
    elif hasattr(section, "options"):
        section.options[name] = value
    else:
        raise KeyError(_unknown(qualified, [section.qualified(n) for n in fields]))


def build_config(path: str | Path | None, overrides: dict[str, Any], unused: bool = True) -> TrainConfig:
    """Defaults, then the settings file at ``path`` (if any), then ``overrides`` (flag values by legacy name,
    or qualified ``section.key`` names); then every section and the chosen components are checked (``unused``:
    settings the components ignore are refused too: one changed from its default, or named by a flag unless the
    flag sets an earlier value back to the default; a file's may be a run's saved record of every setting)."""
    config = TrainConfig()
    lines: dict[str, int] = {}
    given: set[str] = set()  # by the file
    flags: dict[str, str] = {}
    cleared: set[str] = set()  # flags over an earlier value: refused unused only if not back at the default
    if path is not None:
        data, raw_lines = read_config_file(path)
        for key, value in data.items():
            try:
                pairs = _place(str(key), value)
                for qualified, item in pairs:
                    line = raw_lines.get(qualified if str(key) in SECTIONS and isinstance(value, dict) else str(key))
                    if qualified in given:  # one setting under two names (``lr`` and ``optim.lr``)
                        raise InputError(path, f"setting {qualified!r} given twice (first on line "
                                               f"{lines[qualified]})", line)
                    lines[qualified] = line
                    _assign(config, qualified, item)
                    given.add(qualified)
            except KeyError as e:
                raise InputError(path, e.args[0], raw_lines.get(str(key))) from None
            except ConfigError as e:
                raise InputError(path, str(e), lines.get(e.name)) from None
    for key, value in overrides.items():
        flag = "--" + key.replace("_", "-") if key in LEGACY else f"--set {key}"
        qualified = key if "." in key else ".".join(p for p in LEGACY.get(key, (None, key)) if p)
        if qualified == "imports":  # --import adds to the file's imports
            value = [*config.imports, *coerce("imports", value, list, False)]
        try:
            _assign(config, qualified, value)
        except (KeyError, ConfigError) as e:
            raise ValueError(_flag_error(flag, qualified, e.args[0] if isinstance(e, KeyError) else str(e))) from None
        if qualified in given or qualified in flags:
            cleared.add(qualified)
        given.discard(qualified)
        flags[qualified] = flag
    try:
        config.check()
        from ance_ir.train.components import check_components

        check_components(config, flags.keys() - cleared if unused else None)
    except ConfigError as e:
        if e.name in given and path is not None:
            raise InputError(path, str(e), lines.get(e.name)) from None
        if e.name in flags:
            raise ValueError(_flag_error(flags[e.name], e.name, str(e))) from None
        raise
    return config


def _flag_error(flag: str, setting: str, error: str) -> str:
    """``--lr: optim.lr: MESSAGE`` (the flag, then the ``error`` about the setting it sets), but ``--set optim.lr:
    MESSAGE``."""
    return f"--set {error}" if flag == f"--set {setting}" else f"{flag}: {error}"


def check_resumable(saved: TrainConfig, now: TrainConfig, where: Path) -> list[str]:
    """The changed RESUMABLE settings (and settings no component of the run reads); ValueError naming the first
    other setting that differs."""
    from ance_ir.train.components import unused_settings

    harmless = RESUMABLE | unused_settings(now).keys()
    changed = []
    before_all, after_all = saved.flat(), now.flat()
    for name in dict.fromkeys([*before_all, *after_all]):
        before, after = before_all.get(name), after_all.get(name)
        if before == after:
            continue
        if name not in harmless:
            raise ValueError(f"{where}: this run has {name}={before!r}, now {after!r}; only "
                             f"{', '.join(sorted(RESUMABLE))} and settings the run does not read may change on "
                             "resume (use a new output folder)")
        changed.append(name)
    return changed


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="python -m ance_ir.train", argument_default=argparse.SUPPRESS,
        description="Train a retriever (ANCE, BM25 warm-up, the baselines, or any registered task). Settings "
                    "come from --config FILE (YAML/JSON, in sections or flat), then flags. Rerunning with the "
                    "same OUTPUT resumes. Each flag is a section's setting: section.key in a config file.")
    parser.add_argument("--config", help="YAML or JSON file of settings, or a preset's name (bert-tiny, minilm: "
                                         "dense; cross-encoder, colbert, splade); flags override it")
    parser.add_argument("--resume", action="store_true",
                        help="fail unless OUTPUT has a checkpoint to continue from (resuming is automatic)")
    parser.add_argument("--set", dest="set", action="append", metavar="SECTION.KEY=VALUE",
                        help="set any setting, a component's options included (e.g. --set negatives.source=dense "
                             "with --negatives candidates)")
    for section, cls in [(None, RunSection), *SECTIONS.items()]:
        group = parser.add_argument_group(f"{section or 'run'} settings")
        for name, f in section_fields(cls).items():
            legacy = f.metadata["legacy"]
            base, _ = _field_type(cls, name)
            qualified = f"{section}.{name}" if section else name
            help_text = f"{qualified}: {f.metadata['help']}"
            default = field_default(f)
            if default == "":
                help_text += " (required)"
            elif "(default" not in help_text:  # else the help says what an unset value means
                help_text += f" (default: {'none' if default in (None, []) else default})"
            help_text = help_text.replace("%", "%%")  # plain text, not an argparse template
            flag = "--" + legacy.replace("_", "-")
            if base is bool:
                group.add_argument(flag, dest=legacy, action=argparse.BooleanOptionalAction, help=help_text)
                if legacy == "progress":  # every other command's spelling
                    group.add_argument("--quiet", dest=legacy, action="store_false", help="--no-progress")
            elif base is list:
                group.add_argument(flag, dest=legacy, action="append", metavar=f.metadata.get("metavar", "FILE"),
                                   help=help_text)
            else:
                group.add_argument(flag, dest=legacy, metavar=base.__name__.upper(), help=help_text)
    return parser


def parse_args(argv: list[str] | None = None) -> tuple[TrainConfig, bool]:
    """The config from ``--config`` and flags, and whether ``--resume`` was given."""
    args = vars(build_parser().parse_args(argv))
    path, resume = args.pop("config", None), args.pop("resume", False)
    args.pop("debug", None), args.pop("verbose", None)  # run_cli's and the JVM's, not settings
    for item in args.pop("set", None) or []:
        key, sep, value = item.partition("=")
        if not sep or "." not in key:
            raise ValueError(f"--set {item}: expected SECTION.KEY=VALUE")
        try:
            args[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError as e:
            raise ValueError(f"--set {item}: not a YAML value ({getattr(e, 'problem', None) or e})") from None
    return build_config(path, args), resume
