"""Figure 3 (``python -m ance_ir.plot.scores``): overlaps and centred scores by hand, the PNG, the saved lines, bad
inputs refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from conftest import TOY_QRELS, assert_refused, run_main

from ance_ir.data import write_run
from ance_ir.encode.corpus_encoder import encode_corpus
from ance_ir.index import load_dense_index, stored_vectors
from ance_ir.modeling import DenseEncoder
from ance_ir.plot.scores import centred_scores, load_panels, main, overlap, unjudged


def test_overlap_counts_the_top_unjudged_passages_of_both_rankings():
    judged = {"d1": 2, "d2": 0}
    assert unjudged(["d1", "d3", "d2", "d4", "d5"], judged, 2) == ["d3", "d4"]
    # test negatives d3, d4; training negatives d4, d6 (d2 is judged, so not a negative)
    assert overlap(["d1", "d3", "d2", "d4", "d5"], ["d2", "d4", "d6", "d3"], judged, 2) == 0.5
    assert overlap(["d3"], ["d3"], judged, 2) == 1.0 and overlap([], ["d3"], judged, 2) == 0.0


def test_centred_scores_subtract_the_mean_score_over_the_corpus(toy, tmp_path):
    encoder = DenseEncoder.from_pretrained(toy / "bert-nodrop", pooling="mean")
    encode_corpus(toy / "corpus.jsonl", encoder, tmp_path / "index", encoder_name=str(toy / "bert-nodrop"),
                  show_progress=False)
    index = load_dense_index(tmp_path / "index")
    query = encoder.encode_queries(["toy words"])[0]
    scores, _ = index.search(query[None], 3)
    every = stored_vectors(index) @ query
    centred = centred_scores(scores[0], query, stored_vectors(index).mean(axis=0))
    np.testing.assert_allclose(centred, scores[0] - every.mean(), rtol=1e-5, atol=1e-5)


def index_and_negatives(toy: Path, tmp_path: Path) -> tuple[Path, Path]:
    """The toy corpus's dense index and a negatives run of every toy topic."""
    index = tmp_path / "index"
    encoder = DenseEncoder.from_pretrained(toy / "bert-nodrop", pooling="mean")
    encode_corpus(toy / "corpus.jsonl", encoder, index, encoder_name=str(toy / "bert-nodrop"), show_progress=False)
    negatives = tmp_path / "negatives.trec"
    write_run({q: [(f"d{i}", 10.0 - i) for i in range(1, 9)] for q in TOY_QRELS}, negatives)
    return index, negatives


def test_the_figure_is_drawn_and_a_negatives_run_without_a_topic_is_refused(toy, tmp_path, capsys):
    index, negatives = index_and_negatives(toy, tmp_path)
    args = ["--topics", str(toy / "topics.tsv"), "--qrels", str(toy / "qrels.txt"), "--top", "3", "--queries", "2"]
    code, err = run_main(main, *args, "--model", "A", str(index), str(negatives), "--model", "B", str(index),
                         str(negatives), "--output", str(tmp_path / "f.png"), capsys=capsys)
    assert code == 0, err
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"
    partial = tmp_path / "partial.trec"
    write_run({"q1": [("d1", 1.0)]}, partial)
    assert_refused(run_main(main, *args, "--model", "A", str(index), str(partial), "--output",
                            str(tmp_path / "g.png"), capsys=capsys), "has no query", tmp_path / "g.png")


def test_saved_lines_redraw_the_same_figure(toy, tmp_path, capsys):
    index, negatives = index_and_negatives(toy, tmp_path)
    saved = tmp_path / "lines.json"
    code, err = run_main(main, "--topics", str(toy / "topics.tsv"), "--qrels", str(toy / "qrels.txt"), "--top", "3",
                         "--model", "A", str(index), str(negatives), "--save-lines", str(saved), "--output",
                         str(tmp_path / "a.png"), capsys=capsys)
    assert code == 0, err
    [panel] = load_panels(saved)
    assert panel.label == "A" and panel.queries == len(TOY_QRELS) and all(len(v) == 3 for v in panel.lines.values())
    code, err = run_main(main, "--lines", str(saved), "--output", str(tmp_path / "b.png"), capsys=capsys)
    assert code == 0, err
    assert (tmp_path / "b.png").read_bytes() == (tmp_path / "a.png").read_bytes()
    (tmp_path / "bad.json").write_text('[{"label": "A"}]')
    assert_refused(run_main(main, "--lines", str(tmp_path / "bad.json"), "--output", str(tmp_path / "c.png"),
                            capsys=capsys), "not a lines file", tmp_path / "c.png")
    assert_refused(run_main(main, "--model", "A", str(index), str(negatives), "--output", str(tmp_path / "c.png"),
                            capsys=capsys), "--model needs --topics, --qrels", tmp_path / "c.png")
