"""pytrec_eval metrics agree with the trec_eval that Pyserini ships; CLI output formats."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest
from conftest import run_here

from ance_ir.data import write_qrels, write_run
from ance_ir.eval import evaluate, evaluate_per_query
from ance_ir.eval.__main__ import main as eval_main


@pytest.fixture()
def random_run_and_qrels(tmp_path):
    rng = random.Random(13)
    docs = [f"d{i}" for i in range(300)]
    qrels = {f"q{q}": {d: rng.choice([0, 1, 2, 3]) for d in rng.sample(docs, 30)} for q in range(40)}
    run = {}
    for q in qrels:
        picked = rng.sample(docs, 150)
        run[q] = sorted(((d, round(rng.uniform(0, 20), 3)) for d in picked), key=lambda h: -h[1])
    write_qrels(qrels, tmp_path / "qrels.txt")
    write_run(run, tmp_path / "run.trec")
    return qrels, run, tmp_path / "qrels.txt", tmp_path / "run.trec"


def _pyserini_trec_eval(*args: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-m", "ance_ir.pyserini", "pyserini.eval.trec_eval", *args],
                         capture_output=True, text=True, check=True).stdout
    values = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] == "all":
            values[parts[0]] = float(parts[2])
    return values


def test_agrees_with_pyserini_trec_eval(random_run_and_qrels):
    qrels, run, qrels_path, run_path = random_run_and_qrels
    ours = evaluate(qrels, run)
    theirs = _pyserini_trec_eval("-m", "ndcg_cut.10", "-m", "recall.100,1000", "-m", "map",
                                 str(qrels_path), str(run_path))
    theirs |= _pyserini_trec_eval("-M", "10", "-m", "recip_rank", str(qrels_path), str(run_path))
    assert set(theirs) == set(ours)
    for name, value in theirs.items():
        assert ours[name] == pytest.approx(value, abs=5e-5), name


def test_relevance_level_changes_binary_measures_only(random_run_and_qrels):
    qrels, run, *_ = random_run_and_qrels
    lenient, strict = evaluate(qrels, run), evaluate(qrels, run, relevance_level=2)
    assert lenient["ndcg_cut_10"] == strict["ndcg_cut_10"]
    assert lenient["recall_100"] != strict["recall_100"]


def test_mrr_at_10_ignores_hits_below_rank_10():
    qrels = {"q": {"rel": 1}}
    run = {"q": [(f"n{i}", 100.0 - i) for i in range(10)] + [("rel", 1.0)]}
    assert evaluate_per_query(qrels, run, ["mrr@10"])["q"]["recip_rank"] == 0.0
    run["q"].insert(4, ("rel", 96.5))
    run["q"].pop()
    assert evaluate_per_query(qrels, run, ["mrr@10"])["q"]["recip_rank"] == pytest.approx(1 / 5)


def test_cli_json_and_table(random_run_and_qrels, capsys):
    qrels, run, qrels_path, run_path = random_run_and_qrels
    assert eval_main(["--qrels", str(qrels_path), "--run", str(run_path), "--json"]) == 0
    means = json.loads(capsys.readouterr().out)
    assert set(means) == {"ndcg_cut_10", "recip_rank", "recall_100", "recall_1000", "map"}
    assert means == pytest.approx(evaluate(qrels, run))
    assert eval_main(["--qrels", str(qrels_path), "--run", str(run_path), "--metrics", "ndcg@10", "--per-query"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len([line for line in lines if line.startswith("q")]) == 40
    assert lines[-1].startswith("ndcg@10")


def test_cli_unknown_metric_and_missing_file(tmp_path, random_run_and_qrels):
    _, _, qrels_path, run_path = random_run_and_qrels
    for args, message in ((["--metrics", "ndcg10"], "unknown metric 'ndcg10'; close matches: ndcg@10"),
                          (["--run", str(tmp_path / "nope.trec")], "nope.trec: no such file"),
                          (["--relevance-level", "0"], "--relevance-level")):  # pytrec_eval would raise
        base = {"--qrels": str(qrels_path), "--run": str(run_path)}
        argv = [x for k, v in base.items() if k not in args for x in (k, v)] + args
        result = run_here("ance_ir.eval", *argv)
        assert result.returncode == 2
        assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
