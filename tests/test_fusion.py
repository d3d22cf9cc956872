"""Fusion agrees with Pyserini: HybridSearcher's min-fill interpolation, pyserini.fusion's RRF and averaging."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from types import SimpleNamespace

import pytest
from conftest import run_here

from ance_ir.data import read_run, write_run
from ance_ir.fusion import average, interpolate, reciprocal_rank_fusion


def _random_run(seed: int, n: int = 30) -> dict:
    rng = random.Random(seed)
    return {q: sorted(((f"d{i}", rng.uniform(-5, 5)) for i in rng.sample(range(60), n)), key=lambda h: -h[1])
            for q in ("q1", "q2")}


def test_interpolation_matches_pyserini_hybrid_searcher():
    from pyserini.search.hybrid import HybridSearcher

    sparse, dense = _random_run(1), _random_run(2)
    alpha = 0.3
    ours = interpolate(sparse, dense, alpha, 1.0, depth=None, k=20)
    for qid in sparse:
        dense_hits, sparse_hits = ([SimpleNamespace(docid=d, score=s) for d, s in run[qid]] for run in (dense, sparse))
        theirs = HybridSearcher._hybrid_results(dense_hits, sparse_hits, alpha, 20)
        assert [d for d, _ in ours[qid]] == [h.docid for h in theirs]
        assert [s for _, s in ours[qid]] == pytest.approx([h.score for h in theirs])


def test_normalized_interpolation_ranks_as_pyserini_hybrid_searcher_with_normalization():
    from pyserini.search.hybrid import HybridSearcher

    sparse, dense = _random_run(3), _random_run(4)
    sparse = {q: [(d, 40 + 7 * s) for d, s in hits] for q, hits in sparse.items()}  # BM25-like range
    alpha = 0.4
    ours = interpolate(sparse, dense, alpha, 1.0, depth=None, k=None, normalize=True)
    for qid in sparse:
        dense_hits, sparse_hits = ([SimpleNamespace(docid=d, score=s) for d, s in run[qid]] for run in (dense, sparse))
        theirs = HybridSearcher._hybrid_results(dense_hits, sparse_hits, alpha, 100, normalization=True)
        assert [d for d, _ in ours[qid]] == [h.docid for h in theirs]
        # Pyserini centres each list on its midrange, ours starts it at 0: the scores differ by alpha/2 + 1/2
        assert [s for _, s in ours[qid]] == pytest.approx([h.score + alpha / 2 + 0.5 for h in theirs])
    assert max(s for _, s in ours["q1"]) <= alpha + 1.0 and min(s for _, s in ours["q1"]) >= 0.0


def test_missing_document_takes_the_lists_minimum():
    fused = interpolate({"q": [("a", 10.0), ("b", 4.0)]}, {"q": [("b", 0.9), ("c", 0.5)]}, 0.5, 0.5)
    assert dict(fused["q"]) == pytest.approx({"a": 0.5 * 10 + 0.5 * 0.5, "b": 0.5 * 4 + 0.5 * 0.9,
                                              "c": 0.5 * 4 + 0.5 * 0.5})
    only_one = interpolate({"q": [("a", 1.0)]}, {}, 0.5, 0.5)
    assert only_one == {"q": [("a", 0.5)]}


def test_average_by_hand():
    a = {"q": [("x", 9.0), ("y", 8.0), ("z", 5.0)]}
    b = {"q": [("z", 3.0), ("x", 2.0)]}
    c = {"q": [("y", 1.0), ("w", 0.0)], "p": [("x", 4.0)]}
    fused = average([a, b, c])
    # a document a run lacks takes that run's lowest score for the query; a query a run lacks, 0
    assert dict(fused["q"]) == pytest.approx({"x": (9 + 2 + 0) / 3, "y": (8 + 2 + 1) / 3, "z": (5 + 3 + 0) / 3,
                                              "w": (5 + 2 + 0) / 3})
    assert [d for d, _ in fused["q"]] == ["x", "y", "z", "w"] and fused["p"] == [("x", pytest.approx(4 / 3))]
    normalized = dict(average([a, b, c], normalize=True)["q"])
    assert normalized == pytest.approx({"x": (1 + 0 + 0) / 3, "y": (0.75 + 0 + 1) / 3, "z": (0 + 1 + 0) / 3,
                                        "w": 0.0})
    assert average([a, b]) == interpolate(a, b, 0.5, 0.5)  # two runs: interpolation at one half each


@pytest.mark.parametrize("normalize", [False, True])
def test_average_matches_pyserini(normalize):
    """Without normalisation, where every run lists the same documents (Pyserini gives a missing one 0, not the
    run's lowest score); with it, pyserini.fusion's normalize method, whose scores are the sum, not the mean."""
    from pyserini.fusion import average as pyserini_average
    from pyserini.fusion import normalize as pyserini_normalize
    from pyserini.trectools import TrecRun

    runs = [_random_run(seed) for seed in (1, 2, 3)]
    if not normalize:
        runs = [{q: [(f"d{i}", s) for i, (_, s) in enumerate(hits)] for q, hits in run.items()} for run in runs]
    trec = [TrecRun.from_list([(q, "Q0", d, rank, s, "r") for q, hits in run.items()
                               for rank, (d, s) in enumerate(hits, start=1)]) for run in runs]
    theirs = (pyserini_normalize if normalize else pyserini_average)(trec).run_data
    ours = average(runs, depth=None, k=None, normalize=normalize)
    for qid in ("q1", "q2"):
        rows = theirs[theirs["topic"] == qid]
        assert [d for d, _ in ours[qid]] == list(rows["docid"])
        assert [s * (3 if normalize else 1) for _, s in ours[qid]] == pytest.approx(list(rows["score"]))


def test_a_list_of_one_score_normalises_as_pyserini_normalize_does():
    """A single hit, or ties only: its documents 1, the absent ones 0 (not all 0, which would drop the list)."""
    from pyserini.fusion import normalize as pyserini_normalize
    from pyserini.trectools import TrecRun

    runs = [{"q1": [("x", 7.3)], "q2": [("x", 5.0), ("y", 5.0)], "q3": [("w", 2.0), ("v", 1.0)]},
            {"q1": [("y", 0.9), ("z", 0.8), ("x", 0.1)], "q2": [("z", 0.9), ("x", 0.5), ("y", 0.1)],
             "q3": [("u", 3.0)]}]
    trec = [TrecRun.from_list([(q, "Q0", d, rank, s, "r") for q, hits in run.items()
                               for rank, (d, s) in enumerate(hits, start=1)]) for run in runs]
    theirs = pyserini_normalize(trec).run_data
    ours = average(runs, depth=None, k=None, normalize=True)
    for qid in runs[0]:
        rows = theirs[theirs["topic"] == qid]
        assert [d for d, _ in ours[qid]] == list(rows["docid"])
        assert [2 * s for _, s in ours[qid]] == pytest.approx(list(rows["score"]))
    assert interpolate(runs[0], runs[1], 0.5, 0.5, normalize=True)["q1"] == [("x", 0.5), ("y", 0.5), ("z", 0.4375)]


def test_normalising_scores_near_the_float_limits_keeps_every_document():
    """max - min of 1e308 and -1e308 overflows to inf, which made the top document's score NaN (and dropped it)."""
    from ance_ir.data import min_max_scores

    huge = {"q1": [("d1", 1e308), ("d2", -1e308)]}
    small = {"q1": [("d1", 2.0), ("d3", 1.0)]}
    assert interpolate(small, huge, 1.0, 1.0, normalize=True)["q1"] == [("d1", 2.0), ("d2", 0.0), ("d3", 0.0)]
    assert min_max_scores(huge) == {"q1": {"d1": 1.0, "d2": 0.0}}
    assert average([huge, small], depth=None, k=None, normalize=True)["q1"][0] == ("d1", 1.0)
    tiny = {"q1": [("d1", 5e-324), ("d2", 0.0)]}  # the smallest float above 0: halved, it would be 0
    assert min_max_scores(tiny) == {"q1": {"d1": 1.0, "d2": 0.0}}
    assert interpolate(tiny, small, 1.0, 0.0, normalize=True)["q1"][:2] == [("d1", 1.0), ("d2", 0.0)]


def test_rrf_by_hand():
    a = {"q": [("x", 9.0), ("y", 8.0), ("z", 7.0)]}
    b = {"q": [("z", 3.0), ("x", 2.0)]}
    fused = dict(reciprocal_rank_fusion([a, b], rrf_k=60)["q"])
    assert fused == pytest.approx({"x": 1 / 61 + 1 / 62, "z": 1 / 63 + 1 / 61, "y": 1 / 62})
    assert [d for d, _ in reciprocal_rank_fusion([a, b], rrf_k=60)["q"]] == ["x", "z", "y"]


@pytest.mark.parametrize(("depth", "k"), [(None, None), (10, 15)])
def test_rrf_matches_pyserini(depth, k):
    from pyserini.fusion import reciprocal_rank_fusion as pyserini_rrf
    from pyserini.trectools import TrecRun

    runs = [_random_run(seed) for seed in (1, 2, 3)]
    runs[2]["q3"] = [("d1", 1.0), ("d2", 0.5)]  # a query only one run has
    trec = [TrecRun.from_list([(q, "Q0", d, rank, s, "r") for q, hits in run.items()
                               for rank, (d, s) in enumerate(hits, start=1)]) for run in runs]
    theirs = pyserini_rrf(trec, rrf_k=60, depth=depth, k=k).run_data
    ours = reciprocal_rank_fusion(runs, rrf_k=60, depth=depth, k=k)
    for qid in ("q1", "q2", "q3"):
        rows = theirs[theirs["topic"] == qid]
        assert [d for d, _ in ours[qid]] == list(rows["docid"])
        assert [s for _, s in ours[qid]] == pytest.approx(list(rows["score"]))


def test_cli_fuses_as_pyserini_on_many_tied_hits(tmp_path):
    """The CLI's vectorised path: RRF over 30 queries of 200 hits with ranks tied across runs (the docid orders
    them), cut at depth 150 and k 120, as pyserini.fusion writes it, one run read from a tab-separated file."""
    from pyserini.fusion import reciprocal_rank_fusion as pyserini_rrf
    from pyserini.trectools import TrecRun

    rng = random.Random(7)
    runs = [{f"q{q}": [(f"d{d}", 200.0 - r) for r, d in enumerate(rng.sample(range(400), 200))]
             for q in rng.sample(range(30), 30)} for _ in range(2)]
    write_run(runs[0], tmp_path / "a.trec")
    write_run(runs[1], tmp_path / "b.trec")
    (tmp_path / "b.tsv").write_text((tmp_path / "b.trec").read_text().replace(" ", "\t"))
    out = tmp_path / "fused.trec"
    result = subprocess.run([sys.executable, "-m", "ance_ir.fusion", "--runs", str(tmp_path / "a.trec"),
                             str(tmp_path / "b.tsv"), "--depth", "150", "--hits", "120", "--output", str(out)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    trec = [TrecRun.from_list([(q, "Q0", d, rank, s, "r") for q, hits in run.items()
                               for rank, (d, s) in enumerate(hits, start=1)]) for run in runs]
    theirs = pyserini_rrf(trec, rrf_k=60, depth=150, k=120).run_data
    ours = read_run(out)
    assert list(ours) == list(runs[0])
    for qid, ranking in ours.items():
        rows = theirs[theirs["topic"] == qid]
        assert [d for d, _ in ranking] == list(rows["docid"])
        assert [s for _, s in ranking] == pytest.approx(list(rows["score"]), abs=1e-6)


@pytest.mark.parametrize("workers", [3, 64])
def test_threads_change_nothing(tmp_path, monkeypatch, workers):
    """The pairs, the final sort and the writing split across threads give what one thread gives, ties included."""
    rng = random.Random(3)
    runs = [{f"q{q}": [(f"d{d}", float(rng.randint(0, 5))) for d in rng.sample(range(90), 60)]
             for q in rng.sample(range(40), 40)} for _ in range(2)]
    monkeypatch.setattr("ance_ir.data.runs._WRITE_ROWS", 50)  # the lines written in many blocks

    def fused(threads: int, path) -> tuple:
        monkeypatch.setattr(os, "cpu_count", lambda: threads)
        rrf = reciprocal_rank_fusion(runs, rrf_k=60, depth=50, k=45)
        mixed = interpolate(runs[0], runs[1], 0.3, 0.7, depth=50, k=45)
        write_run(rrf, path)
        return rrf, mixed, path.read_bytes()

    assert fused(workers, tmp_path / "many.trec") == fused(1, tmp_path / "one.trec")


@pytest.mark.parametrize("fuse", [lambda a, b: reciprocal_rank_fusion([a, b]), lambda a, b: interpolate(a, b, .5, .5)])
def test_a_document_twice_in_a_ranking_is_refused(fuse):
    twice = {"q1": [("d1", 3.0), ("d2", 2.0)], "q2": [("d1", 3.0), ("d2", 2.0), ("d1", 1.0)]}
    with pytest.raises(ValueError, match="run 2 lists document d1 twice for query q2"):
        fuse({"q1": [("d1", 1.0)]}, twice)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("fuse", [lambda a, b: reciprocal_rank_fusion([a, b]), lambda a, b: interpolate(a, b, .5, .5),
                                  lambda a, b: average([a, b], normalize=True)])
def test_a_score_that_is_not_finite_is_refused(fuse, bad):
    """A run file with one is refused as it is read; a Run dictionary handed to the functions, here."""
    with pytest.raises(ValueError, match=rf"query 'q2': document 'd2' has the score {bad}; fusion needs finite"):
        fuse({"q1": [("d1", 1.0)]}, {"q1": [("d1", 3.0)], "q2": [("d1", 3.0), ("d2", bad)]})


def test_cli(tmp_path):
    write_run(_random_run(1), tmp_path / "a.trec")
    write_run(_random_run(2), tmp_path / "b.trec")
    for method in ("interpolation", "average", "rrf"):
        out = tmp_path / f"{method}.trec"
        result = run_here("ance_ir.fusion", "--runs", str(tmp_path / "a.trec"), str(tmp_path / "b.trec"),
                          "--method", method, "--hits", "10", "--output", str(out))
        assert result.returncode == 0, result.stderr
        fused = read_run(out)
        assert set(fused) == {"q1", "q2"} and all(len(r) == 10 for r in fused.values())
    repeated = run_here("ance_ir.fusion", "--runs", str(tmp_path / "a.trec"), "--runs", str(tmp_path / "b.trec"),
                        "--method", "rrf", "--hits", "10", "--output", str(tmp_path / "repeated.trec"))
    assert repeated.returncode == 0, repeated.stderr  # the two runs, as eval's --run A --run B
    assert (tmp_path / "repeated.trec").read_bytes() == (tmp_path / "rrf.trec").read_bytes()
    three = run_here("ance_ir.fusion", "--runs", *[str(tmp_path / "a.trec")] * 3, "--method", "interpolation",
                     "--output", str(tmp_path / "x.trec"))
    assert three.returncode == 2 and "exactly two runs" in three.stderr
    assert not (tmp_path / "x.trec").exists()
    averaged = run_here("ance_ir.fusion", "--runs", *[str(tmp_path / f) for f in ("a.trec", "b.trec", "a.trec")],
                        "--method", "average", "--normalization", "--output", str(tmp_path / "avg.trec"))
    assert averaged.returncode == 0, averaged.stderr
    expected = average([_random_run(1), _random_run(2), _random_run(1)], normalize=True)
    assert {q: [d for d, _ in r] for q, r in read_run(tmp_path / "avg.trec").items()} == \
        {q: [d for d, _ in r] for q, r in expected.items()}


def test_fusing_runs_imports_no_model_library(tmp_path):
    """Fusion reads and writes run files: its checks (an output apart from its inputs) load no torch."""
    write_run(_random_run(1), tmp_path / "a.trec")
    write_run(_random_run(2), tmp_path / "b.trec")
    code = ("import sys; from ance_ir.fusion.__main__ import main; "
            f"main(['--runs', {str(tmp_path / 'a.trec')!r}, {str(tmp_path / 'b.trec')!r}, '--method', 'rrf', "
            f"'--output', {str(tmp_path / 'rrf.trec')!r}]); "
            "print(sorted({'torch', 'transformers', 'faiss'} & set(sys.modules)))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]" and (tmp_path / "rrf.trec").is_file()


def test_cli_alpha_weights_the_first_run_and_old_depth_flags_still_work(tmp_path, capsys):
    from ance_ir.fusion.__main__ import main

    a, b = _random_run(1), _random_run(2)
    write_run(a, tmp_path / "a.trec")
    write_run(b, tmp_path / "b.trec")
    runs = ["--runs", str(tmp_path / "a.trec"), str(tmp_path / "b.trec"), "--method", "interpolation"]
    assert main([*runs, "--alpha", "0.3", "--hits", "7", "--output", str(tmp_path / "new.trec")]) == 0
    expected = interpolate(a, b, 0.3, 0.7, depth=1000, k=7)
    fused = read_run(tmp_path / "new.trec")
    for qid, ranking in expected.items():
        assert [d for d, _ in fused[qid]] == [d for d, _ in ranking]
        assert [s for _, s in fused[qid]] == pytest.approx([s for _, s in ranking], abs=1e-6)
    main([*runs, "--alpha", "1", "--hits", "5", "--output", str(tmp_path / "first.trec")])
    assert {q: [d for d, _ in r] for q, r in read_run(tmp_path / "first.trec").items()} == \
        {q: [d for d, _ in r[:5]] for q, r in a.items()}  # alpha 1: the first run alone
    # the spelling of committed commands: --k (hits written); --depth: hits read from each run
    main([*runs, "--alpha", "0.3", "--k", "7", "--depth", "1000", "--output", str(tmp_path / "old.trec")])
    assert (tmp_path / "old.trec").read_text() == (tmp_path / "new.trec").read_text()
    with pytest.raises(SystemExit):
        main(["--help"])
    usage = capsys.readouterr().out
    assert "--hits" in usage and "--k " not in usage and "--depth DEPTH" in usage  # as Pyserini's; the docs use it
    assert "fused score = alpha * first (sparse) run + (1 - alpha) * second (dense) run" in " ".join(usage.split())


@pytest.mark.parametrize(("flag", "value"), [("--alpha", "1.5"), ("--alpha", "x"), ("--hits", "0"), ("--k", "-3")])
def test_cli_rejects_bad_numbers(tmp_path, capsys, flag, value):
    from ance_ir.fusion.__main__ import main

    write_run(_random_run(1), tmp_path / "a.trec")
    with pytest.raises(SystemExit) as exit_info:
        main(["--runs", str(tmp_path / "a.trec"), str(tmp_path / "a.trec"), "--method", "interpolation",
              flag, value, "--output", str(tmp_path / "x.trec")])
    assert exit_info.value.code == 2 and f"argument {flag}" in capsys.readouterr().err
    assert not (tmp_path / "x.trec").exists()


def test_alpha_sweep_picks_the_best_weight():
    from ance_ir.fusion.tune import best_alpha, sweep_alpha

    qrels = {"q": {"good": 1}}
    lexical = {"q": [("good", 3.0), ("bad", 1.0)]}
    semantic = {"q": [("bad", 0.9), ("good", 0.1)]}
    sweep = sweep_alpha(lexical, semantic, qrels, alphas=(0.0, 0.1, 0.5, 1.0))
    assert [a for a, _ in sweep] == [0.0, 0.1, 0.5, 1.0]
    assert sweep[0][1] < 1.0 and sweep[2][1] == 1.0
    assert best_alpha(sweep) == 0.5


def test_cross_validation_tunes_each_fold_on_the_others():
    from ance_ir.fusion.tune import cross_validated_interpolation

    # q0 and q2 are ranked right by the first run only, q1 and q3 by the second: each fold gets the other's alpha
    right, wrong = [("good", 2.0), ("bad", 1.0)], [("bad", 2.0), ("good", 1.0)]
    first = {q: right if q in ("q0", "q2") else wrong for q in ("q0", "q1", "q2", "q3")}
    second = {q: wrong if q in ("q0", "q2") else right for q in first}
    qrels = {q: {"good": 1} for q in first}
    fused, alphas, unjudged_alpha = cross_validated_interpolation(first, second, qrels, folds=2, alphas=(0.0, 1.0))
    assert alphas == [0.0, 1.0]  # fold {q0, q2} tuned on {q1, q3}, where the second run (alpha 0) is right
    assert {q: [d for d, _ in r] for q, r in fused.items()} == {q: ["bad", "good"] for q in first}
    assert unjudged_alpha is None
    # a query without judgments is fused with the alpha best on all judged queries, a judged query only the first
    # run has takes part in the folds, and the run keeps the runs' query order
    tuned = cross_validated_interpolation({"u": [("y", 2.0), ("x", 1.0)], "q4": right, "q5": right, **first},
                                          {**second, "q5": wrong, "u": [("x", 2.0), ("y", 1.0)]},
                                          {**qrels, "q4": {"good": 1}, "q5": {"good": 1}}, folds=2, alphas=(0.0, 1.0))
    assert list(tuned.run) == ["u", "q4", "q5", "q0", "q1", "q2", "q3"]
    # folds {q0, q2, q4} (tuned on q1, q3, q5: 0 right on two) and {q1, q3, q5} (tuned on q0, q2, q4: 1 on three);
    # over all six, alpha 1 is right on four (q4 is right either way)
    assert tuned.fold_alphas == [0.0, 1.0] and tuned.unjudged_alpha == 1.0
    assert [d for d, _ in tuned.run["u"]] == ["y", "x"] and [d for d, _ in tuned.run["q5"]] == ["good", "bad"]
    empty = cross_validated_interpolation({**first, "q6": []}, {**second, "q6": []}, {**qrels, "q6": {"good": 1}},
                                          folds=2, alphas=(0.0, 1.0))  # q6 judged, retrieved by neither run
    assert empty.fold_alphas == [0.0, 1.0] and empty.run["q6"] == []
    with pytest.raises(ValueError, match="at least 5 judged queries"):
        cross_validated_interpolation(first, second, qrels, folds=5)
    with pytest.raises(ValueError, match="at least 2 folds"):  # one fold would tune on no query at all
        cross_validated_interpolation(first, second, qrels, folds=1)


def test_fold_choices_give_each_fold_the_cell_best_on_the_others():
    from ance_ir.fusion.tune import best_on, fold_choices

    # (depth, alpha) cells: (15, 0.2) is best on q1 and q3, (50, 0.6) on q0 and q2; (10, 0.5) ties (15, 0.2)
    cells = {(50, 0.6): {"q0": 1.0, "q1": 0.0, "q2": 1.0, "q3": 0.0},
             (15, 0.2): {"q0": 0.0, "q1": 1.0, "q2": 0.0, "q3": 1.0},
             (10, 0.5): {"q0": 0.0, "q1": 1.0, "q2": 0.0, "q3": 1.0}}
    assert fold_choices(cells, ["q3", "q2", "q1", "q0"], 2) == [(["q0", "q2"], (10, 0.5)), (["q1", "q3"], (50, 0.6))]
    assert best_on(cells, ["q0", "q1", "q2", "q3"]) == (10, 0.5)  # a three-way tie: the smallest cell
    assert best_on(cells, ["q0", "q2", "q9"]) == (50, 0.6)  # q9: judged, retrieved by no run, so no value


def test_cli_cross_validation_and_its_errors(tmp_path, capsys):
    from ance_ir.fusion.__main__ import main
    from ance_ir.fusion.tune import cross_validated_interpolation

    a, b = _random_run(5), _random_run(6)
    qrels = {q: {d: 1 for d, _ in a[q][::4]} for q in a}
    write_run(a, tmp_path / "a.trec")
    write_run(b, tmp_path / "b.trec")
    (tmp_path / "qrels").write_text("".join(f"{q} 0 {d} {g}\n" for q, docs in qrels.items() for d, g in docs.items()))
    runs = ["--runs", str(tmp_path / "a.trec"), str(tmp_path / "b.trec"), "--method", "interpolation"]
    assert main([*runs, "--tune", str(tmp_path / "qrels"), "--folds", "2", "--normalization", "--hits", "9",
                 "--output", str(tmp_path / "cv.trec")]) == 0
    expected, alphas, _ = cross_validated_interpolation(a, b, qrels, 2, depth=1000, k=9, normalize=True)
    assert f"alpha of each of the 2 folds: {alphas[0]:g} {alphas[1]:g}" in capsys.readouterr().out
    assert {q: [d for d, _ in r] for q, r in read_run(tmp_path / "cv.trec").items()} == \
        {q: [d for d, _ in r] for q, r in expected.items()}
    with pytest.raises(ValueError, match="--folds needs --tune"):
        main([*runs, "--folds", "2", "--output", str(tmp_path / "x.trec")])
    assert not (tmp_path / "x.trec").exists()


def test_empty_runs_and_queries_without_hits():
    assert reciprocal_rank_fusion([{}, {}]) == {} and interpolate({}, {}, 0.5, 0.5) == {}
    assert reciprocal_rank_fusion([{"q": []}, {"p": [("d", 1.0)]}]) == {"q": [], "p": [("d", 1 / 61)]}
    assert interpolate({"q": []}, {"q": [("d", 1.0)]}, 0.5, 0.5) == {"q": [("d", 0.5)]}  # the empty side fills 0


def test_an_interpolation_flag_under_rrf_says_rrf_is_the_default_only_when_it_is(tmp_path):
    from ance_ir.fusion.__main__ import main

    runs = ["--runs", str(tmp_path / "a.trec"), str(tmp_path / "b.trec"), "--output", str(tmp_path / "f.trec")]
    with pytest.raises(ValueError, match=r"--alpha is a setting of --method interpolation, not of rrf \(the default "
                                         r"method\)$"):
        main([*runs, "--alpha", "0.3"])
    with pytest.raises(ValueError, match=r"--alpha is a setting of --method interpolation, not of rrf$"):
        main([*runs, "--method", "rrf", "--alpha", "0.3"])
    with pytest.raises(ValueError, match=r"--normalization is a setting of --method interpolation or average, not "
                                         r"of rrf \(the default method\)$"):
        main([*runs, "--normalization"])
