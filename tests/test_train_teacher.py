"""A dense teacher (``loss.teacher_index``): its scores are its encoder's dot products, they cover every passage the
student scores (in-batch ones too), the student learns toward them, and the settings that cannot work are refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from test_train_run import events, toy_config, training_records

from ance_ir.data.corpus import corpus_texts, iter_corpus
from ance_ir.encode.corpus_encoder import encode_corpus
from ance_ir.modeling import DenseEncoder
from ance_ir.train import train
from ance_ir.train.loss import LOSSES, KLLoss, register_loss
from ance_ir.train.settings import ConfigError
from ance_ir.train.teacher import DenseTeacher

QUERIES = {"q1": "cat on a mat", "q2": "how to bake bread", "q3": "stock market drop"}


def teacher_encoder(toy: Path) -> DenseEncoder:
    """Another model than the student's (CLS pooling, normalised), so that its scores differ."""
    return DenseEncoder.from_pretrained(toy / "bert-nodrop", pooling="cls", normalize=True, query_max_length=16,
                                        passage_max_length=16)


@pytest.fixture(scope="module")
def teacher_index(toy, tmp_path_factory) -> Path:
    output = tmp_path_factory.mktemp("teacher") / "index"
    encode_corpus(toy / "corpus.jsonl", teacher_encoder(toy), output, encoder_name=str(toy / "bert-nodrop"),
                  show_progress=False)
    return output


def settings(index: Path, **more) -> dict:
    return {"negatives": "random", "n_negatives": 1, "loss": "kl", "teacher_index": str(index),
            "refresh_every": 0, "eval_topics": None, "eval_qrels": None, "max_steps": 4, **more}


def test_teacher_scores_are_its_encoders_dot_products(toy, teacher_index):
    docids = [p.docid for p in iter_corpus(toy / "corpus.jsonl")]
    texts = corpus_texts(toy / "corpus.jsonl")
    teacher = DenseTeacher(str(teacher_index), QUERIES, docids, torch.device("cpu"))
    encoder = teacher_encoder(toy)
    queries = encoder.encode_queries([QUERIES["q2"], QUERIES["q1"]])
    passages = encoder.encode_passages([texts["d3"], texts["d1"], texts["d7"]])
    expected = np.asarray(queries) @ np.asarray(passages).T
    assert teacher.scores(["q2", "q1"], ["d3", "d1", "d7"]).numpy() == pytest.approx(expected, abs=1e-5)


@pytest.mark.parametrize("in_batch", [True, False])
def test_teacher_scores_cover_what_the_student_scores(toy, teacher_index, tmp_path, in_batch):
    seen = []

    @register_loss
    class Recording(KLLoss):
        name = "test-teacher-recording"

        def __call__(self, batch):
            seen.append((batch.scores.shape, batch.teacher.clone()))
            return super().__call__(batch)

    try:
        train(toy_config(toy, tmp_path / "run", **settings(teacher_index, loss="test-teacher-recording",
                                                           in_batch=in_batch)))
    finally:
        del LOSSES["test-teacher-recording"]
    assert len(seen) == 4
    for shape, teacher in seen:
        assert teacher.shape == shape == ((2, 4) if in_batch else (2, 2)) and not teacher.isnan().any()
    assert len({round(v, 6) for _, t in seen for v in t.flatten().tolist()}) > 4
    assert events(tmp_path / "run", "teacher")[0]["passages"] == 8


def test_kl_to_a_dense_teacher_lowers_the_distance_to_it(toy, teacher_index, tmp_path):
    train(toy_config(toy, tmp_path / "run", **settings(teacher_index, in_batch=True, max_steps=30, lr=1e-2,
                                                       **{"loss.teacher_temperature": 0.05})))
    losses = [r["loss"] for r in training_records(tmp_path / "run")]
    assert sum(losses[-5:]) < 0.5 * sum(losses[:5])


def test_teacher_settings_that_cannot_work_are_refused(toy, teacher_index, tmp_path):
    with pytest.raises(ValueError, match="--teacher-index: loss.teacher_index: loss .nll. uses no teacher"):
        toy_config(toy, tmp_path / "nll", **settings(teacher_index, loss="nll"))
    with pytest.raises(ValueError, match="task .adore. does not train on groups"):
        toy_config(toy, tmp_path / "adore", **settings(teacher_index, **{"task.name": "adore",
                                                                           "task.index": str(teacher_index)}))
    with pytest.raises(ValueError, match="RocketQAv2's teacher is the ranker it trains"):
        toy_config(toy, tmp_path / "v2", **settings(teacher_index, **{"task.name": "rocketqa-v2",
                                                                        "task.ranker": str(toy / "bert")}))
    with pytest.raises(ConfigError, match="lacks 2 passages of the training corpus"):
        DenseTeacher(str(teacher_index), QUERIES, ["d1", "d3", "new1", "new2"], torch.device("cpu"))
