"""Measure names (trec_eval's, pytrec_eval's keys, aliases), their values against Pyserini's trec_eval, -c."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest
import pytrec_eval
from conftest import run_here

from ance_ir.data import read_run, write_qrels, write_run
from ance_ir.eval import evaluate, evaluate_per_query, format_table, measure_keys, measure_name, parse_measure
from ance_ir.eval.__main__ import main as eval_main
from ance_ir.eval.measures import CUTOFF_FAMILIES, LEVEL_FAMILIES, label
from ance_ir.eval.metrics import empty_ranking_value


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """40 judged queries; the run misses 5 of them and retrieves 120 documents for each of the others."""
    tmp = tmp_path_factory.mktemp("measures")
    rng = random.Random(7)
    docs = [f"d{i}" for i in range(250)]
    qrels = {f"q{q}": {d: rng.choice([0, 0, 1, 2, 3]) for d in rng.sample(docs, 25)} for q in range(40)}
    run = {}
    for q in list(qrels)[5:]:
        run[q] = sorted(((d, round(rng.uniform(0, 30), 3)) for d in rng.sample(docs, 120)), key=lambda h: -h[1])
    write_qrels(qrels, tmp / "qrels.txt")
    write_run(run, tmp / "run.trec")
    return qrels, run, tmp / "qrels.txt", tmp / "run.trec"


def _trec_eval(*args: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-m", "ance_ir.pyserini", "pyserini.eval.trec_eval", *args],
                         capture_output=True, text=True, check=True).stdout
    return {p[0]: float(p[2]) for p in (line.split() for line in out.splitlines()) if len(p) == 3 and p[1] == "all"}


@pytest.mark.parametrize(("spelling", "keys"), [
    ("ndcg@10", ["ndcg_cut_10"]), ("NDCG@10", ["ndcg_cut_10"]), ("ndcg_cut.10", ["ndcg_cut_10"]),
    ("ndcg_cut_10", ["ndcg_cut_10"]), ("r@20", ["recall_20"]), ("recall@20", ["recall_20"]),
    ("recall.20", ["recall_20"]), ("recall.20,100", ["recall_20", "recall_100"]), ("p@5", ["P_5"]),
    ("P.5", ["P_5"]), ("P_5", ["P_5"]), ("precision@5", ["P_5"]), ("map", ["map"]), ("map@100", ["map_cut_100"]),
    ("map_cut.100", ["map_cut_100"]), ("success@1", ["success_1"]), ("success.1,5", ["success_1", "success_5"]),
    ("mrr@10", ["recip_rank"]), ("recip_rank", ["recip_rank"]), ("mrr@100", ["recip_rank_cut_100"]),
    ("recip_rank_cut_100", ["recip_rank_cut_100"]), ("recip_rank_cut_10", ["recip_rank"]),
    ("iprec_at_recall.0.1", ["iprec_at_recall_0.10"]), ("iprec_at_recall_0.10", ["iprec_at_recall_0.10"]),
    ("Rprec_mult.0.5", ["Rprec_mult_0.50"]), ("bpref", ["bpref"]), ("Rprec", ["Rprec"]), ("gm_map", ["gm_map"]),
    ("num_rel_ret", ["num_rel_ret"]), ("ndcg", ["ndcg"]), ("set_F", ["set_F"]), ("relative_P@5", ["relative_P_5"]),
    ("success", ["success_1", "success_5", "success_10"]), ("judged@10", ["judged_10"]), ("Judged.5", ["judged_5"]),
    ("judged_100", ["judged_100"]),
])
def test_spellings(spelling, keys):
    assert measure_keys(spelling) == keys


def test_every_numeric_pytrec_eval_measure_is_accepted_by_name():
    for family in pytrec_eval.supported_measures - {"runid", "relstring"}:
        assert parse_measure(family), family
    with pytest.raises(ValueError, match="not a numeric measure"):
        parse_measure("runid")


def test_default_parameters_are_pytrec_evals():
    qrels, run = {"q": {"a": 1}}, {"q": {"a": 1.0}}
    for family, defaults in (*CUTOFF_FAMILIES.items(), *LEVEL_FAMILIES.items()):
        got = pytrec_eval.RelevanceEvaluator(qrels, {family}).evaluate(run)["q"]
        assert [m.key for m in parse_measure(family)] == [f"{family}_{d}" for d in defaults] == list(got), family


@pytest.mark.parametrize(("spelling", "message"), [
    ("ndcg10", "unknown metric 'ndcg10'; close matches: ndcg@10"),
    ("mrr", "close matches: mrr@10"),
    ("recal@20", "close matches: recall@100"),
    ("P.0", "cut-off '0' is not a positive integer"),  # would crash pytrec_eval
    ("P.5,05", None),  # the same cut-off twice would too: it is merged
    ("ndcg@x", "cut-off 'x' is not a positive integer"),
    ("G.2", "G takes no parameters here"),  # gain parameters crash pytrec_eval
    ("iprec_at_recall.1.5", "above 1"),
    ("iprec_at_recall.0.125", "at most two decimals"),
    ("accuracy@5", "unknown metric"),
    ("", "empty metric name"),
    ("judged", "close matches: judged@10"),
    ("judged@0", "cut-off '0' is not a positive integer"),
])
def test_bad_spellings(spelling, message):
    if message is None:
        assert measure_keys(spelling) == ["P_5"]
        return
    with pytest.raises(ValueError, match=message):
        parse_measure(spelling)


def test_measure_name_wants_a_single_measure():
    assert measure_name("ndcg@10") == "ndcg_cut_10"
    with pytest.raises(ValueError, match="stands for 9 measures"):
        measure_name("P")


def test_agrees_with_trec_eval_on_many_measures(files):
    qrels, run, qrels_path, run_path = files
    spellings = ["p@5", "recall.20", "map@100", "success.1,5", "ndcg", "bpref", "Rprec", "iprec_at_recall",
                 "num_rel_ret", "num_ret", "gm_map", "infAP", "relative_P.5", "Rprec_mult.0.5", "11pt_avg",
                 "set_F", "mrr@1000", "ndcg@20"]
    ours = evaluate(qrels, run, spellings)
    theirs = _trec_eval("-m", "P.5", "-m", "recall.20", "-m", "map_cut.100", "-m", "success.1,5", "-m", "ndcg",
                        "-m", "bpref", "-m", "Rprec", "-m", "iprec_at_recall", "-m", "num_rel_ret", "-m", "num_ret",
                        "-m", "gm_map", "-m", "infAP", "-m", "relative_P.5", "-m", "Rprec_mult.0.5", "-m", "11pt_avg",
                        "-m", "set_F", "-m", "recip_rank", "-m", "ndcg_cut.20", str(qrels_path), str(run_path))
    theirs["recip_rank_cut_1000"] = theirs.pop("recip_rank")  # uncut = cut at the run's depth
    assert set(ours) == set(theirs)
    for key, value in theirs.items():
        assert ours[key] == pytest.approx(value, abs=5e-5 * max(1.0, abs(value))), key
    assert ours["num_ret"] == 35 * 120  # summed, not averaged


def test_complete_agrees_with_trec_eval_c(files):
    qrels, run, qrels_path, run_path = files
    spellings = ["map", "gm_map", "num_q", "num_rel", "ndcg@10", "bpref"]
    ours = evaluate(qrels, run, spellings, complete=True)
    theirs = _trec_eval("-c", "-m", "map", "-m", "gm_map", "-m", "num_q", "-m", "num_rel", "-m", "ndcg_cut.10",
                        "-m", "bpref", str(qrels_path), str(run_path))
    assert ours == pytest.approx(theirs, abs=5e-5)
    assert ours["num_q"] == 40 and evaluate(qrels, run, ["num_q"])["num_q"] == 35


def test_cut_offs_follow_trec_evals_order_of_ties(tmp_path):
    """Ties straddling rank 10 are ordered as trec_eval orders them (docid descending) before the cut: the
    file's order of d10, d11 (tied) does not put d10 in the top 10."""
    hits = [(f"d0{i}", 20.0 - i) for i in range(1, 10)] + [("d10", 0.5), ("d11", 0.5), ("d12", 0.1)]
    qrels, run = {"q1": {"d10": 1, "d01": 0}, "q2": {"d3": 1}}, {"q1": hits, "q2": [("d2", 1.0), ("d3", 1.0)]}
    qrels_path, run_path = tmp_path / "qrels.txt", tmp_path / "run.trec"
    write_qrels(qrels, qrels_path)
    write_run(run, run_path)
    ours = evaluate_per_query(qrels, run, ["mrr@10", "mrr@1", "judged@10", "judged@1"])
    assert ours["q1"] == {"recip_rank": 0.0, "recip_rank_cut_1": 0.0, "judged_10": 0.1, "judged_1": 1.0}
    assert ours["q2"] == {"recip_rank": 1.0, "recip_rank_cut_1": 1.0, "judged_10": 0.5, "judged_1": 1.0}  # 1 of 2
    for depth, key in (("10", "recip_rank"), ("1", "recip_rank_cut_1")):
        theirs = _trec_eval("-M", depth, "-m", "recip_rank", str(qrels_path), str(run_path))
        assert evaluate(qrels, read_run(run_path), [key])[key] == pytest.approx(theirs["recip_rank"]), depth


def test_missing_query_scores_as_an_empty_ranking(files):
    qrels, run, *_ = files
    per_query = evaluate_per_query(qrels, run, ["ndcg@10", "num_rel", "gm_map", "r@100"], complete=True)
    assert list(per_query) == list(qrels)
    assert per_query["q0"] == {"ndcg_cut_10": 0.0, "num_rel": sum(g >= 1 for g in qrels["q0"].values()),
                               "gm_map": pytest.approx(-11.512925), "recall_100": 0.0}
    assert empty_ranking_value("num_rel", {"a": 1, "b": 2, "c": 0}, relevance_level=2) == 1.0
    # an empty ranking given explicitly is a missing query too (pytrec_eval crashes on those)
    assert evaluate_per_query(qrels, {**run, "q0": []}, ["map", "bpref"], complete=True)["q0"] == \
        {"map": 0.0, "bpref": 0.0}


def test_mrr_depths(files):
    qrels, run, *_ = files
    values = evaluate(qrels, run, ["mrr@1", "mrr@10", "mrr@1000", "success@1"])
    assert values["recip_rank_cut_1"] == pytest.approx(values["success_1"])
    assert values["recip_rank_cut_1"] <= values["recip_rank"] <= values["recip_rank_cut_1000"]


def test_judged_share_by_hand(files):
    qrels, run = {"q": {"a": 0, "b": 2}, "r": {"c": 1}}, {"q": [("a", 3.0), ("x", 2.0), ("b", 1.0)], "r": [("y", 1.0)]}
    per_query = evaluate_per_query(qrels, run, ["judged@2", "judged@3", "judged@10"])
    assert per_query == {"q": {"judged_2": 0.5, "judged_3": pytest.approx(2 / 3), "judged_10": pytest.approx(2 / 3)},
                         "r": {"judged_2": 0.0, "judged_3": 0.0, "judged_10": 0.0}}  # a grade-0 judgment counts
    # out of the hits a query has when fewer than K, as ir_measures' Judged@K (its judged_provider.py)
    qrels, run, _, _ = files
    shares = [sum(d in qrels[q] for d, _ in hits[:10]) / 10 for q, hits in run.items()]
    assert evaluate(qrels, run, ["judged@10", "ndcg@10"])["judged_10"] == pytest.approx(sum(shares) / len(shares))


def test_labels_and_table():
    assert [label(k) for k in ("ndcg_cut_10", "recip_rank", "recall_100", "P_5", "map_cut_100", "success_1",
                               "recip_rank_cut_100", "map", "iprec_at_recall_0.10", "judged_10")] == \
        ["ndcg@10", "mrr@10", "r@100", "p@5", "map@100", "success@1", "mrr@100", "map", "iprec_at_recall_0.10",
         "judged@10"]
    # the default table is byte-for-byte what it was
    table = format_table({"ndcg_cut_10": 0.5, "recip_rank": 0.25, "recall_100": 1.0, "recall_1000": 1.0,
                          "map": 0.125}, label="7 queries")
    assert table.splitlines() == ["metric      7 queries", "ndcg@10        0.5000", "mrr@10         0.2500",
                                  "r@100          1.0000", "r@1000         1.0000", "map            0.1250"]
    wide = format_table({"iprec_at_recall_0.10": 0.5})
    assert wide.splitlines()[1] == "iprec_at_recall_0.10     0.5000"


def test_cli_new_measures_and_json(files, capsys):
    qrels, run, qrels_path, run_path = files
    assert eval_main(["--qrels", str(qrels_path), "--run", str(run_path), "--metrics", "r@20", "recall.20", "p@5",
                      "map_cut.100", "recip_rank", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == ["recall_20", "P_5", "map_cut_100", "recip_rank"]
    assert out == pytest.approx(evaluate(qrels, run, ["recall.20", "P.5", "map@100", "mrr@10"]))
    assert eval_main(["--qrels", str(qrels_path), "--run", str(run_path), "--metrics", "ndcg@10", "--per-query",
                      "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"mean", "per_query"} and len(out["per_query"]) == 35
    assert eval_main(["--qrels", str(qrels_path), "--run", str(run_path), "--metrics", "num_q", "--complete"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].split() == ["num_q", "40.0000"]


def test_cli_zero_overlap_warning(files, tmp_path):
    qrels, run, qrels_path, run_path = files
    elsewhere = {q: [(f"other{i}", 10.0 - i) for i in range(10)] for q in run}
    write_run(elsewhere, tmp_path / "elsewhere.trec")
    for path, warned in ((tmp_path / "elsewhere.trec", True), (run_path, False)):
        result = run_here("ance_ir.eval", "--qrels", str(qrels_path), "--run", str(path), "--metrics", "ndcg@10")
        assert result.returncode == 0
        expected = [f"warning: {path}: none of the retrieved documents is judged in {qrels_path} (different corpora?)"]
        assert result.stderr.splitlines() == (expected if warned else [])
        assert result.stdout.splitlines()[-1].startswith("ndcg@10")
