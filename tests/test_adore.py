"""ADORE (``task: adore``): LambdaLoss weights, only the query tower trains against the fixed index, exact resume, and
the refusals."""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from test_train_run import events, toy_config, training_records

from ance_ir.data.corpus import corpus_texts
from ance_ir.encode.corpus_encoder import encode_corpus
from ance_ir.index import load_dense_index, stored_vectors
from ance_ir.modeling import DenseEncoder
from ance_ir.train import list_checkpoints, train
from ance_ir.train.adore import AdoreTask, lambda_weights
from ance_ir.train.dataset import TrainData
from ance_ir.train.distributed import Distributed
from ance_ir.train.layout import RunDir
from ance_ir.train.runlog import RunLog
from ance_ir.train.task import TaskContext


def test_lambda_weights_are_the_ndcg_change_of_each_swap():
    # retrieved (best first): n1 4.0, p 3.0, n2 2.0, n3 1.0; one judged positive
    retrieved = torch.tensor([4.0, 3.0, 2.0, 1.0])
    weights = lambda_weights(torch.tensor(3.0), torch.tensor([4.0, 2.0, 1.0]), retrieved, 1, 0)
    disc = [1 / np.log2(1 + r) for r in (1, 2, 3, 4)]
    assert weights.tolist() == pytest.approx([disc[0] - disc[1], disc[1] - disc[2], disc[1] - disc[3]])
    # with a cutoff of 2, swapping ranks 2 and 4 loses rank 2's whole discount; ranks 3 and 4 are past it
    cut = lambda_weights(torch.tensor(1.0), torch.tensor([4.0, 2.0]), retrieved, 2, 2)
    ideal = disc[0] + disc[1]
    assert cut.tolist() == pytest.approx([disc[0] / ideal, 0.0])
    # a positive below everything retrieved ranks K + 1
    low = lambda_weights(torch.tensor(-1.0), torch.tensor([1.0]), retrieved, 1, 0)
    assert low.item() == pytest.approx(disc[3] - 1 / np.log2(6))


@pytest.fixture(scope="module")
def toy_index(toy, tmp_path_factory) -> Path:
    output = tmp_path_factory.mktemp("adore") / "index"
    encoder = DenseEncoder.from_pretrained(toy / "bert", pooling="mean", query_max_length=16, passage_max_length=16)
    encode_corpus(toy / "corpus.jsonl", encoder, output, encoder_name=str(toy / "bert"), show_progress=False)
    return output


def adore_settings(index: Path, **settings) -> dict:
    return {"ance": False, "task.name": "adore", "task.index": str(index), "task.depth": 4, "max_steps": 6,
            "lr": 1e-2, **settings}


def tower_weights(run: Path, side: str) -> dict[str, torch.Tensor]:
    return load_file(list_checkpoints(RunDir(run))[-1] / side / "model.safetensors")


def test_the_loss_is_lambda_weighted_ranknet_over_each_querys_retrieved_negatives(toy, toy_index, tmp_path):
    config = toy_config(toy, tmp_path / "run", **adore_settings(toy_index, **{"task.cutoff": 0,
                                                                             "loss.temperature": 0.5}))
    data = TrainData.load(config)
    ctx = TaskContext(config, data, RunDir(tmp_path / "run"), Distributed.init("cpu"), torch.device("cpu"),
                      RunLog(tmp_path / "log.jsonl", enabled=False), lambda: False)
    model = DenseEncoder.from_pretrained(toy / "bert", pooling="mean", query_max_length=16, passage_max_length=16)
    task = AdoreTask(ctx, model)
    batch = task.next_batch()
    loss = task.loss(task.module.eval(), batch, contextlib.nullcontext).loss.item()

    # by hand: numpy dot products, ranks counted in Python, the nDCG change of each swap, RankNet over T = 0.5
    index = load_dense_index(toy_index)
    vectors, docids = stored_vectors(index), list(index.docids)
    relevant = {qid: sum(q == qid for q, _ in data.pairs) for qid, _ in batch}
    queries = model.encode_queries([data.queries[qid] for qid, _ in batch])
    per_query = []
    for query, (qid, positive) in zip(queries, batch, strict=True):
        scores = vectors @ query
        top = [docids[i] for i in np.argsort(-scores, kind="stable")[:4]]
        score = dict(zip(docids, scores, strict=True))

        def rank(docid, top=top, score=score):
            return 1 + sum(score[d] > score[docid] for d in top)

        def gain(r):
            return 1 / np.log2(1 + r)

        ideal = sum(gain(r) for r in range(1, relevant[qid] + 1))
        per_query.append(sum(abs(gain(rank(positive)) - gain(rank(d))) / ideal
                             * np.log1p(np.exp((score[d] - score[positive]) / 0.5))
                             for d in top if d not in data.exclude[qid]))
    assert loss == pytest.approx(float(np.mean(per_query)), rel=1e-5)


def test_adore_trains_the_query_tower_only_and_resumes_bit_identically(toy, toy_index, tmp_path):
    settings = adore_settings(toy_index)
    index_files = {path.name: path.read_bytes() for path in sorted(toy_index.iterdir())}
    straight = tmp_path / "straight"
    train(toy_config(toy, straight, **settings))
    assert {path.name: path.read_bytes() for path in sorted(toy_index.iterdir())} == index_files  # the index as it was
    assert events(straight, "adore-index")[0]["passages"] == 8
    losses = [r["loss"] for r in training_records(straight)]
    assert len(losses) == 6 and all(np.isfinite(losses)) and any(loss > 0 for loss in losses)
    initial = load_file(toy / "bert" / "model.safetensors")
    passage, query = tower_weights(straight, "passage"), tower_weights(straight, "query")
    assert all(torch.equal(passage[name], initial[name]) for name in passage)
    assert any(not torch.equal(query[name], initial[name]) for name in query)
    # the saved model's passage tower still encodes the passages as the index holds them
    index = load_dense_index(toy_index)
    texts = corpus_texts(toy / "corpus.jsonl")
    model = DenseEncoder.from_pretrained(straight / "final")
    np.testing.assert_allclose(model.encode_passages([texts[d] for d in index.docids]), stored_vectors(index),
                               atol=1e-5)

    resumed = tmp_path / "resumed"
    train(toy_config(toy, resumed, stop_at=3, **settings))
    train(toy_config(toy, resumed, **settings))
    assert events(resumed, "resume")[0]["step"] == 3
    assert len(events(resumed, "adore-index")) == 1  # logged when the run starts, not again on resume
    for side in ("query", "passage"):
        mine, theirs = tower_weights(resumed, side), tower_weights(straight, side)
        assert all(torch.equal(mine[name], theirs[name]) for name in theirs)
    assert [(r["step"], r["loss"]) for r in training_records(resumed)] == \
        [(r["step"], r["loss"]) for r in training_records(straight)]


@pytest.mark.parametrize(("settings", "message"), [
    ({"task.index": None}, "task.index: ADORE needs the dense index"),
    ({"task.depth": 0}, "task.depth: must be a positive integer"),
    ({"task.cutoff": -1}, "task.cutoff: must be a non-negative integer"),
    ({"eval_topics": "TOPICS"}, "refresh.eval_topics: is set .* but not used: .* evaluate its final/ model with "
                                "python -m ance_ir.search --index INDEX"),
    ({"loss": "bce"}, "loss.name: task 'adore' trains with its own loss"),
    ({"in_batch": True}, "task.in_batch: is set .* but not used: ADORE's negatives are each query's retrieved"),
    ({"n_negatives": 7}, "task.n_negatives: is set .* but not used: ADORE's negatives are .* all of them"),
])
def test_adore_refuses_what_it_cannot_train_with(toy, toy_index, tmp_path, settings, message):
    if settings.get("eval_topics"):
        settings = {**settings, "eval_topics": str(toy / "topics.tsv"), "eval_qrels": str(toy / "qrels.txt")}
    with pytest.raises(ValueError, match=message):
        toy_config(toy, tmp_path / "run", **adore_settings(toy_index, **settings))


def test_adore_refuses_an_index_of_another_dimension(toy, tmp_path):
    index = tmp_path / "index"
    encoder = DenseEncoder.from_pretrained(toy / "bert", pooling="mean", head=True, head_dim=8)
    encode_corpus(toy / "corpus.jsonl", encoder, index, encoder_name="other", show_progress=False)
    with pytest.raises(ValueError, match="8-dimensional vectors"):
        train(toy_config(toy, tmp_path / "run", **adore_settings(index)))
