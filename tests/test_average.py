"""``python -m ance_ir.train.average``: weight averaging checked parameter by parameter against a hand computation,
the averaged model saved and scoring as it did in memory, and the models that cannot be averaged refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import assert_refused, run_here

from ance_ir.modeling.kinds import load_model
from ance_ir.train.average import RECORD_NAME, average_models, check_parameters

QUERIES = ["cat on a mat", "how to bake bread"]
PASSAGES = ["the cat sat on the mat", "bread flour water salt and yeast"]


def perturbed_cross_encoder(toy_bert: Path, path: Path, seed: int, **settings) -> Path:
    """A cross-encoder from the toy BERT with every float parameter moved by seeded noise, saved to ``path``."""
    torch.manual_seed(seed)
    model = load_model(toy_bert, "cross-encoder", **settings)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    model.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def two_models(toy_bert, tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("average")
    return perturbed_cross_encoder(toy_bert, root / "a", 1), perturbed_cross_encoder(toy_bert, root / "b", 2)


def test_parameters_are_the_weighted_mean_and_the_saved_model_scores_as_averaged(two_models, tmp_path):
    a, b = two_models
    output = tmp_path / "averaged"
    done = run_here("ance_ir.train.average", "--models", str(a), str(b), "--weights", "1", "3",
                    "--output", str(output))
    assert done.returncode == 0, done.stderr
    first, second, averaged = (load_model(path).state_dict() for path in (a, b, output))
    assert averaged.keys() == first.keys()
    moved = 0
    for key, tensor in averaged.items():
        expected = (0.25 * first[key].double() + 0.75 * second[key].double()).to(tensor.dtype)
        assert torch.equal(tensor, expected), key
        moved += tensor.is_floating_point() and not torch.equal(tensor, first[key])
    assert moved > 0
    assert json.loads((output / RECORD_NAME).read_text()) == {"models": [str(a), str(b)], "weights": [0.25, 0.75]}

    in_memory = average_models([a, b], [1, 3])
    scores = load_model(output).score_pairs(QUERIES, PASSAGES, precision="fp32")
    assert np.array_equal(scores, in_memory.score_pairs(QUERIES, PASSAGES, precision="fp32"))
    for path in (a, b):
        assert not np.allclose(scores, load_model(path).score_pairs(QUERIES, PASSAGES, precision="fp32"))


def test_a_model_averaged_with_itself_is_unchanged(two_models):
    a, _ = two_models
    mine, averaged = load_model(a).state_dict(), average_models([a, a, a]).state_dict()
    assert all(torch.equal(mine[key], averaged[key]) for key in mine)


def test_parameters_that_do_not_match_are_refused():
    reference = {"w": torch.zeros(2, 3), "ids": torch.arange(3)}
    with pytest.raises(ValueError, match=r"b: parameter w has shape \(3, 2\), a's \(2, 3\)"):
        check_parameters({"w": torch.zeros(3, 2), "ids": torch.arange(3)}, reference, "b", "a")
    with pytest.raises(ValueError, match="b: its parameters are not a's"):
        check_parameters({"w": torch.zeros(2, 3)}, reference, "b", "a")
    with pytest.raises(ValueError, match=r"b: parameter ids \(torch.int64\) differs from a's"):
        check_parameters({"w": torch.zeros(2, 3), "ids": torch.arange(1, 4)}, reference, "b", "a")
    check_parameters({"w": torch.ones(2, 3), "ids": torch.arange(3)}, reference, "b", "a")


def test_models_that_cannot_be_averaged_give_one_line(toy_bert, two_models, tmp_path):
    a, b = two_models
    longer = perturbed_cross_encoder(toy_bert, tmp_path / "longer", 3, max_length=40)
    dense = tmp_path / "dense"
    load_model(toy_bert, "dense").save_pretrained(dense)
    output = tmp_path / "out"
    cases = [
        ([str(a)], "give two or more models"),
        ([str(a), str(longer)], "models with other settings cannot be averaged"),
        ([str(a), str(dense)], "is a 'dense' model, expected a 'cross-encoder' model"),
        ([str(a), str(b), "--weights", "1"], "1 weights for 2 models"),
        ([str(a), str(b), "--weights", "0", "0"], "their sum > 0"),
        ([str(a), str(b), "--weights", "1", "-1"], "expected a finite number >= 0"),
        ([str(toy_bert), str(a), "--kind", "cross-encoder"], "head is untrained"),
        ([str(a), str(tmp_path / "missing")], "does not exist"),
    ]
    for models, message in cases:
        assert_refused(run_here("ance_ir.train.average", "--models", *models, "--output", str(output)), message,
                       output)
    output.mkdir()
    done = run_here("ance_ir.train.average", "--models", str(a), str(b), "--output", str(output))
    assert done.returncode == 2 and "already exists; pass --force" in done.stderr
    assert not any(output.iterdir())
