"""``python -m ance_ir.gpl``: Generative Pseudo Labeling (Wang et al., 2022), a dense retriever adapted to a corpus
without labels, as one command whose every stage leaves a file to inspect or reuse.

    python -m ance_ir.gpl --corpus rag24-mini --generator train-runs/rag24-mini/generator \\
        --retriever indexes/rag24-mini.minilm --cross-encoder train-runs/rag24-mini/cross-encoder-minilm \\
        --output train-runs/gpl

Stages, each skipped when its output exists (rerun the command to resume after an interruption):

1. ``OUTPUT/expanded.jsonl.queries.jsonl``: ``--queries-per-passage`` queries generated for every passage
   (``python -m ance_ir.expand``; sampling from ``--seed``).
2. ``OUTPUT/qgen.tsv``, ``OUTPUT/qgen.qrels``, ``OUTPUT/qgen.jsonl``: the queries as topics and qrels, each
   query's passage its positive (``python -m ance_ir.pretrain_data qgen``); with ``--max-queries N``, N of them
   drawn with ``--seed`` (the later stages cost one cross-encoder forward per pair).
3. ``OUTPUT/negatives.jsonl.gz``: each query's hard negatives, the top ``--depth`` passages of the dense index
   ``--retriever`` minus its own passage (``python -m ance_ir.negatives --source dense``).
4. ``OUTPUT/scored.jsonl.gz``: every (query, passage) pair scored by the cross-encoder (``python -m
   ance_ir.rerank --groups``), the pseudo labels.
5. ``OUTPUT/model``: the retriever trained with Margin-MSE on those margins (``python -m ance_ir.train`` with
   ``--train-config``, default ``configs/rag24-mini/gpl.yaml``, ``data.groups`` set to stage 4's file and
   ``negatives.depth`` to ``--depth``, so that every labelled negative can be drawn; starting from ``--model``, a
   dense model, default the retriever's encoder).

``OUTPUT/gpl.json`` records the settings of the first run and what its inputs hold (the sha256 of the corpus file,
the training config, each model's weights, the retriever index's ``meta.json``); a rerun with other settings, or
with an input changed in place, is refused (a new ``--output`` starts afresh). ``OUTPUT/timings.json`` keeps each
stage's wall time in seconds, as last run (``bench/gpl_pipeline.py`` reports it).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ance_ir.cli import ArgumentParser, check_output, positive_int, run_cli
from ance_ir.data import InputError
from ance_ir.data.atomic import atomic_write

if TYPE_CHECKING:
    from ance_ir.train.arguments import TrainConfig

DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "rag24-mini" / "gpl.yaml"


def stage(name: str, output: Path, main: Callable[[list[str]], int | None], argv: list[str], timings: Path) -> None:
    """Run a CLI's ``main`` in this process unless ``output`` exists, its wall time added to ``timings``; a failure
    stops the pipeline."""
    if output.exists():
        print(f"gpl: {name}: {output} exists, skipped", file=sys.stderr)
        return
    print(f"gpl: {name} -> {output}", file=sys.stderr)
    started = time.perf_counter()
    code = main(argv)
    if code:
        raise SystemExit(code)
    recorded = json.loads(timings.read_text()) if timings.is_file() else {}
    with atomic_write(timings) as f:
        json.dump({**recorded, name: round(time.perf_counter() - started, 1)}, f, indent=1)


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m ance_ir.gpl", description=__doc__)
    parser.add_argument("--corpus", required=True, help="corpus JSONL/TSV file or dataset name")
    parser.add_argument("--generator", required=True, help="query generator (task: generator, or a seq2seq id)")
    parser.add_argument("--retriever", required=True, help="dense index of the corpus for mining negatives")
    parser.add_argument("--cross-encoder", required=True, help="cross-encoder that labels the pairs")
    parser.add_argument("--output", required=True, help="folder for every stage's files and the trained model")
    parser.add_argument("--model", help="model to train (default: the retriever index's encoder)")
    parser.add_argument("--train-config", default=str(DEFAULT_CONFIG),
                        help="training config whose settings GPL uses (default: configs/rag24-mini/gpl.yaml)")
    parser.add_argument("--queries-per-passage", type=positive_int, default=3, help="generated queries (default 3)")
    parser.add_argument("--depth", type=positive_int, default=50, help="hard negatives mined per query (default 50)")
    parser.add_argument("--max-queries", type=positive_int,
                        help="pair, mine and label only this many generated queries, drawn with --seed (default: all)")
    parser.add_argument("--max-steps", type=positive_int, help="training steps (default: the config's)")
    parser.add_argument("--seed", type=int, default=42, help="sampling and training seed (default 42)")
    parser.add_argument("--device", help="cpu, cuda or cuda:N for every model stage (default: cuda when available)")
    parser.add_argument("--threads", type=positive_int,
                        help="torch CPU threads of every model stage (default: each stage's own default)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars in the stages")
    args = parser.parse_args(argv)

    encoder, encoded_with = _index_encoder(args.retriever)  # the inputs are checked before any work
    start = args.model or encoder
    args.index_settings = {} if args.model else encoded_with  # the index's encoder trains as it encoded the index
    if start is None:
        raise ValueError(f"{args.retriever}: its meta.json names no encoder; pass --model")
    config = _check_inputs(args, start)
    check_output(args.output, folder=True)
    out = Path(args.output)
    settings = {"corpus": args.corpus, "generator": args.generator, "retriever": args.retriever,
                "cross_encoder": args.cross_encoder, "model": start, "model_settings": args.index_settings,
                "train_config": args.train_config,
                "queries_per_passage": args.queries_per_passage, "max_queries": args.max_queries, "depth": args.depth,
                "max_steps": args.max_steps,
                "seed": args.seed, "inputs": _input_fingerprints(args, start)}
    _check_settings(out / "gpl.json", settings)
    if not (out / "model" / "final").exists():  # the training stage will run
        _warn_of_temperature(args, config)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        if not (out / "gpl.json").is_file():
            with atomic_write(out / "gpl.json") as f:
                json.dump(settings, f, indent=1)
        _run_stages(args, out, start)
    finally:
        if created and {p.name for p in out.iterdir()} <= {"gpl.json"}:  # nothing made: leave nothing behind
            shutil.rmtree(out)
    return 0


def _check_settings(recorded: Path, settings: dict[str, object]) -> None:
    """Refuse to go on with an output folder whose earlier run had other settings."""
    if not recorded.is_file():
        return
    try:
        before = json.loads(recorded.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputError(recorded, f"unreadable GPL settings ({e})") from None
    if "inputs" not in before:  # made before inputs were recorded
        settings = {k: v for k, v in settings.items() if k != "inputs"}
    flat_before, flat_now = _flat(before), _flat(settings)
    changed = [k for k in flat_now if flat_before.get(k) != flat_now[k]]
    if changed:
        raise InputError(recorded, "this folder was made with other settings (" + ", ".join(
            f"{k}: {flat_before.get(k)!r}, now {flat_now[k]!r}" for k in changed) + "); rerun them or use a new "
            "--output")


def _flat(settings: dict[str, object]) -> dict[str, object]:
    """``settings`` with the ``inputs`` fingerprints as ``inputs.NAME`` keys."""
    inputs = settings.get("inputs")
    return {**{k: v for k, v in settings.items() if k != "inputs"},
            **{f"inputs.{k}": v for k, v in (inputs.items() if isinstance(inputs, dict) else ())}}


def _input_fingerprints(args: argparse.Namespace, start: str) -> dict[str, str | None]:
    """What each input holds, so that a rerun, which skips the stages whose files exist, reads the same inputs: the
    sha256 of a file (the corpus, the training config), of a model folder's weights (generator, cross-encoder, the
    model trained) and of the retriever index's ``meta.json``; None for a name (a dataset, an alias not on disk)."""
    from ance_ir.data import sha256_file
    from ance_ir.data.checksum import sha256_json
    from ance_ir.datasets import resolve_corpus
    from ance_ir.modeling.resolve import resolve_model_path

    def weights(name: str) -> str | None:
        folder = Path(resolve_model_path(name))
        files = sorted(folder.rglob("*.safetensors")) if folder.is_dir() else []
        return sha256_json([[str(f.relative_to(folder)), sha256_file(f)] for f in files]) if files else None

    corpus = Path(resolve_corpus(args.corpus))
    meta = Path(args.retriever) / "meta.json"
    return {"corpus": sha256_file(corpus) if corpus.is_file() else None, "train_config": sha256_file(args.train_config),
            "generator": weights(args.generator), "cross_encoder": weights(args.cross_encoder),
            "model": weights(start), "retriever": sha256_file(meta) if meta.is_file() else None}


def _run_stages(args: argparse.Namespace, out: Path, start: str) -> None:
    """Every stage in order (each a CLI's ``main``), skipping those whose output exists."""
    from ance_ir.expand.__main__ import main as expand
    from ance_ir.negatives.__main__ import main as negatives
    from ance_ir.pretrain_data.__main__ import main as pretrain_data
    from ance_ir.rerank.__main__ import main as rerank
    from ance_ir.train.__main__ import main as train

    expanded, queries = out / "expanded.jsonl", out / "expanded.jsonl.queries.jsonl"
    topics, qrels, groups = out / "qgen.tsv", out / "qgen.qrels", out / "qgen.jsonl"
    mined, scored, model = out / "negatives.jsonl.gz", out / "scored.jsonl.gz", out / "model"
    timings = out / "timings.json"
    quiet = ["--quiet"] if args.quiet else []
    runs_on = [*(["--device", args.device] if args.device else []), *(["--threads", str(args.threads)]
                                                                       if args.threads else [])]
    stage("generate", queries, expand, ["--corpus", args.corpus, "--generator", args.generator, "--n",
                                        str(args.queries_per_passage), "--seed", str(args.seed), "--output",
                                        str(expanded), *quiet, *runs_on], timings)
    stage("pairs", qrels, pretrain_data, ["qgen", "--corpus", args.corpus, "--option",
                                          f"queries={json.dumps(str(queries))}",
                                          "--output", str(groups), "--topics-out", str(topics), "--qrels-out",
                                          str(qrels), "--seed", str(args.seed),
                                          *(["--sample", str(args.max_queries)] if args.max_queries else [])], timings)
    stage("mine", mined, negatives, ["--topics", str(topics), "--qrels", str(qrels), "--corpus", args.corpus,
                                     "--source", "dense", "--index", args.retriever, "--hits", str(args.depth + 1),
                                     "--depth", str(args.depth), "--output", str(mined), *quiet, *runs_on], timings)
    stage("label", scored, rerank, ["--groups", str(mined), "--corpus", args.corpus, "--model",
                                    args.cross_encoder, "--output", str(scored), *quiet, *runs_on], timings)
    stage("train", model / "final", train, _train_argv(args, start, scored, model), timings)


def _train_argv(args: argparse.Namespace, start: str, groups: Path, model: Path) -> list[str]:
    """The training stage's command line: ``--train-config`` with the pipeline's model, data and settings."""
    return ["--config", args.train_config, "--model", start, "--corpus", args.corpus, "--groups", str(groups),
            "--seed", str(args.seed), "--set", f"negatives.depth={args.depth}", "--output", str(model),
            *_encoding_flags(args.index_settings),
            *(["--max-steps", str(args.max_steps)] if args.max_steps else []), *(["--quiet"] if args.quiet else []),
            *(["--device", args.device] if args.device else []),
            *(["--threads", str(args.threads)] if args.threads else [])]


def _encoding_flags(settings: dict[str, Any]) -> list[str]:
    """``--pooling`` and ``--normalize``/``--no-normalize`` of the training for the index's recorded ``settings``."""
    flags = [f"--pooling={settings['pooling']}"] if "pooling" in settings else []
    if "normalize" in settings:
        flags.append("--normalize" if settings["normalize"] else "--no-normalize")
    return flags


def _check_inputs(args: argparse.Namespace, start: str) -> TrainConfig:
    """What the later stages read, checked up front: a bad input found by stage 4 would cost stages 1-3 first."""
    from ance_ir.datasets import resolve_corpus
    from ance_ir.modeling.kinds import saved_kind
    from ance_ir.modeling.resolve import check_loadable, resolve_model_path
    from ance_ir.train.arguments import parse_args

    resolve_corpus(args.corpus)
    if not Path(args.train_config).is_file():
        raise InputError(args.train_config, "no such training config file")
    for flag, name, kind in (("--generator", args.generator, "generator"),
                             ("--cross-encoder", args.cross_encoder, "cross-encoder"), ("--model", start, "dense")):
        path = resolve_model_path(name)
        check_loadable(path)
        recorded = saved_kind(path) if Path(path).is_dir() else None
        if recorded not in (None, kind):
            raise ValueError(f"{flag}: {name} is a {recorded!r} model, expected a {kind!r} model")
    config, _ = parse_args(_train_argv(args, start, Path(args.output) / "scored.jsonl.gz", Path(args.output) / "model"))
    return config


def _warn_of_temperature(args: argparse.Namespace, config: TrainConfig) -> None:
    """A warning line when the model trained keeps the index's unnormalised dot products but the training config
    divides their margins by a temperature meant for cosines."""
    if config.model.normalize is False and config.loss.temperature < 1:
        print(f"warning: {args.train_config}: loss.temperature {config.loss.temperature:g} suits normalised vectors "
              f"(cosine scores), but the model trained keeps {args.retriever}'s unnormalised dot products: its margins "
              "are divided by it; a training config with temperature 1 suits them", file=sys.stderr)


def _index_encoder(index: str) -> tuple[str | None, dict[str, Any]]:
    """The encoder a dense index records and the pooling and normalisation it encoded with (InputError for a folder
    that is not a readable dense index), its vectors mapped rather than read (the negatives stage reads them)."""
    from ance_ir.index import load_dense_index
    from ance_ir.index.records import recorded_encoder_settings

    meta = load_dense_index(index, mmap=True).meta
    recorded = recorded_encoder_settings(meta)
    return meta.get("encoder"), {k: recorded[k] for k in ("pooling", "normalize") if k in recorded}


if __name__ == "__main__":
    run_cli(main)
