"""Weight averaging: one model whose parameters are the weighted mean of several models' of one kind and shape.

    python -m ance_ir.train.average --models RUN/checkpoints/step-00000200 RUN/checkpoints/step-00000250 \\
        --output averaged
    python -m ance_ir.train.average --models PRETRAINED FINE_TUNED --weights 0.5 0.5 --output wise-ft

Two uses of the field: the last checkpoints of one run averaged (fairseq's ``average_checkpoints``), and a
fine-tuned model averaged with the model it was fine-tuned from (WiSE-FT, Wortsman et al., 2022), which keeps
more of the starting model's robustness to topics unlike the fine-tuning data. The result is one model that
scores at the cost of one, unlike an average of several models' scores (``python -m ance_ir.fusion --method
average``). Models fine-tuned from one starting point can be averaged; unrelated models give a meaningless mix.

Every model must be a trained one of the same kind, with the same parameter names and shapes and the same saved
settings (``ance_ir_*.json``: a cross-encoder's max_length and first-stage weight, a ColBERT's dimension, ...).
Floating-point parameters are averaged (in float64, then cast back), any other tensor must be equal in all
models. ``--weights`` (default: equal) are normalised to sum to 1. The output folder is the first model's kind
and settings with the averaged weights, plus ``ance_ir_average.json`` recording the models and weights.
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

from ance_ir.cli import ArgumentParser, check_output, non_negative_float, run_cli
from ance_ir.data import atomic_directory
from ance_ir.data.lines import read_json_object
from ance_ir.modeling.kinds import load_model

RECORD_NAME = "ance_ir_average.json"


def saved_settings(model: Any) -> dict[str, dict]:
    """The ``ance_ir_*.json`` records ``model`` writes when saved, by file name: its kind and settings as loaded
    (a setting an older folder does not record is there with the value the loader chose for it)."""
    with tempfile.TemporaryDirectory() as folder:
        model.save_pretrained(Path(folder) / "model")
        return {path.name: read_json_object(path) for path in sorted((Path(folder) / "model").glob("ance_ir_*.json"))}


def average_state(states: list[dict[str, torch.Tensor]], weights: list[float],
                  names: list[str]) -> dict[str, torch.Tensor]:
    """The weighted mean of ``states`` (weights summing to 1), parameter by parameter; ValueError naming the
    model (one of ``names``) whose parameters differ from the first's in name, shape or a non-float value."""
    first = states[0]
    for name, state in zip(names[1:], states[1:], strict=True):
        if state.keys() != first.keys():
            missing = sorted(first.keys() - state.keys()) or sorted(state.keys() - first.keys())
            raise ValueError(f"{name}: its parameters are not {names[0]}'s (e.g. {missing[0]}); only models of one "
                             "architecture can be averaged")
        for key, tensor in state.items():
            if tensor.shape != first[key].shape:
                raise ValueError(f"{name}: parameter {key} has shape {tuple(tensor.shape)}, {names[0]}'s "
                                 f"{tuple(first[key].shape)}")
            if not tensor.is_floating_point() and not torch.equal(tensor, first[key]):
                raise ValueError(f"{name}: parameter {key} ({tensor.dtype}) differs from {names[0]}'s and cannot be "
                                 "averaged")
    averaged = {}
    for key, tensor in first.items():
        if tensor.is_floating_point():
            total = sum(w * state[key].double() for w, state in zip(weights, states, strict=True))
            averaged[key] = total.to(tensor.dtype)
        else:
            averaged[key] = tensor.clone()
    return averaged


def average_models(names: list[str | Path], weights: list[float] | None = None, kind: str | None = None) -> Any:
    """Load ``names`` (saved model folders, run folders, checkpoints; ``kind`` for folders recording none) and
    return the first model with the weighted mean of all their parameters (equal weights by default); ValueError
    for models that cannot be averaged: another kind, an untrained head, other settings or parameters."""
    if len(names) < 2:
        raise ValueError("--models: give two or more models to average")
    weights = [1.0] * len(names) if weights is None else list(weights)
    if len(weights) != len(names):
        raise ValueError(f"--weights: {len(weights)} weights for {len(names)} models")
    if any(not math.isfinite(w) or w < 0 for w in weights) or sum(weights) <= 0:
        raise ValueError("--weights: each must be a finite number >= 0, and their sum > 0")
    shown = [str(name) for name in names]
    models, settings = [], {}
    for name in names:
        model = load_model(name, models[0].kind if models else kind)
        if getattr(model, "fresh_head", False) or getattr(model, "fresh", False):
            raise ValueError(f"{name}: its {model.kind} head is untrained (a bare backbone); average trained models")
        theirs = saved_settings(model)
        if models and theirs != settings:
            raise ValueError(f"{name}: its settings {theirs} are not {shown[0]}'s {settings}; models with other "
                             "settings cannot be averaged")
        models.append(model)
        settings = settings or theirs
    total = sum(weights)
    averaged = average_state([model.state_dict() for model in models], [w / total for w in weights], shown)
    models[0].load_state_dict(averaged)
    return models[0]


def save_average(model: Any, output: str | Path, names: list[str | Path], weights: list[float]) -> None:
    """Save the averaged ``model`` to ``output`` (replaced as a whole) with the record of what it averages."""
    with atomic_directory(output) as tmp:
        model.save_pretrained(tmp)
        record = {"models": [str(name) for name in names], "weights": weights}
        (tmp / RECORD_NAME).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m ance_ir.train.average", description=__doc__)
    parser.add_argument("--models", nargs="+", required=True,
                        help="saved models, training run folders (their final model) or checkpoint folders")
    parser.add_argument("--weights", nargs="+", type=non_negative_float,
                        help="one weight a model, normalised to sum to 1 (default: equal)")
    parser.add_argument("--kind", help="the kind of models that record none (a plain Hugging Face folder, e.g. an "
                                       "mlm); default: the first model's recorded kind, else dense")
    parser.add_argument("--output", required=True, help="folder to write the averaged model to")
    parser.add_argument("--force", action="store_true", help="replace an existing output folder")
    args = parser.parse_args(argv)
    check_output(args.output, folder=True)
    if Path(args.output).exists() and not args.force:
        raise ValueError(f"{args.output} already exists; pass --force to replace it")
    weights = args.weights or [1.0] * len(args.models)
    model = average_models(args.models, weights, args.kind)
    save_average(model, args.output, args.models, [w / sum(weights) for w in weights])
    print(f"wrote {args.output}: a {model.kind} model averaging {len(args.models)} models", file=sys.stderr)
    return 0


if __name__ == "__main__":
    run_cli(main)
