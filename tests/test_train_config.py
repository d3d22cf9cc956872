"""TrainConfig: YAML/JSON files, flag overrides, errors naming file and line, the saved config, resume checks."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from ance_ir.cli import run_cli
from ance_ir.data import InputError
from ance_ir.train.__main__ import main as train_main
from ance_ir.train.arguments import TrainConfig, build_config, check_resumable, parse_args

REQUIRED = "output: runs/x\ncorpus: c.jsonl\ntrain_topics: t.tsv\ntrain_qrels: q.txt\n"
CONFIGS = Path(__file__).resolve().parent.parent / "configs"


def _file(tmp_path, text, name="train.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_yaml_then_flags(tmp_path):
    path = _file(tmp_path, REQUIRED + "lr: 1e-5\nbatch_size: 16\nin_batch: true\nmax_steps: 100\n")
    config, resume = parse_args(["--config", str(path), "--batch-size", "4", "--no-in-batch", "--max-steps",
                                 "none", "--temperature", "0.05"])
    assert not resume
    assert config.optim.lr == 1e-5 and isinstance(config.optim.lr, float)  # PyYAML reads 1e-5 as a string
    assert config.task.batch_size == 4 and not config.task.in_batch and config.optim.max_steps is None
    assert config.loss.temperature == 0.05 and config.output == "runs/x"
    assert config.negatives.name == "ance" and config.task.n_negatives == 1  # the paper's pairwise setting by default


def test_json_config_and_round_trip(tmp_path):
    path = _file(tmp_path, json.dumps({"output": "o", "corpus": "c", "train_topics": "t", "train_qrels": "q",
                                       "negatives": "dpr", "pooling": "mean", "normalize": True}), "c.json")
    config = build_config(path, {})
    assert config.task.in_batch and config.model.overrides() == {"pooling": "mean", "normalize": True}
    config.save(tmp_path / "config.json")
    assert TrainConfig.load(tmp_path / "config.json") == config


@pytest.mark.parametrize(("text", "line", "message"), [
    (REQUIRED + "learning_rate: 1e-5\n", 5, "learning_rate: unknown setting"),
    (REQUIRED + "batch_size: 8\nbatchsize: 4\n", 6, "did you mean 'batch_size'"),
    (REQUIRED + "batch_size: many\n", 5, "batch_size: must be an integer"),
    (REQUIRED + "in_batch: maybe\n", 5, "in_batch: must be true or false"),
    (REQUIRED + "\nnegatives: hard\n", 6,
     "negatives.name: must be one of random, inbatch, bm25, dpr, bm25-rand, ance, static"),
    (REQUIRED + "precision: fp8\n", 5, "precision: must be one of fp32, bf16, fp16"),
    (REQUIRED + "negative_exclude_grade: 3\n", 5, "must not exceed min_positive_grade"),
    (REQUIRED + "lr: [1\n", 5, "not valid YAML"),  # the unclosed list, not the end of file
    (REQUIRED + "lr: 1e-5\nseed: 1\nlr: 2e-5\n", 7, "'lr' given twice \\(first on line 5\\)"),
    (REQUIRED + "optim: {lr: 2e-5}\nlr: 1e-5\n", 6, "'optim.lr' given twice \\(first on line 5\\)"),
    ("- a\n- b\n", 1, "expected a mapping"),
])
def test_file_errors_name_file_and_line(tmp_path, text, line, message):
    path = _file(tmp_path, text)
    with pytest.raises(InputError, match=message) as error:
        build_config(path, {})
    assert str(error.value).startswith(f"{path}:{line}: ")


def test_none_clears_a_list_setting_from_a_flag_or_set(tmp_path):
    from ance_ir.train.arguments import parse_args

    given = ["--config", str(_file(tmp_path, REQUIRED + "data: {groups: [a.jsonl, b.jsonl]}\n"))]
    with pytest.raises(InputError, match="data.groups: is set"):  # the qrels source reads no groups
        parse_args(given)
    for clear in (["--groups", "none"], ["--set", "data.groups=null"]):
        assert parse_args([*given, *clear])[0].data.groups == []


def test_a_section_with_every_setting_commented_out_sets_nothing(tmp_path):
    empty = build_config(_file(tmp_path, REQUIRED + "optim:\n  # lr: 2.0e-5\n"), {})
    assert empty == build_config(_file(tmp_path, REQUIRED), {})


def test_a_file_takes_qualified_names_as_set_writes_them(tmp_path):
    dotted = build_config(_file(tmp_path, REQUIRED + "task.batch_size: 8\noptim.lr: 2.0e-5\n"), {})
    nested = build_config(_file(tmp_path, REQUIRED + "task: {batch_size: 8}\noptim: {lr: 2.0e-5}\n"), {})
    assert dotted == nested and dotted.task.batch_size == 8
    with pytest.raises(InputError, match="task.batchsize: unknown setting; did you mean 'task.batch_size'") as error:
        build_config(_file(tmp_path, REQUIRED + "task.batchsize: 8\n"), {})
    assert ":5: " in str(error.value)
    for key in ("task.foo.bar", "task."):
        with pytest.raises(InputError, match="unknown setting"):
            build_config(_file(tmp_path, REQUIRED + f"{key}: 1\n"), {})
        with pytest.raises(ValueError, match=f"^--set {key}: unknown setting"):
            build_config(None, {key: 1})


def test_flag_errors_name_the_flag(tmp_path):
    path = _file(tmp_path, REQUIRED)
    with pytest.raises(ValueError, match="^--lr: optim.lr: must be a number"):
        parse_args(["--config", str(path), "--lr", "fast"])
    with pytest.raises(ValueError, match="^--set optim.lr: must be a number"):  # the setting named once
        parse_args(["--config", str(path), "--set", "optim.lr=fast"])
    with pytest.raises(ValueError, match="^--set optim.lrr: unknown setting; did you mean 'optim.lr'\\?$"):
        parse_args(["--config", str(path), "--set", "optim.lrr=1"])
    with pytest.raises(ValueError, match="^--set loss.name: must be one of .*, got 'kll' \\(did you mean 'kl'"):
        parse_args(["--config", str(path), "--set", "loss.name=kll"])
    with pytest.raises(ValueError, match="refresh.mode: must be one of async, sync"):
        parse_args(["--config", str(path), "--refresh-mode", "later"])
    with pytest.raises(ValueError, match="refresh.precision: must be one of auto, fp32, bf16, fp16, int8"):
        parse_args(["--config", str(path), "--refresh-precision", "fp64"])
    with pytest.raises(ValueError, match="passage_buckets: must be at least 1, got 0"):
        parse_args(["--config", str(path), "--passage-buckets", "0"])
    with pytest.raises(ValueError, match="data.corpus: is required"):
        parse_args(["--output", "x", "--train-topics", "t", "--train-qrels", "q"])
    with pytest.raises(ValueError, match="max_staleness.*at least refresh.every"):
        parse_args(["--config", str(path), "--max-staleness", "5", "--refresh-every", "10"])


def test_cli_reports_bad_input_in_one_line(tmp_path, capsys):
    path = _file(tmp_path, REQUIRED.replace("c.jsonl", str(tmp_path / "missing.jsonl"))
                 .replace("runs/x", str(tmp_path / "run")))
    with pytest.raises(SystemExit) as done:
        run_cli(train_main, ["--config", str(path), "--device", "cpu"])
    assert done.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: ") and "missing.jsonl" in err[-1]


GROUPS = "output: runs/x\ncorpus: c.jsonl\ndata: {source: groups, groups: g.jsonl}\n"


@pytest.mark.parametrize(("text", "line", "setting", "reader"), [
    (REQUIRED + "task: cross-encoder\nnegatives: bm25\nrefresh: {every: 0}\n", 7, "refresh.every",
     "task 'cross-encoder' neither refreshes nor evaluates"),
    ("output: o\ncorpus: c\ntask: mlm\ndata: {source: corpus}\nrefresh: {hits: 10}\n", 5, "refresh.hits",
     "task 'mlm' neither refreshes"),
    (REQUIRED + "task: generator\nnegatives: bm25\n", 6, "negatives.name", "a generator is trained on \\(passage, "
     "query\\) pairs alone, without negatives"),
    (REQUIRED + "task: mlm\nnegatives: bm25\n", 6, "negatives.name", "task 'mlm' samples no negatives"),
    (REQUIRED + "task: {name: deepct, n_negatives: 3}\n", 5, "task.n_negatives", "task 'deepct' samples no negatives"),
    (REQUIRED + "task: {name: adore, index: idx}\nnegatives: {denoise_above: 3.0}\n", 6, "negatives.denoise_above",
     "ADORE's negatives are each query's retrieved passages"),
    (REQUIRED + "task: generator\nloss: {temperature: 0.05}\n", 6, "loss.temperature",
     "task 'generator' trains with its own loss \\(the query tokens' cross-entropy\\)"),
    (REQUIRED + "negatives: {name: bm25, file: n.tsv}\n", 5, "negatives.file", "sampler 'bm25' does not use it"),
    (REQUIRED + "negatives: {name: static, file: n.tsv, bm25_index: idx}\n", 5, "negatives.bm25_index",
     "sampler 'static'"),
    (REQUIRED + "negatives: {name: random, depth: 50}\n", 5, "negatives.depth", "sampler 'random'"),
    (REQUIRED + "groups: g.jsonl\n", 5, "data.groups", "data source 'qrels' does not read it"),
    (GROUPS + "min_positive_grade: 2\n", 4, "data.min_positive_grade", "data source 'groups'"),
    (GROUPS + "train_topics: t.tsv\n", 4, "data.topics", "data source 'groups'"),
    (GROUPS + "negative_exclude_grade: 2\n", 4, "data.negative_exclude_grade", "the groups source excludes judged "
     "passages by data.qrels, which is not set"),
    ("output: o\ncorpus: c\ndata: ict\ntrain_qrels: q.txt\nnegatives: inbatch\n", 4, "data.qrels",
     "data source 'ict'"),
    ("output: o\ncorpus: c\ntask: {name: mlm, passage_buckets: 2}\ndata: corpus\n", 3, "task.passage_buckets",
     "task 'mlm' does not split its passages"),
    (REQUIRED + "task: {name: splade, passage_buckets: 2}\nnegatives: bm25\n", 5, "task.passage_buckets",
     "task 'splade'"),
    # not asked for its file: the static sampler checks that only for a task that samples negatives
    ("output: o\ncorpus: c\ntask: mlm\ndata: corpus\nnegatives: static\n", 5, "negatives.name", "task 'mlm'"),
])
def test_a_setting_no_component_reads_is_refused(tmp_path, text, line, setting, reader):
    path = _file(tmp_path, text)
    with pytest.raises(InputError, match=f"^{path}:{line}: {setting}: is set .* but not used: {reader}"):
        build_config(path, {})


def test_settings_read_or_at_their_default_in_a_file_pass_and_a_flag_for_an_unused_one_does_not(tmp_path):
    for text in (REQUIRED + "refresh: {every: 0}\n",  # contrastive refreshes
                 REQUIRED + "negatives: {name: bm25, bm25_index: idx, depth: 50}\n",
                 REQUIRED + "negatives: {name: static, file: n.tsv}\n",
                 GROUPS + "train_qrels: q.txt\nnegative_exclude_grade: 2\n",
                 REQUIRED + "task: cross-encoder\nnegatives: bm25\nrefresh: {every: 500, mode: async}\n"):
        build_config(_file(tmp_path, text), {})
    cross = str(_file(tmp_path, REQUIRED + "task: cross-encoder\nnegatives: bm25\n", "cross.yaml"))
    for value in ("0", "500"):  # a flag is refused at the default too
        with pytest.raises(ValueError, match=f"^--refresh-every: refresh.every: is set \\({value}\\) but not used: "
                                             "task 'cross-encoder'"):
            parse_args(["--config", cross, "--refresh-every", value])
    with pytest.raises(ValueError, match="^--set task.passage_buckets: is set \\(4\\) but not used"):
        parse_args(["--config", cross, "--task", "generator", "--set", "task.passage_buckets=4"])
    parse_args(["--config", cross, "--passage-buckets", "4"])  # the cross-encoder splits its passages
    # a flag setting a file's (or an earlier flag's) value back to the default clears it
    config, _ = parse_args(["--config", str(_file(tmp_path, REQUIRED + "task: cross-encoder\nnegatives: bm25\n"
                                                            "refresh: {every: 0}\n")), "--refresh-every", "500"])
    assert config.refresh.every == 500
    config, _ = parse_args(["--config", cross, "--negatives-file", "n.tsv", "--set", "negatives.file=null"])
    assert config.negatives.file is None
    parse_args(["--config", cross, "--set", "negatives.file=null"])  # null, not set, is no claim to be read


def test_a_saved_config_is_not_refused_for_settings_nothing_reads(tmp_path):
    """A run's config.json from before the check (a cross-encoder run with refresh.every 0) still loads, and the
    run resumes under the same command less that setting (which changes nothing it trains)."""
    now = build_config(_file(tmp_path, REQUIRED + "task: cross-encoder\nnegatives: bm25\n"), {})
    saved = build_config(_file(tmp_path, REQUIRED + "task: cross-encoder\nnegatives: bm25\n"), {})
    saved.refresh.every = 0
    saved.save(tmp_path / "config.json")
    assert TrainConfig.load(tmp_path / "config.json").refresh.every == 0
    with pytest.raises(InputError, match="refresh.every: is set"):
        build_config(tmp_path / "config.json", {})
    assert check_resumable(TrainConfig.load(tmp_path / "config.json"), now, tmp_path) == ["refresh.every"]
    saved.task.name, saved.model.kind = "contrastive", None  # the dense task does read refresh.every
    saved.task.options = {}  # nor the cross-encoder task's options
    saved.save(tmp_path / "config.json")
    dense = build_config(_file(tmp_path, REQUIRED + "negatives: bm25\n"), {})
    with pytest.raises(ValueError, match="this run has refresh.every=0, now 500"):
        check_resumable(TrainConfig.load(tmp_path / "config.json"), dense, tmp_path)


def test_resume_allows_only_harmless_changes(tmp_path):
    base = build_config(_file(tmp_path, REQUIRED), {})
    assert check_resumable(base, build_config(_file(tmp_path, REQUIRED), {"log_every": "1", "stop_at": "5"}),
                           tmp_path) == ["stop_at", "log_every"]
    with pytest.raises(ValueError, match="optim.lr=1e-05, now 0.001"):
        check_resumable(base, build_config(_file(tmp_path, REQUIRED), {"lr": "1e-3"}), tmp_path)


@pytest.mark.parametrize("name", ["bm25-warmup", "ance", "ance-sync", "rand", "inbatch", "bm25", "dpr"])
def test_example_configs_load(name):
    config = build_config(CONFIGS / "rag24-mini" / f"{name}.yaml", {})
    assert config.data.corpus == "rag24-mini" and config.data.qrels == "rag24-mini-train"
    assert config.refresh.eval_topics == "rag24-mini-test"


@pytest.mark.parametrize("family", ["bert-tiny", "minilm"])
def test_presets_are_the_table1_settings_with_dpr_negatives(family, monkeypatch):
    """configs/presets/FAMILY.yaml trains as experiments/rag24_table1.py's DPR row of that family does
    (binary-friendly min_positive_grade, no refreshes and the table's total steps aside)."""
    monkeypatch.syspath_prepend(str(CONFIGS.parent))
    from experiments.rag24_table1 import FAMILIES, ONE_PASSAGE_BATCH

    table = FAMILIES[family]
    flags = [f for f in table.flags if f not in ONE_PASSAGE_BATCH and f != "--passage-buckets"]
    data = ["--output", "o", "--corpus", "c.jsonl", "--train-topics", "t.tsv", "--train-qrels", "q.txt"]
    preset, _ = parse_args(["--config", str(CONFIGS / "presets" / f"{family}.yaml"), *data])
    expected, _ = parse_args([*data, "--model", table.model, *flags, "--negatives", "dpr",
                              "--min-positive-grade", "1", "--refresh-every", "0",
                              "--max-steps", str(table.warmup + table.cont)])
    flat = preset.flat()
    flat.pop("refresh.precision")  # bert-tiny's table pins the refresh precision; the presets do not refresh
    want = expected.flat()
    want.pop("refresh.precision")
    assert flat == want


@pytest.mark.parametrize("kind", ["cross-encoder", "colbert", "splade"])
def test_the_other_kinds_presets_are_their_rag24_mini_configs_but_for_the_data(kind):
    """``--config KIND`` trains as configs/rag24-mini/KIND.yaml does, given the same data and grade threshold."""
    data = ["--output", "o", "--corpus", "c.jsonl", "--train-topics", "t.tsv", "--train-qrels", "q.txt"]
    preset, _ = parse_args(["--config", kind, *data, "--min-positive-grade", "2"])
    config, _ = parse_args(["--config", str(CONFIGS / "rag24-mini" / f"{kind}.yaml"), *data])
    assert preset.flat() == config.flat()
    assert parse_args(["--config", kind, *data])[0].data.min_positive_grade == 1  # binary qrels by default


def test_quiet_is_no_progress_as_in_every_other_command():
    data = ["--output", "o", "--corpus", "c.jsonl", "--train-topics", "t.tsv", "--train-qrels", "q.txt"]
    assert [parse_args([*data, *flags])[0].progress for flags in ([], ["--quiet"], ["--no-progress"])] == [
        True, False, False]


def test_a_preset_is_named_from_anywhere(tmp_path, monkeypatch):
    data = ["--output", "o", "--corpus", "c.jsonl", "--train-topics", "t.tsv", "--train-qrels", "q.txt"]
    by_file, _ = parse_args(["--config", str(CONFIGS / "presets" / "minilm.yaml"), *data])
    monkeypatch.chdir(tmp_path)  # outside a checkout's configs/
    (tmp_path / "minilm").mkdir()  # a folder of that name (the run's output, say) is not a settings file
    by_name, _ = parse_args(["--config", "minilm", *data])
    assert by_name == by_file
    (tmp_path / "minilm").rmdir()
    (tmp_path / "minilm").write_text("seed: 7\n")  # a file of that name is the file, not the preset
    assert parse_args(["--config", "minilm", *data])[0].seed == 7
    names = "bert-tiny, colbert, cross-encoder, minilm, splade"
    with pytest.raises(InputError, match=f"no such config file .or preset name: {names}."):
        parse_args(["--config", "minilm.yml", *data])


def test_flat_and_sectioned_configs_are_the_same(tmp_path):
    flat = _file(tmp_path, "output: runs/x\nseed: 7\nmodel: minilm\ninit_from: runs/warmup\ncorpus: c.jsonl\n"
                           "train_topics: t.tsv\ntrain_qrels: q.txt\nmin_positive_grade: 1\nnegative_exclude_grade: 1\n"
                           "batch_size: 16\nn_negatives: 3\nnegatives: bm25\nnegative_depth: 50\n"
                           "temperature: 0.05\nrefresh_every: 20\neval_topics: e.tsv\nlr: 2e-5\nepochs: 2\n",
                 "flat.yaml")
    sectioned = _file(tmp_path, "output: runs/x\nseed: 7\n"
                                "model: {name: minilm, init_from: runs/warmup}\n"
                                "data:\n  corpus: c.jsonl\n  topics: t.tsv\n  qrels: q.txt\n"
                                "  min_positive_grade: 1\n  negative_exclude_grade: 1\n"
                                "task: {batch_size: 16, n_negatives: 3}\n"
                                "negatives: {name: bm25, depth: 50}\n"
                                "loss: {name: nll, temperature: 0.05}\n"
                                "refresh: {every: 20, eval_topics: e.tsv}\n"
                                "optim: {lr: 2e-5, epochs: 2}\n", "sectioned.yaml")
    shorthand = _file(tmp_path, sectioned.read_text().replace("{name: bm25, depth: 50}", "bm25")
                      + "negative_depth: 50\n", "shorthand.yaml")
    expected = build_config(flat, {}).to_dict()
    assert expected == build_config(sectioned, {}).to_dict() == build_config(shorthand, {}).to_dict()
    assert expected["negatives"]["name"] == "bm25" and expected["optim"]["lr"] == 2e-5
    assert expected["loss"]["temperature"] == 0.05 and expected["task"]["batch_size"] == 16


def test_shorthands_imports_and_model_options(tmp_path):
    path = _file(tmp_path, REQUIRED.replace("train_topics: t.tsv\n", "") + "data: groups\ngroups: g.jsonl\n"
                 "negatives: groups\nimports: [a_module]\n")
    with pytest.raises(ValueError, match="--import: imports: plugin module 'a_module' cannot be imported"):
        parse_args(["--config", str(path), "--import", "b_module"])  # the file's own stays: added to, not replaced
    sys.modules["a_module"] = sys.modules["b_module"] = types.ModuleType("stub")  # importable, registers nothing
    try:
        config, _ = parse_args(["--config", str(path), "--import", "b_module"])
    finally:
        del sys.modules["a_module"], sys.modules["b_module"]
    assert config.data.source == "groups" and config.imports == ["a_module", "b_module"]
    model = _file(tmp_path, REQUIRED + "model:\n  name: bert-tiny\n  shared: false\n  head_dimm: 8\n", "m.yaml")
    with pytest.raises(InputError, match="model.head_dimm: unknown setting; did you mean 'head_dim'") as e:
        build_config(model, {})
    assert str(e.value).startswith(f"{model}:8: ")
    fixed = build_config(_file(tmp_path, model.read_text().replace("head_dimm", "head_dim"), "ok.yaml"), {})
    assert fixed.model.overrides() == {"shared": False, "head_dim": 8}


def test_output_that_is_a_file_is_one_line(tmp_path, capsys):
    output = tmp_path / "run"
    output.write_text("not a folder")
    path = _file(tmp_path, REQUIRED.replace("runs/x", str(output)))
    with pytest.raises(SystemExit) as done:
        run_cli(train_main, ["--config", str(path), "--device", "cpu"])
    assert done.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"error: {output}: exists and is not a folder"
    assert output.read_text() == "not a folder"


@pytest.mark.parametrize("path", sorted((CONFIGS / "rag24-mini").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_rag24_config_is_a_valid_config(path):
    config = build_config(path, {})
    assert config.data.corpus == "rag24-mini"


def test_the_settings_table_of_configs_readme_is_what_its_snippet_prints(capsys):
    import re

    text = (CONFIGS / "README.md").read_text(encoding="utf-8")
    snippet = re.search(r"<summary>The snippet that writes this table</summary>\n\n```python\n(.*?)```", text, re.S)
    exec(snippet.group(1), {})  # noqa: S102 - the documented snippet itself
    assert capsys.readouterr().out.rstrip("\n") in text

