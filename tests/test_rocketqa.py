"""RocketQAv2 (``task: rocketqa-v2``): the listwise distillation loss by hand, retriever and ranker trained
together, the ranker in the trainer state (exact resume) and saved at the end, and the refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from test_train_run import toy_config, training_records

from ance_ir.data import InputError
from ance_ir.modeling.cross_encoder import HEAD_NAME, CrossEncoder
from ance_ir.modeling.kinds import load_model, saved_kind
from ance_ir.train import list_checkpoints, train
from ance_ir.train.checkpoint import load_trainer_state
from ance_ir.train.layout import RunDir
from ance_ir.train.rocketqa import listwise_distillation


def test_the_loss_is_kl_retriever_to_ranker_plus_the_rankers_cross_entropy():
    retriever, ranker = torch.tensor([[2.0, 0.0, -1.0]]), torch.tensor([[1.0, 1.5, -0.5]])
    p, q = F.softmax(retriever / 0.5, dim=1), F.softmax(ranker, dim=1)
    kl = (p * (p.log() - q.log())).sum()
    expected = kl - q[0, 0].log()
    assert listwise_distillation(retriever, ranker, 0.5).item() == pytest.approx(expected.item(), rel=1e-6)
    # equal distributions leave only the ranker's supervised term
    assert listwise_distillation(ranker, ranker).item() == pytest.approx(-q[0, 0].log().item(), rel=1e-6)


@pytest.fixture(scope="module")
def ranker(toy, tmp_path_factory) -> Path:
    torch.manual_seed(7)
    path = tmp_path_factory.mktemp("ranker") / "model"
    load_model(toy / "bert-nodrop", "cross-encoder", max_length=32).save_pretrained(path)
    return path


def settings(ranker: Path, **changes) -> dict:
    return {"ance": False, "task.name": "rocketqa-v2", "task.ranker": str(ranker), "negatives": "random",
            "n_negatives": 3, "max_steps": 6, "in_batch": False, "model": None, **changes}


def weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(folder / "model.safetensors")


def test_both_models_train_and_a_stopped_run_resumes_exactly(toy, ranker, tmp_path):
    straight = tmp_path / "straight"
    train(toy_config(toy, straight, **settings(ranker, model=str(toy / "bert"))))
    losses = [r["loss"] for r in training_records(straight)]
    assert len(losses) == 6 and all(loss > 0 for loss in losses)
    trained = RunDir(straight).root / "ranker"
    assert saved_kind(trained) == "cross-encoder" and isinstance(load_model(trained), CrossEncoder)
    assert not torch.equal(load_file(trained / HEAD_NAME)["weight"], load_file(ranker / HEAD_NAME)["weight"])
    state = load_trainer_state(list_checkpoints(RunDir(straight))[-1])
    assert torch.equal(state["ranker"]["head.weight"].cpu(), load_file(trained / HEAD_NAME)["weight"])

    paused = tmp_path / "paused"
    train(toy_config(toy, paused, stop_at=3, **settings(ranker, model=str(toy / "bert"))))
    assert not (paused / "ranker").exists()
    train(toy_config(toy, paused, **settings(ranker, model=str(toy / "bert"))))
    for name, tensor in weights(RunDir(straight).final).items():
        assert torch.equal(weights(RunDir(paused).final)[name], tensor), name
    for name, tensor in weights(trained).items():
        assert torch.equal(weights(paused / "ranker")[name], tensor), name
    assert [r["loss"] for r in training_records(paused)] == losses


@pytest.mark.parametrize(("changes", "message"), [
    ({"task.ranker": None}, "task.ranker: RocketQAv2 trains a cross-encoder"),
    ({"in_batch": True}, "task.in_batch: RocketQAv2 distils each query's own candidate list"),
    ({"negatives": "ance"}, "ance mines from an ANN index"),
    ({"loss": "bce"}, "loss.name: task 'rocketqa-v2' trains with its own loss .listwise distillation"),
])
def test_settings_it_cannot_train_with(toy, ranker, tmp_path, changes, message):
    with pytest.raises(ValueError, match=message):
        toy_config(toy, tmp_path / "run", **settings(ranker, model=str(toy / "bert"), **changes))


def test_a_ranker_not_trained_yet_is_named_when_training_starts(toy, tmp_path):
    """The config is valid (a committed config names a run to be trained first); training refuses it in one line."""
    config = toy_config(toy, tmp_path / "run",
                        **settings(Path("train-runs/x/not-trained-yet"), model=str(toy / "bert")))
    with pytest.raises(InputError, match="^train-runs/x/not-trained-yet: task.ranker: no such run or model folder; "
                                         "train or fetch the model it names first$"):
        train(config)
    assert not (tmp_path / "run").exists()
