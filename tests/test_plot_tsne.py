"""Figure 1 (``python -m ance_ir.plot.tsne``): the passage groups by hand, the PNG, and a bad query id refused."""

from __future__ import annotations

import random

from conftest import assert_refused, run_main

from ance_ir.data import write_run
from ance_ir.encode.corpus_encoder import encode_corpus
from ance_ir.modeling import DenseEncoder
from ance_ir.plot.tsne import main, passage_groups


def test_groups_are_relevant_passages_and_the_rankings_top_unjudged_ones():
    docids = [f"d{i}" for i in range(1, 9)]
    groups = passage_groups(docids, ["d2", "d5", "d1", "d6"], ["d1", "d7", "d3", "d9"], {"d1": 2, "d2": 0, "d3": 1},
                            2, random.Random(0))
    assert groups["relevant"] == ["d1", "d3"] and groups["DR Neg"] == ["d5", "d6"]
    assert groups["BM25 Neg"] == ["d7"]  # d9 is not in the corpus
    assert len(groups["Rand Neg"]) == 2 and not set(groups["Rand Neg"]) & {"d1", "d2", "d3"}


def _index_args(toy, tmp_path) -> list[str]:
    """The toy corpus encoded by a tiny model, a BM25-like run, and the figure's flags for them."""
    index = tmp_path / "index"
    encoder = DenseEncoder.from_pretrained(toy / "bert-nodrop", pooling="mean")
    encode_corpus(toy / "corpus.jsonl", encoder, index, encoder_name=str(toy / "bert-nodrop"), show_progress=False)
    bm25 = tmp_path / "bm25.trec"
    write_run({q: [(f"d{i}", 10.0 - i) for i in range(1, 9)] for q in ("q1", "q2")}, bm25)
    return ["--index", str(index), "--topics", str(toy / "topics.tsv"), "--qrels", str(toy / "qrels.txt"),
            "--bm25-run", str(bm25), "--n", "2"]


def test_the_figure_is_drawn_and_bad_query_ids_are_refused(toy, tmp_path, capsys):
    args = _index_args(toy, tmp_path)
    code, err = run_main(main, *args, "--queries", "q1", "q2", "--output", str(tmp_path / "f.png"), capsys=capsys)
    assert code == 0, err
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"
    assert_refused(run_main(main, *args, "--queries", "q3", "--output", str(tmp_path / "g.png"), capsys=capsys),
                   "--bm25-run: has no query 'q3'", tmp_path / "g.png")


def test_saved_vectors_redraw_the_same_figure(toy, tmp_path, capsys):
    import numpy as np

    from ance_ir.index import load_dense_index, stored_vectors
    from ance_ir.plot.tsne import load_panels

    saved = tmp_path / "panels.npz"
    code, err = run_main(main, *_index_args(toy, tmp_path), "--queries", "q1", "q2", "--save-vectors", str(saved),
                         "--output", str(tmp_path / "a.png"), capsys=capsys)
    assert code == 0, err
    loaded = load_dense_index(tmp_path / "index")
    row = {d: i for i, d in enumerate(loaded.docids)}
    panels = load_panels(saved)
    assert [p.qid for p in panels] == ["q1", "q2"] and panels[0].docids["DR Neg"]
    for panel in panels:
        for name, docs in panel.docids.items():
            np.testing.assert_array_equal(panel.vectors[name], stored_vectors(loaded)[[row[d] for d in docs]])
    code, err = run_main(main, "--vectors", str(saved), "--output", str(tmp_path / "b.png"), capsys=capsys)
    assert code == 0, err
    assert (tmp_path / "b.png").read_bytes() == (tmp_path / "a.png").read_bytes()
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    assert_refused(run_main(main, "--vectors", str(tmp_path / "bad.npz"), "--output", str(tmp_path / "c.png"),
                            capsys=capsys), "not a vectors file", tmp_path / "c.png")
    refused = run_main(main, "--index", str(tmp_path / "index"), "--output", str(tmp_path / "c.png"), capsys=capsys)
    assert_refused(refused, "--index needs --topics, --qrels, --bm25-run, --queries", tmp_path / "c.png")
