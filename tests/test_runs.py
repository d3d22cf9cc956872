"""Run files read as columns: the pyarrow reader agrees with the line reader, or leaves the file to it."""

from __future__ import annotations

import gzip
import random

import pytest

from ance_ir.data import InputError
from ance_ir.data.runs import RunTable, read_plain_run, read_run, read_run_lines, read_run_table, write_run_table


def _plain_lines(seed: int) -> str:
    """Interleaved queries, tied and negative scores, scores and ranks as Python and Pyserini may spell them."""
    rng = random.Random(seed)
    spellings = [lambda x: f"{x:.6f}", repr, lambda x: f"{x:e}", lambda x: f"+{abs(x)}", lambda x: "-0.0",
                 lambda x: "3"]
    lines = []
    for q in rng.sample(range(40), 40):
        for d in rng.sample(range(500), rng.randint(1, 30)):
            score = rng.choice(spellings)(rng.uniform(-50, 50))
            lines.append(f"q{q % 7}{'x' * (q // 7)} Q0 doc-{d}#{q} {rng.choice(['1', '007', '-3'])} {score} tag")
    rng.shuffle(lines)
    return "\n".join(lines) + "\n\n"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_plain_files_are_read_as_columns_as_the_line_reader_reads_them(tmp_path, seed):
    path = tmp_path / "r.trec"
    path.write_text(_plain_lines(seed))
    assert read_plain_run(path) is not None
    expected = read_run_lines(path)
    assert read_run(path) == expected
    assert list(read_run(path)) == list(expected)  # queries in order of first appearance
    assert read_run_table(path).to_run() == expected
    zipped = tmp_path / "r.trec.gz"
    zipped.write_bytes(gzip.compress(path.read_bytes()))
    assert read_plain_run(zipped) is not None and read_run(zipped) == expected


@pytest.mark.parametrize(("text", "why"), [
    ("q1\tQ0\td1\t1\t2.5\tt\n", "tabs"),
    ("q1 Q0 d1 1 2.5 t\r\nq1 Q0 d2 2 1.5 t\r\n", "CRLF"),
    ("q1  Q0 d1 1 2.5 t\n", "two spaces"),
    (" q1 Q0 d1 1 2.5 t\n", "leading space"),
    ("q1 Q0 d1 1 2.5 t \n", "trailing space"),
    ("q1 Q0 d1 1 2.0 t\nq1 Q0  2 1.5 t\n", "six columns, one of them an empty docid"),
    ("q1 Q0 d1 1 2.0 t\n Q0 d3 1 1.0 t\n", "six columns, the first an empty qid"),
    ("q1 Q0 d1 1 2.0 \n", "six columns, the last an empty tag"),
    ("q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 1.0 ", "an empty tag at the end of the file"),
    ("q1 Q0 dé 1 2.5 t\n", "non-ASCII docid"),
    ("\ufeffq1 Q0 d1 1 2.5 t\n", "byte-order mark"),
    ("q1 Q0 d1 1 2.5 t\n   \nq1 Q0 d2 2 1.0 t\n", "a line of spaces"),
    ("q1 Q0 d1 1 1_000.5 t\n", "underscores, which float() reads"),
    ("q1 Q0 d1 1 2.5 t\nq1 Q0 d2 99999999999999999999 1.0 t\n", "a rank beyond int64"),
    ("q1 Q0 d1 1 nan t\n", "NaN"),
    ("q1 Q0 d1 1 inf t\n", "infinity"),
    ("q1 Q0 d1 1 2.5 t\nq1 Q0 d1 2 1.0 t\n", "a document twice"),
    ("q1 Q0 d1 1 2.5 t\nq1 Q0 d2 2 t\n", "five columns"),
    ("q1 Q0 d1 1.0 2.5 t\n", "a rank that is not an integer"),
    ("q1 Q0 d1 +1 2.5 t\n", "a rank with a plus sign, which int() reads"),
    ("\n\n", "no content lines"),
])
def test_other_files_go_to_the_line_reader(tmp_path, text, why):
    path = tmp_path / "r.trec"
    path.write_bytes(text.encode("utf-8"))
    assert read_plain_run(path) is None, why
    try:
        expected = read_run_lines(path)
    except InputError as e:
        with pytest.raises(InputError) as raised:
            read_run(path)
        assert str(raised.value) == str(e)
    else:
        assert read_run(path) == expected


def test_tables_are_written_as_python_formats_each_line(tmp_path, monkeypatch):
    rng = random.Random(0)
    values = [0.0, -0.0, 1e-7, -1e-7, 5e-7, 0.0078125, 123456789.123456789, -2.5, 1e15]
    run = {f"q{q}": [(f"d{i}", rng.choice([*values, rng.uniform(-1e3, 1e3)])) for i in range(rng.randint(1, 9))]
           for q in range(50)}
    expected = "".join(f"{q} Q0 {d} {rank} {score:.6f} tag\n" for q, hits in run.items()
                       for rank, (d, score) in enumerate(hits, start=1))
    monkeypatch.setattr("ance_ir.data.runs._WRITE_ROWS", 7)  # lines written in many slices
    write_run_table(RunTable.from_run(run), tmp_path / "r.trec", tag="tag")
    assert (tmp_path / "r.trec").read_text() == expected


def test_table_helpers():
    table = RunTable.from_run({"a": [("x", 3.0), ("y", 2.0), ("z", 1.0)], "b": [("x", 5.0)], "c": []})
    assert len(table) == 4 and table.queries() == 2
    assert table.ranks().tolist() == [1, 2, 3, 1]
    assert table.head(2).to_run() == {"a": [("x", 3.0), ("y", 2.0)], "b": [("x", 5.0)]}
    assert RunTable.from_run({}).to_run() == {}


def test_the_default_run_tag_is_the_file_name_less_compression_and_run_suffixes():
    from ance_ir.data import default_run_tag

    assert [default_run_tag(p) for p in ("runs/bm25.dl19.trec.gz", "runs/x.y.trec", "dense.txt", "a.run", "b.tsv",
                                         "plain", ".trec")] == ["bm25.dl19", "x.y", "dense", "a", "b.tsv", "plain",
                                                                ".trec"]
    with pytest.raises(ValueError, match="no whitespace"):
        default_run_tag("my run.trec")
    assert default_run_tag("runs/x.trec", "given") == "given"
    with pytest.raises(ValueError, match="no whitespace"):
        default_run_tag("runs/x.trec", "a tag")
