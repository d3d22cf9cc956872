"""The model card (``README.md``) written beside a trained model in ``final/``: what the model is, the settings it
was trained with, what it measured during training, and how to use it. Hugging Face's hub shows the file as the
model's page; its front matter names the base model and the library."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from ance_ir.train.layout import RunDir
from ance_ir.train.runlog import read_log
from ance_ir.train.store import RefreshRecords

MEASURE_NAMES = {"ndcg_cut_10": "nDCG@10", "recip_rank": "MRR", "recall_100": "R@100", "recall_1000": "R@1000",
                 "map": "MAP"}


def _start(settings: dict[str, Any]) -> str:
    """The model training started from: ``model.init_from`` (a model or a run's latest checkpoint) over the
    ``model.name`` it overrides."""
    return settings["model"].get("init_from") or settings["model"]["name"]


def _front_matter(settings: dict[str, Any], kind: str) -> str:
    meta: dict[str, Any] = {"library_name": "ance-ir", "base_model": _start(settings),
                            "tags": ["ance-ir", kind, f"task:{settings['task']['name']}"]}
    if kind == "dense":
        meta["tags"].append("sentence-transformers")
        meta["pipeline_tag"] = "sentence-similarity"
    elif kind == "generator":
        meta["pipeline_tag"] = "text2text-generation"
    return "---\n" + yaml.safe_dump(meta, sort_keys=False) + "---\n"


def _training(run: RunDir) -> str:
    records = [r for r in read_log(run.log) if "loss" in r]
    if not records:
        return "No training step was logged."
    first, last = records[0], records[-1]
    return (f"{last['step']} steps (epoch {last['epoch']:.2f}); loss {first['loss']:.4f} at step {first['step']}, "
            f"{last['loss']:.4f} at step {last['step']} (`log.jsonl` of the run folder has every logged step).")


def _results(run: RunDir, topics: str | None, evaluate: str) -> str:
    scored = [r for r in RefreshRecords(run.refresh).read_all() if r.get("metrics")] if run.refresh.is_dir() else []
    if not scored:
        return f"Nothing was evaluated during training (no `refresh.eval_topics`); evaluate with {evaluate}."
    names = [m for m in MEASURE_NAMES if m in scored[-1]["metrics"]]
    lines = ["| step | " + " | ".join(MEASURE_NAMES[m] for m in names) + " |",
             "|" + " --- |" * (len(names) + 1)]
    lines += [f"| {r['step']} | " + " | ".join(f"{r['metrics'][m]:.4f}" for m in names) + " |" for r in scored]
    return f"Measured on `{topics}` at each refresh of the run:\n\n" + "\n".join(lines)


def _commands(folder: Path, kind: str, usage: str) -> tuple[str, str]:
    """The commands that use a model of ``kind`` (``usage``: the kind, or ``deepct-query``), and the CLIs that
    evaluate it: encode and search for a kind with an index, rerank for one that scores pairs."""
    from ance_ir.modeling.kinds import kind_class

    special = {
        "deepct-query": ("python -m ance_ir.bm25 index --corpus CORPUS --output INDEX\n"
                         f"python -m ance_ir.bm25 search --index INDEX --topics TOPICS --query-weights {folder} "
                         "--output RUN",
                         "`python -m ance_ir.bm25 search --query-weights` and `python -m ance_ir.eval`"),
        "generator": (f"python -m ance_ir.expand --corpus CORPUS --generator {folder} --n 10 --output EXPANDED.jsonl\n"
                      "python -m ance_ir.bm25 index --corpus EXPANDED.jsonl --output INDEX",
                      "`python -m ance_ir.expand`, `python -m ance_ir.bm25` and `python -m ance_ir.eval`"),
    }
    if usage in special:
        return special[usage]
    cls = kind_class(kind)
    commands, evaluate = [], []
    if getattr(cls, "index", None):
        commands += [f"python -m ance_ir.encode --corpus CORPUS --encoder {folder} --output INDEX",
                     "python -m ance_ir.search --topics TOPICS --index INDEX --output RUN"]
        evaluate += ["`python -m ance_ir.encode`", "`python -m ance_ir.search`"]
    if hasattr(cls, "score_pairs"):
        commands += (["# or rerank a first-stage run:"] if commands else []) + [
            f"python -m ance_ir.rerank --run FIRST_STAGE_RUN --topics TOPICS --corpus CORPUS --model {folder} "
            "--output RUN"]
        evaluate += ["`python -m ance_ir.rerank`"]
    if not commands:  # a backbone (mlm): what other tasks start from
        return (f"# a backbone to train from: model.name: {folder} in a training config (--model {folder})",
                "the models trained from it")
    return "\n".join(commands), ", ".join(evaluate) + " and `python -m ance_ir.eval`"


def _usage(command: str, folder: Path, sentence_transformers: bool) -> str:
    text = f"```bash\n{command}\n```\n"
    if sentence_transformers:
        text += ("\nThe folder also loads in sentence-transformers, with the same vectors:\n\n```python\n"
                 "from sentence_transformers import SentenceTransformer\n"
                 f"model = SentenceTransformer({str(folder)!r})\n```\n")
    return text


def _deepct_target(folder: Path) -> str | None:
    """What a saved DeepCT model weights (``passage``, or ``query``: DeepCT-Query)."""
    from ance_ir.modeling.deepct import CONFIG_NAME

    settings = folder / CONFIG_NAME
    return json.loads(settings.read_text(encoding="utf-8")).get("target") if settings.is_file() else None


def _residual_note(settings: dict) -> str:
    """For a cross-encoder trained as a residual over a first stage: what its scores need added."""
    first_stage = settings["task"].get("first_stage")
    if not first_stage:
        return ""
    return (f"\nTrained as a residual over the first stage `{first_stage}` (`task.first_stage`): its own scores rank "
            "only with that stage's added, which `python -m ance_ir.rerank` does with the weight and depth saved in "
            "the model; rerank a run of the same first stage.\n")


def write_model_card(folder: str | Path, run: RunDir) -> Path:
    """Write ``folder/README.md`` for the model a run trained, from the run's config, log and refresh records."""
    folder = Path(folder)
    settings = json.loads(run.config.read_text(encoding="utf-8"))
    recorded = folder / "ance_ir_model.json"  # an mlm model records none: any kind starts from it
    kind = json.loads(recorded.read_text(encoding="utf-8")).get("kind", "dense") if recorded.is_file() \
        else settings["model"].get("kind") or "dense"
    used = run.root.resolve() / "final"
    usage = "deepct-query" if kind == "deepct" and _deepct_target(folder) == "query" else kind
    command, evaluate = _commands(used, kind, usage)
    text = (_front_matter(settings, kind)
            + f"\n# {run.root.name}\n\nA `{kind}` model trained by ance-ir's `{settings['task']['name']}` task from "
              f"`{_start(settings)}` (seed {settings['seed']}).\n\n"
            + "## Training\n\n" + _training(run) + "\n\nSettings (`config.json` of the run folder):\n\n```yaml\n"
            + yaml.safe_dump({k: v for k, v in settings.items() if k != "output"}, sort_keys=False) + "```\n\n"
            + "## Results\n\n" + _results(run, settings["refresh"]["eval_topics"], evaluate) + "\n\n"
            + "## Usage\n\n" + _usage(command, used, (folder / "modules.json").is_file())
            + _residual_note(settings))
    path = folder / "README.md"
    path.write_text(text, encoding="utf-8")
    return path
