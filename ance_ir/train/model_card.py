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


def _results(run: RunDir, topics: str | None) -> str:
    scored = [r for r in RefreshRecords(run.refresh).read_all() if r.get("metrics")] if run.refresh.is_dir() else []
    if not scored:
        return ("Nothing was evaluated during training (no `refresh.eval_topics`); evaluate with "
                "`python -m ance_ir.encode`, `python -m ance_ir.search` and `python -m ance_ir.eval`.")
    names = [m for m in MEASURE_NAMES if m in scored[-1]["metrics"]]
    lines = ["| step | " + " | ".join(MEASURE_NAMES[m] for m in names) + " |",
             "|" + " --- |" * (len(names) + 1)]
    lines += [f"| {r['step']} | " + " | ".join(f"{r['metrics'][m]:.4f}" for m in names) + " |" for r in scored]
    return f"Measured on `{topics}` at each refresh of the run:\n\n" + "\n".join(lines)


def _usage(folder: Path, kind: str, sentence_transformers: bool) -> str:
    commands = {
        "dense": (f"python -m ance_ir.encode --corpus CORPUS --encoder {folder} --output INDEX\n"
                  "python -m ance_ir.search --topics TOPICS --index INDEX --output RUN"),
        "cross-encoder": (f"python -m ance_ir.rerank --run FIRST_STAGE_RUN --topics TOPICS --corpus CORPUS "
                          f"--model {folder} --output RUN"),
        "deepct-query": ("python -m ance_ir.bm25 index --corpus CORPUS --output INDEX\n"
                         f"python -m ance_ir.bm25 search --index INDEX --topics TOPICS --query-weights {folder} "
                         "--output RUN"),
        "generator": (f"python -m ance_ir.expand --corpus CORPUS --generator {folder} --n 10 "
                      "--output EXPANDED.jsonl\n"
                      "python -m ance_ir.bm25 index --corpus EXPANDED.jsonl --output INDEX"),
    }
    command = commands.get(kind, (f"python -m ance_ir.encode --corpus CORPUS --encoder {folder} --output INDEX   "
                                  f"# or python -m ance_ir.rerank --model {folder}"))
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
    kind = json.loads((folder / "ance_ir_model.json").read_text(encoding="utf-8")).get("kind", "dense") \
        if (folder / "ance_ir_model.json").is_file() else "dense"
    used = run.root.resolve() / "final"
    usage = "deepct-query" if kind == "deepct" and _deepct_target(folder) == "query" else kind
    text = (_front_matter(settings, kind)
            + f"\n# {run.root.name}\n\nA `{kind}` model trained by ance-ir's `{settings['task']['name']}` task from "
              f"`{_start(settings)}` (seed {settings['seed']}).\n\n"
            + "## Training\n\n" + _training(run) + "\n\nSettings (`config.json` of the run folder):\n\n```yaml\n"
            + yaml.safe_dump({k: v for k, v in settings.items() if k != "output"}, sort_keys=False) + "```\n\n"
            + "## Results\n\n" + _results(run, settings["refresh"]["eval_topics"]) + "\n\n"
            + "## Usage\n\n" + _usage(used, usage, (folder / "modules.json").is_file())
            + _residual_note(settings))
    path = folder / "README.md"
    path.write_text(text, encoding="utf-8")
    return path
