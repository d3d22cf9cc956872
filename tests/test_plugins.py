"""Components from outside the package: a task, a loss, a sampler, a candidate source, a model kind and a data
source, each one file in tests/plugins/, registered by importing it, then trained, encoded and searched with through
the CLIs."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import TOY_PASSAGES, TOY_TOPICS, make_tiny_bert, run_module

from ance_ir.data import read_run
from ance_ir.index import load_dense_index
from ance_ir.modeling import DenseEncoder
from ance_ir.modeling.kinds import load_model, saved_kind
from ance_ir.negatives.sources import CANDIDATE_SOURCES, CandidateSource, register_source
from ance_ir.plugins import load_plugins
from ance_ir.train import build_config
from ance_ir.train.dataset import TrainData
from ance_ir.train.distributed import Distributed
from ance_ir.train.layout import RunDir
from ance_ir.train.negatives import build_sampler
from ance_ir.train.registry import Registry

PLUGINS = Path(__file__).resolve().parent / "plugins"
FILES = [str(PLUGINS / f"{name}.py") for name in
         ("maxpool_kind", "margin_loss", "overlap_source", "hardest_sampler", "symmetric_task")]


@pytest.fixture()
def plugin_config(toy_collection, tmp_path) -> Path:
    """A sectioned config naming every plugin component."""
    model = make_tiny_bert(tmp_path / "bert", dropout=0.0)
    settings = {
        "output": str(tmp_path / "run"), "seed": 3, "device": "cpu", "threads": 1, "progress": False,
        "log_every": 1, "imports": FILES,
        "model": {"name": str(model), "kind": "test-maxpool", "query_max_length": 16, "passage_max_length": 16},
        "data": {"corpus": str(toy_collection["corpus"]), "topics": str(toy_collection["topics"]),
                 "qrels": str(toy_collection["qrels"]), "min_positive_grade": 1},
        "task": {"name": "test-symmetric", "batch_size": 2, "n_negatives": 2, "reverse_weight": 0.25},
        "negatives": {"name": "test-hardest", "source": "test-overlap", "corpus": str(toy_collection["corpus"])},
        "loss": {"name": "test-margin", "margin": 0.5},
        "refresh": {"every": 0},
        "optim": {"lr": 1e-3, "max_steps": 4},
    }
    path = tmp_path / "plugins.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


def test_plugin_components_train_encode_and_search(plugin_config, toy_collection, tmp_path):
    trained = run_module("ance_ir.train", "--config", str(plugin_config))
    assert trained.returncode == 0, trained.stderr
    run = RunDir(tmp_path / "run")
    saved = json.loads(run.config.read_text())
    assert saved["task"] == {"name": "test-symmetric", "batch_size": 2, "passage_buckets": 4, "n_negatives": 2,
                             "in_batch": False, "cross_batch": True, "grad_cache_chunk": 0,
                             "reverse_weight": 0.25}
    assert saved["loss"]["margin"] == 0.5 and saved["negatives"]["source"] == "test-overlap"
    losses = [r["loss"] for r in map(json.loads, run.log.read_text().splitlines()) if "loss" in r]
    assert len(losses) == 4 and all(np.isfinite(losses))
    assert saved_kind(run.final) == "test-maxpool"
    assert not (run.final / "modules.json").exists()  # no sentence-transformers files that would pool otherwise

    # the sampler drew from the plugin source: each query's top passages by shared words, judged ones removed
    load_plugins(FILES)
    config = build_config(plugin_config, {})
    data = TrainData.load(config)
    sampler = build_sampler(config, data, run, Distributed.init("cpu"))
    for qid, query in TOY_TOPICS.items():
        shared = {d: len(set(query.split()) & set(t.split())) for d, t in TOY_PASSAGES.items()}
        expected = [d for d in sorted(shared, key=lambda d: (-shared[d], d)) if d not in data.exclude[qid]]
        assert sampler.candidates[qid] == expected
        assert sampler.sample(qid, data.exclude[qid], 2, random.Random(0)) == expected[:2]

    # encode and search take the run folder: its final model, loaded as the plugin kind
    index = tmp_path / "index"
    encoded = run_module("ance_ir.encode", "--import", FILES[0], "--corpus", str(toy_collection["corpus"]),
                         "--encoder", str(run.root), "--output", str(index), "--quiet", "--precision", "fp32")
    assert encoded.returncode == 0, encoded.stderr
    dense = load_dense_index(index)
    assert dense.meta["kind"] == "test-maxpool"
    model = load_model(run.root)
    assert type(model).__name__ == "MaxPoolEncoder"
    texts = [json.loads(line)["contents"] for line in toy_collection["corpus"].read_text().splitlines()]
    stored = dense.index.reconstruct_n(0, dense.index.ntotal)
    assert np.allclose(stored, model.encode_passages(texts), atol=1e-5)
    as_cls = DenseEncoder.from_pretrained(run.final).encode_passages(texts)
    assert not np.allclose(stored, as_cls, atol=1e-3)  # really max-pooled, not the dense kind's CLS

    output = tmp_path / "run.trec"
    searched = run_module("ance_ir.search", "--import", FILES[0], "--topics", str(toy_collection["topics"]),
                          "--index", str(index), "--output", str(output), "--hits", "3")
    assert searched.returncode == 0, searched.stderr
    assert {q: len(hits) for q, hits in read_run(output).items()} == {q: 3 for q in TOY_TOPICS}

    # without the plugin, the saved kind is not known: one clear error line
    refused = run_module("ance_ir.search", "--topics", str(toy_collection["topics"]), "--index", str(index),
                         "--output", str(tmp_path / "x.trec"))
    assert refused.returncode == 2 and "unknown model kind 'test-maxpool'" in refused.stderr
    assert not (tmp_path / "x.trec").exists()

    # weight averaging loads the plugin kind too: the model with itself is the model
    averaged = tmp_path / "averaged"
    refused = run_module("ance_ir.train.average", "--models", str(run.final), str(run.final), "--output", str(averaged))
    assert refused.returncode == 2 and "unknown model kind 'test-maxpool'" in refused.stderr
    assert not averaged.exists()
    done = run_module("ance_ir.train.average", "--import", FILES[0], "--models", str(run.final), str(run.final),
                      "--output", str(averaged))
    assert done.returncode == 0, done.stderr
    assert type(load_model(averaged)).__name__ == "MaxPoolEncoder"
    assert np.allclose(load_model(averaged).encode_passages(texts), stored, atol=1e-5)


def test_plugin_data_source_trains(toy_collection, tmp_path):
    """The data source's pairs are what training reads, and a config naming it trains through the CLI."""
    source = str(PLUGINS / "lead_source.py")
    settings = {
        "output": str(tmp_path / "run"), "seed": 3, "device": "cpu", "threads": 1, "progress": False,
        "log_every": 1, "imports": [source],
        "model": {"name": str(make_tiny_bert(tmp_path / "bert")), "query_max_length": 16,
                  "passage_max_length": 16},
        "data": {"source": "test-lead", "corpus": str(toy_collection["corpus"]), "words": 2},
        "negatives": {"name": "inbatch"}, "task": {"batch_size": 4}, "loss": {"name": "nll"},
        "refresh": {"every": 0}, "optim": {"lr": 1e-3, "max_steps": 2},
    }
    path = tmp_path / "lead.yaml"
    path.write_text(yaml.safe_dump(settings))

    load_plugins([source])
    data = TrainData.load(build_config(path, {}))
    assert data.pairs == [(f"lead-{d}", d) for d in TOY_PASSAGES]
    assert data.queries == {f"lead-{d}": " ".join(t.split()[:2]) for d, t in TOY_PASSAGES.items()}

    trained = run_module("ance_ir.train", "--config", str(path))
    assert trained.returncode == 0, trained.stderr
    saved = json.loads(RunDir(tmp_path / "run").config.read_text())
    assert saved["data"]["source"] == "test-lead" and saved["data"]["words"] == 2
    losses = [r["loss"] for r in map(json.loads, RunDir(tmp_path / "run").log.read_text().splitlines()) if "loss" in r]
    assert len(losses) == 2 and all(np.isfinite(losses))


def test_the_architecture_docs_examples_register_and_the_data_source_loads(toy_collection, tmp_path):
    """Each component example in docs/architecture.md imports as a plugin and registers its name; the data source's
    pairs load from a corpus."""
    text = (Path(__file__).resolve().parent.parent / "docs" / "architecture.md").read_text()
    blocks = [block.split("```", 1)[0] for block in text.split("```python\n")[1:]]
    examples = [block for block in blocks if "@register_" in block]
    files = []
    for number, block in enumerate(examples):
        files.append(tmp_path / f"example{number}.py")
        files[-1].write_text(block)
    code = (f"import sys; from ance_ir.plugins import load_plugins; load_plugins({[str(f) for f in files]!r}); "
            "from ance_ir.train.loss import LOSSES; from ance_ir.train.negatives import NEGATIVE_STRATEGIES; "
            "from ance_ir.negatives.sources import CANDIDATE_SOURCES; from ance_ir.train.dataset import DATA_SOURCES; "
            "from types import SimpleNamespace; from ance_ir.train.settings import DataSection; "
            f"data = DATA_SOURCES['halves'](SimpleNamespace(data=DataSection(source='halves', "
            f"corpus={str(toy_collection['corpus'])!r}, options={{'min_words': 4}}))).load(); import json; "
            "print(json.dumps([sorted({'margin', 'top', 'mine', 'halves'} & {*LOSSES, *NEGATIVE_STRATEGIES, "
            "*CANDIDATE_SOURCES, *DATA_SOURCES}), len(data.pairs)]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    names, pairs = json.loads(done.stdout.splitlines()[-1])
    assert names == ["halves", "margin", "mine", "top"] and len(examples) >= 4
    assert pairs == sum(len(t.split()) >= 4 for t in TOY_PASSAGES.values()) > 0


def test_unknown_plugin_option_names_the_line(plugin_config):
    text = plugin_config.read_text().replace("margin: 0.5", "margn: 0.5")
    plugin_config.write_text(text)
    line = next(i for i, row in enumerate(text.splitlines(), 1) if "margn" in row)
    with pytest.raises(ValueError, match=rf"plugins.yaml:{line}: loss.margn: unknown setting; did you mean "
                                         "'margin'"):
        build_config(plugin_config, {})


def test_a_registry_refuses_a_taken_or_missing_name_and_suggests_a_close_one():
    registry = Registry("loss")

    class Margin:
        name = "margin"

    class Other:
        name = "margin"

    class Nameless:
        name = ""

    assert registry.register(Margin) is registry.register(Margin)  # the same class again is fine
    with pytest.raises(ValueError, match=r"class .*Other: the loss 'margin' is taken by .*Margin; choose another"):
        registry.register(Other)
    with pytest.raises(ValueError, match="class .*Nameless: a loss needs a non-empty string 'name'"):
        registry.register(Nameless)
    assert registry == {"margin": Margin}
    with pytest.raises(ValueError, match=r"x.name: must be one of margin, got 'margn' \(did you mean 'margin'\? "):
        registry.lookup("margn", "x.name")
    with pytest.raises(ValueError, match=r"^unknown loss 'margn' \(did you mean 'margin'\? known: margin; a loss "
                                         r"from a plugin is registered by importing it: --import FILE or 'imports:' "
                                         r"in the config\)$"):
        registry.require("margn")
    assert registry.require("margin") is Margin


def test_a_candidate_source_parameter_without_a_default_is_a_required_setting(toy_collection, tmp_path):
    @register_source
    class Needs(CandidateSource):
        name = "test-needs-corpus"

        def __init__(self, corpus: str):
            self.corpus = corpus

        def retrieve(self, queries, depth):
            return {}

    values = {"output": str(tmp_path / "run"), "corpus": str(toy_collection["corpus"]),
              "train_topics": str(toy_collection["topics"]), "train_qrels": str(toy_collection["qrels"]),
              "negatives": "candidates", "negatives.source": "test-needs-corpus"}
    try:
        with pytest.raises(ValueError, match=r"^negatives.corpus: is required \(it has no default\)$"):
            build_config(None, values)
        config = build_config(None, {**values, "negatives.corpus": "c.jsonl"})
        assert config.negatives.options == {"source": "test-needs-corpus", "corpus": "c.jsonl"}
    finally:
        del CANDIDATE_SOURCES["test-needs-corpus"]


def test_a_plugin_file_run_twice_registers_once_and_one_taking_a_built_in_kind_is_named(tmp_path):
    """The same class statement run again (the file imported by path and by module name) is no clash; a plugin
    taking a built-in kind's name is refused by its own file and line even before that kind was ever loaded."""
    from ance_ir.plugins import import_plugin
    from ance_ir.train.loss import LOSSES

    plugin = tmp_path / "twice_loss.py"
    plugin.write_text("from ance_ir.train.loss import NLLLoss, register_loss\n\n\n@register_loss\n"
                      "class Twice(NLLLoss):\n    name = 'test-twice'\n")
    sys.path.insert(0, str(tmp_path))
    try:
        first = import_plugin(str(plugin)).Twice
        second = import_plugin("twice_loss").Twice  # the same file, now as a module: its class statement runs again
        assert second is not first and LOSSES["test-twice"] is second
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("twice_loss", None)
        del LOSSES["test-twice"]
    kind = tmp_path / "splade_kind.py"
    kind.write_text("from ance_ir.modeling.kinds import register_model_kind\n\n\n@register_model_kind\n"
                    "class Mine:\n    kind = 'splade'\n")
    done = run_module("ance_ir.encode", "--import", str(kind), "--corpus", "c.jsonl", "--encoder", "bert-tiny",
                      "--output", str(tmp_path / "index"))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith(
        f"error: {kind}:4: the plugin failed while it was imported: ValueError: class Mine: the model kind 'splade' "
        "is taken by ance_ir.modeling.splade.")
