"""``python -m ance_ir.eval --run A --run B ...``: the comparison table and JSON."""

from __future__ import annotations

import json
import math
import random

import pytest
from conftest import run_here

from ance_ir.data import write_qrels, write_run
from ance_ir.eval import evaluate, evaluate_per_query
from ance_ir.eval.__main__ import main as eval_main
from ance_ir.eval.significance import compare_to_baseline, holm, paired_t_test, permutation_test


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """30 judged queries; ``strong`` ranks relevant documents high, ``weak`` barely, ``partial`` misses 4 queries."""
    tmp = tmp_path_factory.mktemp("compare")
    rng = random.Random(29)
    docs = [f"d{i}" for i in range(200)]
    qrels = {f"q{q}": {d: rng.choice([0, 1, 2]) for d in rng.sample(docs, 20)} for q in range(30)}

    def ranked(boost: float, skip: int = 0):
        run = {}
        for q, judged in list(qrels.items())[skip:]:
            hits = [(d, rng.random() + boost * judged.get(d, 0)) for d in rng.sample(docs, 100)]
            run[q] = sorted(hits, key=lambda h: -h[1])
        return run

    paths = {}
    for name, run in (("base", ranked(0.0)), ("strong", ranked(0.8)), ("weak", ranked(0.02)),
                      ("partial", ranked(0.8, skip=4))):
        paths[name] = tmp / f"{name}.trec"
        write_run(run, paths[name])
    write_qrels(qrels, tmp / "qrels.txt")
    return qrels, tmp / "qrels.txt", paths


def _json(argv, capsys):
    assert eval_main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_json_comparison(runs, capsys):
    qrels, qrels_path, paths = runs
    names = [str(paths[n]) for n in ("base", "strong", "weak", "partial")]
    out = _json(["--qrels", str(qrels_path), "--run", *names[:2], "--run", *names[2:], "--metrics", "ndcg@10", "map",
                 "--permutations", "2000", "--seed", "3", "--json"], capsys)
    assert out["queries"] == 30 and out["baseline"] == names[0] and out["correction"] == "holm"
    assert [r["run"] for r in out["runs"]] == names
    assert [r["missing_queries"] for r in out["runs"]] == [0, 0, 0, 4]
    assert len(out["comparisons"]) == 2 * 3
    from ance_ir.data import read_run

    per_query = [evaluate_per_query(qrels, read_run(n), ["ndcg@10"], complete=True) for n in names]
    # a missing query scores 0: the partial run's mean is over all 30 queries
    assert out["runs"][3]["means"]["ndcg_cut_10"] == pytest.approx(sum(v["ndcg_cut_10"] for v in per_query[3].values())
                                                                  / 30)
    assert out["runs"][3]["means"]["ndcg_cut_10"] < evaluate(qrels, read_run(names[3]), ["ndcg@10"])["ndcg_cut_10"]
    column = [[v["ndcg_cut_10"] for v in pq.values()] for pq in per_query]
    t = [paired_t_test(c, column[0]) for c in column[1:]]
    perm = [permutation_test(c, column[0], 2000, 3) for c in column[1:]]
    ndcg = [c for c in out["comparisons"] if c["measure"] == "ndcg_cut_10"]
    assert [c["run"] for c in ndcg] == names[1:]
    assert [c["t_test_p"] for c in ndcg] == pytest.approx(t)
    assert [c["t_test_p_corrected"] for c in ndcg] == pytest.approx(holm(t))
    assert [c["permutation_p_corrected"] for c in ndcg] == pytest.approx(holm(perm))
    assert [c["significant_t_test"] for c in ndcg] == [p < 0.05 for p in holm(t)]
    assert ndcg[0]["significant_t_test"] and ndcg[0]["significant_permutation"]
    assert ndcg[0]["difference"] == pytest.approx(out["runs"][1]["means"]["ndcg_cut_10"]
                                                  - out["runs"][0]["means"]["ndcg_cut_10"])


def test_table_marks_significance_and_names_the_correction(runs, capsys):
    _, qrels_path, paths = runs
    argv = ["--qrels", str(qrels_path), "--run", str(paths["base"]), str(paths["strong"]), str(paths["weak"]),
            "--metrics", "ndcg@10", "--permutations", "500"]
    assert eval_main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("3 runs on 30 queries of") and "a query missing from a run scores 0" in lines[0]
    assert "500 random sign flips, seed 0" in lines[1]
    assert "Holm-Bonferroni correction over the 2 comparisons" in lines[2] and "† p < 0.05" in lines[2]
    strong = next(line for line in lines if str(paths["strong"]) in line)
    assert strong.count("†") == 2
    assert eval_main([*argv, "--correction", "bonferroni", "--alpha-level", "0.01"]) == 0
    assert "Bonferroni correction" in capsys.readouterr().out
    assert eval_main([*argv, "--per-query"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"qid\tmeasure\t{paths['base']}\t{paths['strong']}\t{paths['weak']}"
    assert lines[1].startswith("q0\tndcg_cut_10\t")


def test_same_run_twice_is_never_significant(runs, capsys):
    _, qrels_path, paths = runs
    out = _json(["--qrels", str(qrels_path), "--run", str(paths["base"]), str(paths["base"]), "--json"], capsys)
    for c in out["comparisons"]:
        assert c["t_test_p"] == 1.0 and c["permutation_p"] == 1.0 and c["difference"] == 0.0
        assert not c["significant_t_test"]


def test_comparison_errors_and_warning(runs, tmp_path):
    qrels, qrels_path, paths = runs
    write_run({"elsewhere": [("d1", 1.0)]}, tmp_path / "unjudged.trec")
    write_run({q: [("zz", 1.0)] for q in qrels}, tmp_path / "other-corpus.trec")

    def cli(*argv):
        return run_here("ance_ir.eval", "--qrels", str(qrels_path), *argv)

    result = cli("--run", str(paths["base"]), str(tmp_path / "unjudged.trec"))
    assert result.returncode == 2
    assert result.stderr == f"error: {tmp_path / 'unjudged.trec'}: no query of the run has judgments in {qrels_path}\n"
    result = cli("--run", str(paths["base"]), str(tmp_path / "other-corpus.trec"), "--metrics", "ndcg@10")
    assert result.returncode == 0
    assert result.stderr == (f"warning: {tmp_path / 'other-corpus.trec'}: none of the retrieved documents is judged "
                             f"in {qrels_path} (different corpora?)\n")
    assert result.stdout.startswith("2 runs on 30 queries")


def test_difference_is_the_difference_of_the_summaries():
    # gm_* per-query values are logarithms (trec_eval's geometric mean), num_* summarise as sums
    baseline = {"gm_map": [math.log(0.5), math.log(0.5)], "num_rel_ret": [2.0, 2.0], "map": [0.5, 0.5]}
    run = {"gm_map": [math.log(0.1), math.log(0.9)], "num_rel_ret": [1.0, 5.0], "map": [0.1, 0.9]}
    diff = {c.measure: c.difference for c in compare_to_baseline([baseline, run], permutations=4)}
    assert diff == pytest.approx({"gm_map": 0.3 - 0.5, "num_rel_ret": 2.0, "map": 0.0})
