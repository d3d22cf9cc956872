"""``python -m ance_ir.plot``: PNG curves from log.jsonl and refresh records; clear errors for non-runs."""

from __future__ import annotations

import json

import pytest

from ance_ir.cli import run_cli
from ance_ir.plot.__main__ import main as plot_main
from ance_ir.plot.curves import RunCurves, plot_runs
from ance_ir.train.layout import RunDir
from ance_ir.train.store import RefreshRecords

PNG = b"\x89PNG\r\n\x1a\n"


def _fake_run(folder, steps=20, refreshes=True, partial_last_line=False):
    """A run folder written the way the trainer writes one: training records, events, refresh records."""
    run = RunDir(folder)
    run.root.mkdir(parents=True)
    lines = [{"event": "start", "step": 0, "time": 0.0}]
    for step in range(1, steps + 1):
        lines.append({"step": step, "loss": 1.0 / step, "lr": 1e-5 * (1 - step / steps), "grad_norm": 2.0 + step,
                      "grad_norm_bottom": 0.5, "grad_norm_middle": 0.7, "grad_norm_top": 1.0 + step / 10,
                      "examples_per_s": 8.0, "steps_per_s": 1.0 + step % 2, "pause_s": 0.0,
                      "negatives_version": (step - 1) // 5 * 5, "staleness": (step - 1) % 5,
                      "inferencer_busy": step % 2 * 0.5, "time": float(step)})
    text = "".join(json.dumps(line) + "\n" for line in lines)
    if partial_last_line:
        text += '{"step": 21, "loss": 0.0'
    run.log.write_text(text)
    if refreshes:
        for step in (0, 10, 20):
            RefreshRecords(run.refresh).write({"step": step, "metrics": {"ndcg_cut_10": 0.3 + step / 100,
                                                                        "recip_rank": 0.5, "recall_100": 0.8}})
    return run.root


def test_cli_writes_every_figure(tmp_path, capsys):
    folder = _fake_run(tmp_path / "ance", partial_last_line=True)  # a run still writing its log
    with pytest.raises(SystemExit) as done:
        run_cli(plot_main, [str(folder)])
    assert done.value.code == 0
    names = ["loss.png", "grad_norms.png", "dev_metrics.png", "negatives.png"]
    assert capsys.readouterr().out.split() == [str(folder / "plots" / n) for n in names]
    for name in names:
        data = (folder / "plots" / name).read_bytes()
        assert data.startswith(PNG) and len(data) > 5000
    assert RunCurves.load(folder).series("staleness")[0] == list(range(1, 21))


def test_several_runs_in_one_figure_and_figures_without_data_are_skipped(tmp_path):
    runs = [_fake_run(tmp_path / "ance"), _fake_run(tmp_path / "dpr", refreshes=False)]
    written = plot_runs(runs, tmp_path / "out")
    assert [p.name for p in written] == ["loss.png", "grad_norms.png", "dev_metrics.png", "negatives.png"]
    alone = plot_runs([runs[1]], tmp_path / "dpr-only")
    assert [p.name for p in alone] == ["loss.png", "grad_norms.png", "negatives.png"]  # no refresh records


def test_errors(tmp_path, capsys):
    with pytest.raises(SystemExit) as done:
        run_cli(plot_main, [str(tmp_path / "nothing")])
    assert done.value.code == 2
    assert capsys.readouterr().err.strip() == f"error: {tmp_path / 'nothing' / 'log.jsonl'}: no such training log"
    folder = _fake_run(tmp_path / "bad")
    lines = RunDir(folder).log.read_text().splitlines()
    RunDir(folder).log.write_text("\n".join([*lines[:3], "{oops", *lines[3:]]) + "\n")
    with pytest.raises(ValueError, match=r"log.jsonl:4: malformed JSON"):
        plot_runs([folder], tmp_path / "out")
    empty = tmp_path / "empty"
    empty.mkdir()
    RunDir(empty).log.write_text('{"event": "start", "step": 0}\n')
    with pytest.raises(ValueError, match="no training records"):
        plot_runs([empty], tmp_path / "out")
    with pytest.raises(SystemExit):
        plot_main([str(folder), str(empty)])  # several runs need --output


def _write_run(path, run):
    """``run``'s ranked docids written as a TREC run (descending scores); the file's name."""
    from ance_ir.data import write_run

    write_run({q: [(d, float(len(docs) - rank)) for rank, d in enumerate(docs, start=1)] for q, docs in run.items()},
              path)
    return path.name


def test_overlap_curves_are_the_mean_share_of_testing_negatives_among_training_negatives(tmp_path, capsys):
    from ance_ir.plot.overlap import main as overlap_main

    (tmp_path / "qrels.txt").write_text("q1 0 j1 1\nq2 0 j2 2\n")
    runs = {
        # judged passages are skipped on both sides; the top 2 unjudged are compared
        "t100": _write_run(tmp_path / "t100.trec", {"q1": ["j1", "a", "b", "c"], "q2": ["x", "y", "z"]}),
        "t200": _write_run(tmp_path / "t200.trec", {"q1": ["c", "d"], "q2": ["y", "j2", "w"]}),
        "neg": _write_run(tmp_path / "neg.trec", {"q1": ["a", "c", "b"], "q2": ["y", "x"], "q3": ["a"]}),
    }
    (tmp_path / "curves.json").write_text(json.dumps({
        "fixed": [{"step": 200, "test": runs["t200"], "negatives": runs["neg"]},
                  {"step": 100, "test": runs["t100"], "negatives": runs["neg"]}],
        "previous": [{"step": 200, "test": runs["t200"], "negatives": runs["t100"]}]}))
    out = tmp_path / "fig.png"
    with pytest.raises(SystemExit) as done:
        run_cli(overlap_main, ["--curves", str(tmp_path / "curves.json"), "--qrels", str(tmp_path / "qrels.txt"),
                               "--top", "2", "--output", str(out)])
    assert done.value.code == 0
    table = [line.split("\t") for line in capsys.readouterr().out.splitlines()[1:-1]]
    # fixed, step 100: q1 {a, b} vs {a, c} -> 1/2; q2 {x, y} vs {y, x} -> 1
    #        step 200: q1 {c, d} vs {a, c} -> 1/2; q2 {y, w} vs {y, x} -> 1/2
    # previous, step 200 against t100: q1 {c, d} vs {a, b} -> 0; q2 {y, w} vs {x, y} -> 1/2
    assert table == [["fixed", "100", "0.7500"], ["fixed", "200", "0.5000"], ["previous", "200", "0.2500"]]
    assert out.read_bytes().startswith(PNG)


@pytest.mark.parametrize(("curves", "message"), [
    ("{bad", "malformed JSON"),
    ('{"a": []}', "expected a non-empty list"),
    ('{"a": [{"step": 1, "test": "r.trec", "negatives": "r.trec"}, {"step": 1, "test": "r.trec", "negatives": '
     '"r.trec"}]}', "a step is listed twice"),
    ('{"a": [{"step": 1, "test": "r.trec", "negatives": "n.trec"}]}', "the negatives run of"),
    ('{"a": [{"step": 1, "test": "r.trec", "negatives": "nope.trec"}]}', "nope.trec: no such file"),
])
def test_overlap_refuses_bad_curves_in_one_line(tmp_path, capsys, curves, message):
    from ance_ir.plot.overlap import main as overlap_main

    (tmp_path / "qrels.txt").write_text("q1 0 j1 1\n")
    _write_run(tmp_path / "r.trec", {"q1": ["a"]})
    _write_run(tmp_path / "n.trec", {"q2": ["a"]})
    (tmp_path / "curves.json").write_text(curves)
    with pytest.raises(SystemExit) as done:
        run_cli(overlap_main, ["--curves", str(tmp_path / "curves.json"), "--qrels", str(tmp_path / "qrels.txt"),
                               "--output", str(tmp_path / "fig.png")])
    err = capsys.readouterr().err.strip().splitlines()
    assert done.value.code == 2 and len(err) == 1 and message in err[0], err
    assert not (tmp_path / "fig.png").exists()
