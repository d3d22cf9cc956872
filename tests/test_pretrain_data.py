"""Pretraining data made from a corpus (``ance_ir.pretrain_data``): each source's rule on tiny hand-made corpora,
reproducibility from the seed, one-line refusals of corpora a source cannot use, the groups the CLI writes, and
short training runs through the trainer."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import assert_refused, run_main
from test_train_run import toy_config, training_records

from ance_ir.data import read_groups
from ance_ir.data.corpus import Passage
from ance_ir.pretrain_data import split_sentences
from ance_ir.pretrain_data.__main__ import main
from ance_ir.pretrain_data.spider import SpanPassage
from ance_ir.train import train
from ance_ir.train.dataset import DATA_SOURCES, TrainData
from ance_ir.train.settings import DataSection, LossSection

SEGMENTS = {  # two web documents in segments (#0 opens a document), and one without its opening segment
    "a#0_1": "Bread baking at home. Flour and water make dough.",
    "a#1_2": "Yeast makes the dough rise. Bake it for an hour.",
    "a#2_3": "Salt adds taste to the bread.",
    "b#0_4": "The stock market fell today.",
    "b#1_5": "Investors sold shares as markets dropped.",
    "c#1_6": "The roman empire had a long history. It fell in the west.",
}


def write_corpus(path: Path, passages: dict[str, str], **fields: dict[str, str]) -> Path:
    """A Pyserini JSONL corpus; ``fields``: further fields by name, docid -> value."""
    path.write_text("".join(json.dumps({"id": d, "contents": t, **{k: v[d] for k, v in fields.items() if d in v}})
                            + "\n" for d, t in passages.items()))
    return path


def load(name: str, corpus: Path, seed: int = 42, **options) -> TrainData:
    return DATA_SOURCES[name].from_settings(str(corpus), options, seed).load()


def examples(data: TrainData) -> list[tuple[str, str, str]]:
    """(query, positive docid, positive text) of every pair."""
    return [(data.queries[q], d, data.texts[d]) for q, d in data.pairs]


def test_sentences_end_at_stops_before_capitals_and_at_line_breaks_but_not_after_abbreviations():
    text = "Mr. Smith saw the U.S. Capitol! Was it big? It was built in 1800. the end\nA new line"
    assert split_sentences(text) == ["Mr. Smith saw the U.S. Capitol!", "Was it big?", "It was built in 1800. the end",
                                     "A new line"]
    assert split_sentences("no stop at all") == ["no stop at all"] and split_sentences(" ... \n") == []


def test_ict_query_is_one_sentence_absent_from_its_passage_unless_kept(tmp_path):
    corpus = write_corpus(tmp_path / "c.jsonl", SEGMENTS)
    dropped = load("ict", corpus, keep=0.0)
    assert len(dropped.pairs) == 3  # the passages with two sentences
    for query, docid, text in examples(dropped):
        source = next(d for d, t in SEGMENTS.items() if query in t)
        sentences = split_sentences(SEGMENTS[source])
        assert query in sentences and query not in text and text == " ".join(s for s in sentences if s != query)
        assert docid not in SEGMENTS and source in dropped.exclude[docid.split("/")[0]]
    assert all(query in text for query, _, text in examples(load("ict", corpus, keep=1.0)))
    titled = write_corpus(tmp_path / "t.jsonl", SEGMENTS, title={d: "Baking" for d in SEGMENTS})
    assert all(text.startswith("Baking [SEP] ") for _, _, text in examples(load("ict", titled)))


def test_bfs_query_comes_from_the_first_segment_and_the_positive_from_the_same_document(tmp_path):
    corpus = write_corpus(tmp_path / "c.jsonl", SEGMENTS)
    data = load("bfs", corpus)
    assert sorted(d for _, d, _ in examples(data)) == ["a#1_2", "a#2_3", "b#1_5"]  # c has no #0: no pair
    first = {"a": SEGMENTS["a#0_1"], "b": SEGMENTS["b#0_4"]}
    assert all(query in split_sentences(first[docid[0]]) for query, docid, _ in examples(data))
    qid = next(q for q, d in data.pairs if d == "a#1_2")
    assert data.exclude[qid] == {"a#0_1", "a#1_2", "a#2_3"}  # the document's passages are never its negatives
    by_field = write_corpus(tmp_path / "f.jsonl", {"p1": "Open one. Open two.", "p2": "Later text.", "p3": "Own."},
                            doc={"p1": "x", "p2": "x", "p3": "y"})
    pairs = examples(load("bfs", by_field, doc_field="doc"))
    assert [(q in ("Open one.", "Open two."), d) for q, d, _ in pairs] == [(True, "p2")]


def test_wlp_pairs_a_linked_page_opening_sentence_with_a_passage_of_the_linking_page(tmp_path):
    corpus = write_corpus(tmp_path / "c.jsonl", SEGMENTS)
    links = tmp_path / "links.tsv"
    links.write_text("c\tb\nb\ta\nzz\ta\n")  # c links to b, b to a; zz is no page
    data = load("wlp", corpus, links=str(links))
    pairs = examples(data)
    assert len(pairs) == 2
    assert pairs[0][0] == SEGMENTS["b#0_4"] and pairs[0][1] == "c#1_6"
    assert pairs[1][0] in split_sentences(SEGMENTS["a#0_1"]) and pairs[1][1] in ("b#0_4", "b#1_5")
    titled = write_corpus(tmp_path / "t.jsonl", {"p": "Rome was an empire.", "q": "Bread is made in Rome daily."},
                          title={"p": "Rome", "q": "Bread"})
    assert [(q, d) for q, d, _ in examples(load("wlp", titled))] == [("Rome was an empire.", "q")]


def test_spider_span_recurs_outside_shared_sentences_and_the_negative_lacks_it(tmp_path, capsys):
    passages = {
        "d#0_1": "Engineers tested the quantum flux capacitor today. Results were good.",
        "d#1_2": "The quantum flux capacitor powers the ship. Nothing else matters.",
        "d#2_3": "Crew members ate lunch on deck.",
    }
    corpus = write_corpus(tmp_path / "c.jsonl", passages)
    kept, removed = load("spider", corpus, remove=0.0, window=6), load("spider", corpus, remove=1.0, window=6)
    assert [d for _, d, _ in examples(kept)] == ["d#1_2", "d#0_1"]
    first = kept.queries[kept.pairs[0][0]]
    assert "quantum flux capacitor" in first and len(first.split()) == 6
    assert "flux" not in removed.queries[removed.pairs[0][0]]
    assert all(kept.negatives[q] == ["d#2_3"] for q, _ in kept.pairs)
    assert "d#2_3" not in kept.exclude[kept.pairs[0][0]]
    output = tmp_path / "spider.jsonl"
    code, err = run_main(main, "spider", "--corpus", str(corpus), "--option", "window=6", "--output", str(output),
                         "--with-text", capsys=capsys)
    assert code == 0, err
    assert {(n.docid, n.text) for g in read_groups(output) for n in g.negatives} == {("d#2_3", passages["d#2_3"])}
    # a sentence both passages hold (overlapping segments) is no recurring span; nor is a run of stopwords
    a = SpanPassage(Passage("d#0_1", passages["d#0_1"]), 2, 5)
    copy = SpanPassage(Passage("x", "Engineers tested the quantum flux capacitor today. And then it was over."), 2, 5)
    assert a.shared(copy) == [] and ("and", "then") not in copy.spans


def test_simcse_query_and_positive_are_the_same_text(tmp_path):
    data = load("simcse", write_corpus(tmp_path / "c.jsonl", SEGMENTS), max_words=4)
    assert len(data.pairs) == len(SEGMENTS)
    assert all(q == t and len(q.split()) == 4 for q, _, t in examples(data))


def test_contriever_crops_are_spans_of_one_passage(tmp_path):
    data = load("contriever", write_corpus(tmp_path / "c.jsonl", SEGMENTS), min_words=8)
    assert len(data.pairs) == 3  # the passages of at least 8 words
    for query, _, text in examples(data):
        source = next(t for t in SEGMENTS.values() if query in t and text in t)
        assert 1 <= len(query.split()) <= len(source.split()) // 2 + 1


@pytest.mark.parametrize("name", ["ict", "bfs", "spider", "simcse", "contriever"])
def test_pairs_are_drawn_from_the_seed(name, tmp_path):
    corpus = write_corpus(tmp_path / "c.jsonl", {**SEGMENTS, "a#3_7": "Home bread baking needs patience. Bake it."})
    assert examples(load(name, corpus)) == examples(load(name, corpus))
    if name in ("ict", "contriever"):
        assert any(examples(load(name, corpus, seed=s)) != examples(load(name, corpus)) for s in range(5))


@pytest.mark.parametrize(("source", "passages", "options", "message"), [
    ("ict", {"p": "One sentence only", "q": "Another one"}, [], "no ict training pairs: no passage has two sentences"),
    ("bfs", {"p": "One. Two.", "q": "Three. Four."}, [], "no document has two passages"),
    ("bfs", {"p": "One. Two."}, ["doc_field=doc"], "c.jsonl:1: no document id: missing or empty 'doc'"),
    ("spider", {"d#0": "Red apples grow.", "d#1": "Blue skies shine."}, [], "no two passages of one document share"),
    ("wlp", SEGMENTS, [], "no page mentions another page's title"),
    ("wlp", SEGMENTS, ["links=LINKS"], "links.tsv:2: expected 2 columns, found 1"),
    ("contriever", SEGMENTS, ["min_ratio=0.6", "max_ratio=0.2"], "--option min_ratio: need 0 < min_ratio <= max_ratio"),
])
def test_corpora_a_source_cannot_use_are_refused_in_one_line(source, passages, options, message, tmp_path, capsys):
    corpus = write_corpus(tmp_path / "c.jsonl", passages)
    (tmp_path / "links.tsv").write_text("a\tb\nc\n")
    output = tmp_path / "out.jsonl"
    args = [arg for o in options for arg in ("--option", o.replace("LINKS", str(tmp_path / "links.tsv")))]
    assert_refused(run_main(main, source, "--corpus", str(corpus), "--output", str(output), *args, capsys=capsys),
                   message, output)


def test_written_groups_train_the_same_pairs_from_the_groups_source(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "c.jsonl", SEGMENTS)
    output = tmp_path / "ict.jsonl"
    assert run_main(main, "ict", "--corpus", str(corpus), "--output", str(output), "--show", "2", capsys=capsys)[0] == 0
    groups = read_groups(output)
    source = load("ict", corpus)
    assert [(g.query, g.positives[0].text) for g in groups] == [(q, t) for q, _, t in examples(source)]
    config = SimpleNamespace(data=DataSection(source="groups", corpus=str(corpus), groups=str(output)),
                             loss=LossSection(), seed=42)
    reread = DATA_SOURCES["groups"](config).load()
    assert examples(reread) == examples(source) and reread.docids == source.docids


def test_the_cli_counts_passages_and_pairs_past_the_delay_unless_quiet(tmp_path, monkeypatch, capsys):
    corpus = write_corpus(tmp_path / "c.jsonl", SEGMENTS)
    monkeypatch.setattr("ance_ir.data.resume.BAR_DELAY_S", 0)
    code, err = run_main(main, "ict", "--corpus", str(corpus), "--output", str(tmp_path / "a.jsonl"), capsys=capsys)
    assert code == 0 and f"read c.jsonl: {len(SEGMENTS)}passage [" in err
    assert f"ict pairs: 100%|██████████| {len(SEGMENTS)}/{len(SEGMENTS)}" in err
    code, err = run_main(main, "ict", "--corpus", str(corpus), "--output", str(tmp_path / "b.jsonl"), "--quiet",
                         capsys=capsys)
    assert code == 0 and "read c.jsonl" not in err and "ict pairs" not in err
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()


@pytest.mark.parametrize(("name", "settings"), [("simcse", {}), ("spider", {"negatives": "groups", "n_negatives": 1})])
def test_a_short_pretraining_run_trains_through_the_trainer(name, settings, toy, tmp_path):
    corpus = write_corpus(tmp_path / "c.jsonl", {
        "d#0_1": "the cat sat on the mat. dogs chase cats in the park.",
        "d#1_2": "many dogs chase cats. the history of the roman empire.",
        "d#2_3": "a recipe for baking bread at home.",
        "e#0_4": "the stock market fell sharply today. investors sold shares.",
    })
    run = tmp_path / "run"
    train(toy_config(toy, run, **{"data_source": name, "corpus": str(corpus), "train_topics": None,
                                  "train_qrels": None, "eval_topics": None, "eval_qrels": None, "refresh_every": 0,
                                  "negatives": "inbatch", "n_negatives": 0, "batch_size": 2, "max_steps": 3,
                                  **settings, "in_batch": True}))
    losses = [r["loss"] for r in training_records(run)]
    assert len(losses) == 3 and all(loss > 0 for loss in losses)
    assert (run / "final").is_dir()


def test_qgen_pairs_each_generated_query_with_its_passage_and_writes_topics_and_qrels(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "c.jsonl", SEGMENTS)
    queries = tmp_path / "generated.jsonl"
    queries.write_text(json.dumps({"docid": "a#0_1", "queries": ["how to bake  bread", "", "flour dough"]}) + "\n"
                       + json.dumps({"docid": "b#0_4", "queries": ["stock market fall"]}) + "\n")
    data = load("qgen", corpus, queries=str(queries))
    assert [(q, d) for q, d, _ in examples(data)] == [("how to bake bread", "a#0_1"), ("flour dough", "a#0_1"),
                                                      ("stock market fall", "b#0_4")]
    assert data.exclude["qgen-0"] == {"a#0_1"}  # the passage's other queries never meet it as a negative
    assert [q for q, _, _ in examples(load("qgen", corpus, queries=str(queries), per_passage=1))] == \
        ["how to bake bread", "stock market fall"]
    out = tmp_path / "qgen"
    code, err = run_main(main, "qgen", "--corpus", str(corpus), "--option", f"queries={queries}", "--output",
                         str(out.with_suffix(".jsonl")), "--topics-out", str(out.with_suffix(".tsv")),
                         "--qrels-out", str(out.with_suffix(".qrels")), capsys=capsys)
    assert code == 0, err
    assert out.with_suffix(".tsv").read_text().splitlines()[0] == "qgen-0\thow to bake bread"
    assert out.with_suffix(".qrels").read_text().splitlines()[2] == "qgen-2 0 b#0_4 1"


@pytest.mark.parametrize(("content", "message"), [
    ('{"docid": "zz", "queries": ["q"]}\n', "generated.jsonl: passage 'zz' is not in the corpus"),
    ('{"docid": "a#0_1", "queries": "q"}\n', 'generated.jsonl:1: "queries" must be a list of strings'),
    ('{"docid": "a#0_1", "queries": []}\n{"docid": "a#0_1", "queries": []}\n', "generated.jsonl:2: passage "
                                                                                 "'a#0_1' is listed twice"),
])
def test_bad_generated_queries_are_refused_in_one_line(content, message, tmp_path, capsys):
    corpus = write_corpus(tmp_path / "c.jsonl", SEGMENTS)
    (tmp_path / "generated.jsonl").write_text(content)
    output = tmp_path / "out.jsonl"
    assert_refused(run_main(main, "qgen", "--corpus", str(corpus), "--option",
                            f"queries={tmp_path / 'generated.jsonl'}", "--output", str(output), capsys=capsys),
                   message, output)
