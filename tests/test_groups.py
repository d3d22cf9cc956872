"""Training groups in Tevatron's JSONL format: round trip, reproducible bytes, and every kind of bad line."""

from __future__ import annotations

import gzip
import json

import pytest

from ance_ir.data import GroupPassage, InputError, TrainingGroup, read_groups, write_groups

GROUPS = [
    TrainingGroup("q1", "cat on a mat", (GroupPassage("d1", "the cat sat on the mat", 12.5, "Cats"),),
                  (GroupPassage("d3", "a recipe", 3.25), GroupPassage("d8", score=-1.0))),
    TrainingGroup("q2", "how to bake bread", (GroupPassage("d3"), GroupPassage("d4", "flour")), ()),
    TrainingGroup("q3", "größe ☃", (GroupPassage("d5", score=0.1 + 0.2),), (GroupPassage("d6", "x\ny\t\"z\""),),
                  "train-runs/ce"),
]


@pytest.mark.parametrize("name", ["groups.jsonl", "groups.jsonl.gz"])
def test_round_trip_and_reproducible_bytes(tmp_path, name):
    first, second = tmp_path / "a" / name, tmp_path / "b" / name
    assert write_groups(first, GROUPS) == 3
    write_groups(second, list(GROUPS))
    assert first.read_bytes() == second.read_bytes()
    assert read_groups(first) == GROUPS
    assert sorted(p.name for p in first.parent.iterdir()) == [name]  # no temporary file left
    if name.endswith(".gz"):
        assert first.read_bytes()[:2] == b"\x1f\x8b"


def test_written_lines_omit_missing_fields(tmp_path):
    path = tmp_path / "groups.jsonl"
    write_groups(path, GROUPS)
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert lines[0] == {"query_id": "q1", "query": "cat on a mat",
                        "positive_passages": [{"docid": "d1", "title": "Cats", "text": "the cat sat on the mat",
                                               "score": 12.5}],
                        "negative_passages": [{"docid": "d3", "text": "a recipe", "score": 3.25},
                                              {"docid": "d8", "score": -1.0}]}
    assert lines[1]["positive_passages"][0] == {"docid": "d3"} and lines[1]["negative_passages"] == []
    assert "größe ☃" in path.read_text(encoding="utf-8")  # UTF-8, not \u escapes
    assert "scored_by" not in lines[0] and lines[2]["scored_by"] == "train-runs/ce"


def test_tevatron_lines_are_read(tmp_path):
    path = tmp_path / "tevatron.jsonl.gz"
    line = {"query_id": "7", "query": "q", "answers": ["x"], "extra": {"any": 1},
            "positive_passages": [{"docid": "10", "title": "T", "text": "pos"}],
            "negative_passages": [{"docid": "11", "title": "", "text": "neg", "score": 3}]}
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n\n")
    assert read_groups(path) == [TrainingGroup("7", "q", (GroupPassage("10", "pos", None, "T"),),
                                               (GroupPassage("11", "neg", 3.0, ""),))]


def test_non_finite_score_is_not_written(tmp_path):
    path = tmp_path / "groups.jsonl"
    bad = TrainingGroup("q", "x", (GroupPassage("d", score=float("nan")),))
    with pytest.raises(ValueError):
        write_groups(path, [GROUPS[0], bad])
    assert list(tmp_path.iterdir()) == []


def _line(**changes) -> str:
    obj = {"query_id": "q1", "query": "text", "positive_passages": [{"docid": "d1"}],
           "negative_passages": [{"docid": "d2", "score": 1.5}]}
    obj.update(changes)
    return json.dumps(obj)


GOOD = _line(query_id="q0")
BAD_LINES = {
    "malformed JSON": ("{broken", "malformed JSON"),
    "not an object": ("[1, 2]", "expected a JSON object"),
    "missing query_id": (json.dumps({"query": "x", "positive_passages": [], "negative_passages": []}),
                         'missing "query_id"'),
    "integer query_id": (_line(query_id=1), '"query_id" must be a string'),
    "missing query": (json.dumps({"query_id": "q1", "positive_passages": [{"docid": "d1"}],
                                  "negative_passages": []}), 'missing "query"'),
    "empty query id": (_line(query_id="  "), "empty query id"),
    "missing negatives": (json.dumps({"query_id": "q1", "query": "x", "positive_passages": [{"docid": "d1"}]}),
                          'missing "negative_passages"'),
    "positives not a list": (_line(positive_passages={"docid": "d1"}), '"positive_passages" must be a list'),
    "passage not an object": (_line(negative_passages=["d2"]), '"negative_passages" must hold JSON objects'),
    "missing docid": (_line(positive_passages=[{"text": "x"}]), 'non-string "docid"'),
    "integer docid": (_line(negative_passages=[{"docid": 2}]), 'non-string "docid"'),
    "text not a string": (_line(positive_passages=[{"docid": "d1", "text": 3}]), '"text" must be a string'),
    "unknown passage key": (_line(positive_passages=[{"docid": "d1", "socre": 1}]), "unknown key 'socre'"),
    "score not a number": (_line(negative_passages=[{"docid": "d2", "score": "1"}]), '"score" must be a number'),
    "NaN score": (_line().replace("1.5", "NaN"), '"score" is not a finite number'),
    "infinite score": (_line().replace("1.5", "-Infinity"), '"score" is not a finite number'),
    "score beyond a float": (_line().replace("1.5", "9" * 401), '"score" is not a finite number'),
    "query id with a space": (_line(query_id="q 1"), "query id 'q 1' contains whitespace"),
    "docid with a space": (_line(negative_passages=[{"docid": "d 2"}]), "docid 'd 2' contains whitespace"),
    "empty query": (_line(query=" "), "query 'q1' has no text"),
    "no positive": (_line(positive_passages=[]), "has no positive passage"),
    "docid twice": (_line(negative_passages=[{"docid": "d2"}, {"docid": "d1"}]),
                    "docid 'd1' appears twice in the group of query 'q1'"),
    "repeated query id": (_line(query_id="q0"), "query id 'q0' repeated (first on line 1)"),
    "scored_by not a string": (_line(scored_by=["bm25"]), '"scored_by" must be a string'),
}


@pytest.mark.parametrize("kind", list(BAD_LINES))
def test_bad_line_names_file_and_line(tmp_path, kind):
    line, message = BAD_LINES[kind]
    path = tmp_path / "groups.jsonl"
    path.write_text(f"{GOOD}\n\n{line}\n{GOOD.replace('q0', 'q9')}\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read_groups(path)
    assert caught.value.line == 3 and caught.value.path == str(path)
    assert str(caught.value).startswith(f"{path}:3: ") and message in str(caught.value)


def test_empty_and_missing_files(tmp_path):
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(InputError, match="no content lines"):
        read_groups(tmp_path / "empty.jsonl")
    with pytest.raises(InputError, match="no such file"):
        read_groups(tmp_path / "missing.jsonl")


def test_several_files_read_as_one_and_a_query_id_in_two_is_refused(tmp_path):
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl.gz"
    write_groups(first, GROUPS[:2])
    write_groups(second, GROUPS[2:])
    assert read_groups([first, second]) == GROUPS
    assert read_groups([second, first]) == [*GROUPS[2:], *GROUPS[:2]]
    write_groups(second, [GROUPS[2], GROUPS[0]])
    with pytest.raises(InputError) as caught:
        read_groups([first, second])
    assert (caught.value.path, caught.value.line) == (str(second), 2)
    assert f"query id 'q1' repeated (first on line 1 of {first})" in str(caught.value)
