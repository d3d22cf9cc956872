"""QA answer coverage: DPR's matching (checked against Pyserini's copy of DPR's code), answers files, accuracy@k."""

from __future__ import annotations

import json
import random

import pytest
from conftest import run_here

from ance_ir.data import InputError, Passage, write_corpus, write_run
from ance_ir.eval.__main__ import main as eval_main
from ance_ir.eval.answers import (
    accuracy_per_query,
    dpr_tokens,
    has_answer,
    normalize_answer,
    passage_texts,
    read_answers,
)

ALPHABET = list("abcXYZ019 .,-'\"!?()/") + ["é", "e\u0301", "ß", "İ", "Ωμ", "Жж", "北京", "\u00a0", "\u2009", "\t",
                                              "\n", "\u200b", "\u00ad", "🙂", "ﬁ", "٣", "½", "$", "€", "_", "°"]


def _random_text(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(n))


def test_tokens_and_matching_agree_with_dprs_code():
    from pyserini.eval.evaluate_dpr_retrieval import SimpleTokenizer, _normalize, has_answers

    tokenizer = SimpleTokenizer()
    rng = random.Random(31)
    for _ in range(300):
        text = _random_text(rng, 40)
        assert dpr_tokens(text) == tokenizer.tokenize(_normalize(text)).words(uncased=True), repr(text)
    matches = 0
    for _ in range(600):
        text = _random_text(rng, 30)
        answers = [_random_text(rng, rng.randint(1, 3)) for _ in range(2)]
        answers = [a for a in answers if dpr_tokens(a)] or ["a"]
        ours, theirs = has_answer(answers, text), has_answers(text, answers, tokenizer)
        assert ours == theirs, (text, answers)
        matches += ours
    assert 30 < matches < 570  # both outcomes were exercised


def test_dpr_and_kilt_matching():
    assert has_answer(["10"], "It took 10 years.")
    assert not has_answer(["1"], "It took 10 years.")  # whole tokens only
    assert has_answer(["1"], "It took 10 years.", match="kilt")  # KILT: plain substrings
    assert has_answer(["Café"], "the CAFE\u0301 opened")  # NFD on both sides, lower case
    assert has_answer(["U.S."], "the u.s. army") and not has_answer(["U.S."], "the us army")
    assert has_answer(["U.S."], "the us army", match="kilt")
    assert has_answer(["the Beatles"], "beatles!", match="kilt") and not has_answer(["the Beatles"], "beatles!")


@pytest.mark.parametrize(("raw", "normal"), [
    ("The Beatles!", "beatles"), ("  A   cat's\ttale ", "cats tale"), ("an apple-pie", "applepie"),
    ("Theatre", "theatre"), ("THE END.", "end"),
])
def test_normalize_answer(raw, normal):
    assert normalize_answer(raw) == normal


def test_read_answers_jsonl_and_tsv(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"qid": 1, "answers": ["x", "y"], "question": "?"}\n\n'
                                      '{"qid": "q2", "answers": ["z"]}\n')
    assert read_answers(tmp_path / "a.jsonl") == {"1": ["x", "y"], "q2": ["z"]}
    (tmp_path / "a.tsv").write_text("1\tx\ty\nq2\tz\n")
    assert read_answers(tmp_path / "a.tsv") == {"1": ["x", "y"], "q2": ["z"]}
    (tmp_path / "sniffed").write_text('{"qid": "3", "answers": ["w"]}\n')
    assert read_answers(tmp_path / "sniffed") == {"3": ["w"]}


@pytest.mark.parametrize(("name", "content", "message"), [
    ("a.jsonl", '{"qid": "1", "answers": ["x"]}\n{"qid": "1", "answers": ["y"]}\n',
     "a.jsonl:2: query id '1' repeated (first on line 1)"),
    ("a.jsonl", '{"qid": "1", "answers": ["x"]}\n{"qid": "2", "answers": ["x"\n', "a.jsonl:2: malformed JSON"),
    ("a.jsonl", '{"qid": "1", "answers": "x"}\n', 'a.jsonl:1: "answers" must be a list of strings'),
    ("a.jsonl", '{"qid": "1", "answers": []}\n', "a.jsonl:1: query '1' has no answers"),
    ("a.jsonl", '{"answers": ["x"]}\n', 'a.jsonl:1: missing or empty "qid"'),
    ("a.jsonl", '{"qid": "1", "answers": ["x", " "]}\n', "a.jsonl:1: query '1': answer 2 (' ') is empty"),
    ("a.tsv", "1\tx\n2\n", "a.tsv:2: query '2' has no answers"),
    ("a.tsv", "1\tx\n\t y\n", "a.tsv:2: empty query id"),
    ("a.tsv", "1\tx\t\n", "a.tsv:1: query '1': answer 2 ('') is empty"),
])
def test_read_answers_errors(tmp_path, name, content, message):
    (tmp_path / name).write_text(content)
    with pytest.raises(InputError) as error:
        read_answers(tmp_path / name)
    assert str(error.value).startswith(f"{tmp_path}/{message}")


def test_kilt_empty_answer_is_an_error(tmp_path):
    (tmp_path / "a.tsv").write_text("1\tThe\n")
    assert read_answers(tmp_path / "a.tsv") == {"1": ["The"]}
    with pytest.raises(InputError, match="answer 1 .* is empty once normalised"):
        read_answers(tmp_path / "a.tsv", match="kilt")


@pytest.fixture()
def qa(tmp_path):
    passages = [Passage("p1", "Paris is the capital of France.", "Paris"),
                Passage("p2", "The Eiffel Tower was finished in 1889."),
                Passage("p3", "Berlin is in Germany."),
                Passage("p4", "Nothing to see here.", "Paris 1889")]  # titles are not matched
    write_corpus(passages, tmp_path / "corpus.jsonl")
    answers = {"capital": ["Paris"], "tower": ["1889", "eighteen eighty-nine"], "german": ["Berlin"],
               "none": ["Madrid"], "unranked": ["Paris"]}
    with open(tmp_path / "answers.jsonl", "w") as f:
        for qid, strings in answers.items():
            f.write(json.dumps({"qid": qid, "answers": strings}) + "\n")
    run = {"capital": [("p1", 3.0), ("p2", 2.0)],
           "tower": [("p4", 9.0), ("p3", 8.0), ("p1", 7.0), ("p2", 6.0)],
           "german": [("p2", 5.0), ("p4", 4.0)],
           "none": [("p1", 1.0), ("p2", 0.5), ("p3", 0.2)]}
    write_run(run, tmp_path / "run.trec")
    return tmp_path, answers, run


def test_a_dpr_wikipedia_title_line_is_not_matched(tmp_path):
    corpus = tmp_path / "wiki.jsonl"
    corpus.write_text(json.dumps({"id": "1", "contents": '"Paris"\nThe capital of France.'}) + "\n"
                      + json.dumps({"id": "2", "contents": 'He said "hi"\nParis is far.'}) + "\n")
    texts = passage_texts(corpus, {"1", "2"})
    assert "paris" not in texts["1"] and texts["1"].split()[:2] == ["the", "capital"]  # as Pyserini's split("\n")[1]
    assert "paris" in texts["2"]  # a first line that is no quoted title stays


def test_accuracy_by_hand(qa):
    tmp, answers, run = qa
    texts = passage_texts(tmp / "corpus.jsonl", {"p1", "p2", "p3", "p4"})
    per_query = accuracy_per_query(answers, run, texts, (1, 2, 4, 100))
    assert per_query == {
        "capital": {"accuracy@1": 1.0, "accuracy@2": 1.0, "accuracy@4": 1.0, "accuracy@100": 1.0},
        "tower": {"accuracy@1": 0.0, "accuracy@2": 0.0, "accuracy@4": 1.0, "accuracy@100": 1.0},
        "german": {"accuracy@1": 0.0, "accuracy@2": 0.0, "accuracy@4": 0.0, "accuracy@100": 0.0},
        "none": {"accuracy@1": 0.0, "accuracy@2": 0.0, "accuracy@4": 0.0, "accuracy@100": 0.0},
        "unranked": {"accuracy@1": 0.0, "accuracy@2": 0.0, "accuracy@4": 0.0, "accuracy@100": 0.0},
    }
    with pytest.raises(InputError, match="run: document 'p2' .query 'capital'. is not in corpus"):
        accuracy_per_query(answers, run, {"p1": texts["p1"]}, (2,))


def test_cli_answers(qa, capsys):
    tmp, *_ = qa
    base = ["--answers", str(tmp / "answers.jsonl"), "--corpus", str(tmp / "corpus.jsonl"), "--run",
            str(tmp / "run.trec")]
    assert eval_main([*base, "--k", "1", "4", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out) == {"accuracy@1": pytest.approx(1 / 5), "accuracy@4": pytest.approx(2 / 5)}
    assert captured.err == (f"warning: {tmp / 'run.trec'}: 1 of 5 questions have no ranking in the run and count "
                            "as misses\n")
    assert eval_main(base) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["metric", "5", "questions"]
    assert [line.split()[0] for line in lines[1:]] == ["accuracy@1", "accuracy@5", "accuracy@20", "accuracy@100"]
    assert eval_main([*base, "--run", str(tmp / "run.trec"), "--k", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["comparisons"][0]["t_test_p"] == 1.0 and out["runs"][1]["means"] == {"accuracy@4": 0.4}


def test_cli_answers_counts_the_corpus_past_the_delay_unless_quiet(qa, monkeypatch, capsys):
    tmp, *_ = qa
    base = ["--answers", str(tmp / "answers.jsonl"), "--corpus", str(tmp / "corpus.jsonl"), "--run",
            str(tmp / "run.trec"), "--json"]
    monkeypatch.setattr("ance_ir.data.resume.BAR_DELAY_S", 0)
    assert eval_main(base) == 0
    shown = capsys.readouterr()
    assert "read corpus: " in shown.err
    assert eval_main([*base, "--quiet"]) == 0
    quiet = capsys.readouterr()
    assert "read corpus" not in quiet.err and quiet.out == shown.out
    with pytest.raises(SystemExit):
        eval_main(["--qrels", str(tmp / "answers.jsonl"), "--run", str(tmp / "run.trec"), "--quiet"])
    assert "--quiet goes with --answers" in capsys.readouterr().err


def test_cli_answers_errors(qa):
    tmp, *_ = qa
    write_run({"capital": [("p1", 1.0), ("p9", 0.5)]}, tmp / "bad.trec")

    def cli(*argv):
        return run_here("ance_ir.eval", *argv)

    result = cli("--answers", str(tmp / "answers.jsonl"), "--corpus", str(tmp / "corpus.jsonl"), "--run",
                 str(tmp / "bad.trec"))
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (f"error: {tmp / 'bad.trec'}: document 'p9' (query 'capital') is not "
                                              f"in {tmp / 'corpus.jsonl'}")
    (tmp / "broken.tsv").write_text("q1\tParis\nq1\tRome\n")
    result = cli("--answers", str(tmp / "broken.tsv"), "--corpus", str(tmp / "corpus.jsonl"), "--run",
                 str(tmp / "run.trec"))
    assert result.returncode == 2
    assert result.stderr == f"error: {tmp / 'broken.tsv'}:2: query id 'q1' repeated (first on line 1)\n"
    for argv in (["--answers", str(tmp / "answers.jsonl"), "--run", str(tmp / "run.trec")],
                 ["--answers", str(tmp / "answers.jsonl"), "--corpus", "c", "--run", "r", "--metrics", "map"],
                 ["--answers", str(tmp / "answers.jsonl"), "--corpus", "c", "--run", "r", "--relevance-level", "2"],
                 ["--qrels", "q", "--run", "r", "--k", "5"],
                 ["--qrels", "q", "--run", "r", "--seed", "3"]):  # a setting of comparing runs, with one run
        result = cli(*argv)
        assert result.returncode == 2 and result.stderr.startswith("error: ")
        assert result.stderr.endswith("(see python -m ance_ir.eval --help)\n") and result.stderr.count("\n") == 1
