"""Weight averaging: one model whose parameters are the weighted mean of several models' of one kind and shape.

    python -m ance_ir.train.average --models RUN/checkpoints/step-00000200 RUN/checkpoints/step-00000250 \\
        --output averaged
    python -m ance_ir.train.average --models PRETRAINED FINE_TUNED --weights 0.5 0.5 --output wise-ft

The field's uses: the last checkpoints of one run averaged (fairseq's ``average_checkpoints``); a fine-tuned model
averaged with the model it was fine-tuned from (WiSE-FT, Wortsman et al., 2022, who find that it keeps more of the
starting model's robustness to data unlike the fine-tuning data); several fine-tunes of one starting model with
other seeds or settings (a uniform model soup, Wortsman et al., 2022). The result is one model that
scores at the cost of one, unlike an average of several models' scores (``python -m ance_ir.fusion --method
average``). Models fine-tuned from one starting point can be averaged; unrelated models give a meaningless mix.

Every model must be a trained one of the same kind, with the same parameter names and shapes and the same settings
as loaded (their ``records()``, what they save in ``ance_ir_*.json``: a cross-encoder's max_length and first-stage
weight, a ColBERT's dimension, ...). Floating-point parameters are averaged (in float64, then cast back), any
other tensor must be equal in all models. ``--weights`` (default: equal) are normalised to sum to 1. The output
folder is the first model's kind and settings with the averaged weights, plus ``ance_ir_average.json`` recording
the models and weights.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import torch

from ance_ir.cli import (
    ArgumentParser,
    add_import_argument,
    check_apart,
    check_new_folder,
    load_cli_plugins,
    non_negative_float,
    run_cli,
)
from ance_ir.data import atomic_directory
from ance_ir.modeling.kinds import load_model

RECORD_NAME = "ance_ir_average.json"


def check_parameters(state: dict[str, torch.Tensor], reference: dict[str, torch.Tensor], name: str,
                     reference_name: str) -> None:
    """ValueError naming model ``name`` when its parameters differ from ``reference_name``'s in names, shapes or a
    value that is not a float (nothing to average there)."""
    if state.keys() != reference.keys():
        differing = sorted(reference.keys() - state.keys()) or sorted(state.keys() - reference.keys())
        raise ValueError(f"{name}: its parameters are not {reference_name}'s (e.g. {differing[0]}); only models of "
                         "one architecture can be averaged")
    for key, tensor in state.items():
        if tensor.shape != reference[key].shape:
            raise ValueError(f"{name}: parameter {key} has shape {tuple(tensor.shape)}, {reference_name}'s "
                             f"{tuple(reference[key].shape)}")
        if not tensor.is_floating_point() and not torch.equal(tensor, reference[key]):
            raise ValueError(f"{name}: parameter {key} ({tensor.dtype}) differs from {reference_name}'s and cannot "
                             "be averaged")


def weight_shares(weights: list[float] | None, count: int) -> list[float]:
    """``weights`` for ``count`` models normalised to sum to 1 (None: equal); ValueError for a count that does not
    match, a negative or non-finite weight, or a sum of 0."""
    weights = [1.0] * count if weights is None else list(weights)
    if len(weights) != count:
        raise ValueError(f"--weights: {len(weights)} weights for {count} models")
    if any(not math.isfinite(w) or w < 0 for w in weights) or sum(weights) <= 0:
        raise ValueError("--weights: each must be a finite number >= 0, and their sum > 0")
    return [w / sum(weights) for w in weights]


def average_models(names: list[str | Path], weights: list[float] | None = None, kind: str | None = None) -> Any:
    """Load ``names`` (saved model folders, run folders, checkpoints; ``kind`` for folders recording none) one at
    a time and return the first model with the weighted mean of all their parameters (equal weights by default);
    ValueError for models that cannot be averaged: another kind, an untrained head, other settings or parameters."""
    if len(names) < 2:
        raise ValueError("--models: give two or more models to average")
    shares = weight_shares(weights, len(names))
    first, settings, sums = None, {}, {}
    for name, share in zip(names, shares, strict=True):
        model = load_model(name, first.kind if first is not None else kind)
        if getattr(model, "fresh_head", False) or getattr(model, "fresh", False):
            raise ValueError(f"{name}: its {model.kind} head is untrained (a bare backbone); average trained models")
        theirs, state = model.records(), model.state_dict()
        if first is None:
            first, settings, reference = model, theirs, state
        else:
            if theirs != settings:
                raise ValueError(f"{name}: its settings {theirs} are not {names[0]}'s {settings}; models with other "
                                 "settings cannot be averaged")
            check_parameters(state, reference, str(name), str(names[0]))
        for key, tensor in state.items():
            if tensor.is_floating_point():
                sums[key] = sums.get(key, 0) + share * tensor.double()
    first.load_state_dict({key: sums[key].to(tensor.dtype) if key in sums else tensor
                           for key, tensor in reference.items()})
    return first


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
    add_import_argument(parser)
    args = parser.parse_args(argv)
    check_new_folder(args.output, args.force)
    check_apart(args.output, [], models=args.models)
    load_cli_plugins(args.imports)
    shares = weight_shares(args.weights, len(args.models))  # bad weights refused before any model loads
    model = average_models(args.models, args.weights, args.kind)  # with the same shares
    save_average(model, args.output, args.models, shares)
    print(f"wrote {args.output}: a {model.kind} model averaging {len(args.models)} models", file=sys.stderr)
    return 0


if __name__ == "__main__":
    run_cli(main)
