"""Wall time of the whole GPL pipeline (``python -m ance_ir.gpl``), stage by stage, from a finished run's folder.

GPL's stages are long (generation and cross-encoder labelling of the whole corpus, then training), so this script
does not run them again: it reads the stage times that ``python -m ance_ir.gpl`` keeps in ``OUTPUT/timings.json``
(each stage's wall time as last run, in one process, on this machine) and counts what each stage made from the
files beside it: passages and queries generated, (query, passage) pairs mined and labelled, training steps. Each
stage's share of the total is its cost against the others measured in the same run.

    python -m bench.gpl_pipeline --run train-runs/adapt/gpl --output docs/bench.md
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

from bench.common import machine, module_command, write_section


def _lines(path: Path) -> int:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return sum(1 for _ in f)


def _pairs(path: Path) -> int:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return sum(len(g["positive_passages"]) + len(g["negative_passages"]) for g in map(json.loads, f))


def _steps(model: Path) -> int:
    records = [json.loads(line) for line in (model / "log.jsonl").read_text().splitlines() if line.strip()]
    return max(r["step"] for r in records if "step" in r)


def stage_rows(run: Path) -> list[tuple[str, str, float]]:
    """(stage, what it made, seconds) for each stage ``run/timings.json`` records."""
    timings = json.loads((run / "timings.json").read_text())
    queries = _lines(run / "qgen.qrels")
    made = {
        "generate": f"{queries:,} queries for {_lines(run / 'expanded.jsonl'):,} passages",
        "pairs": f"{queries:,} (query, passage) pairs",
        "mine": f"{_lines(run / 'negatives.jsonl.gz'):,} groups of dense hard negatives",
        "label": f"{_pairs(run / 'scored.jsonl.gz'):,} pairs scored by the cross-encoder",
        "train": f"{_steps(run / 'model'):,} Margin-MSE steps",
    }
    return [(name, made[name], seconds) for name, seconds in timings.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True, help="output folder of a finished python -m ance_ir.gpl run")
    parser.add_argument("--output", default="docs/bench.md")
    args = parser.parse_args()
    rows = stage_rows(Path(args.run))
    total = sum(seconds for _, _, seconds in rows)
    lines = ["| stage | made | wall time (s) | share |", "|---|---|---:|---:|"]
    lines += [f"| {name} | {made} | {seconds:,.0f} | {seconds / total:.0%} |" for name, made, seconds in rows]
    lines.append(f"| **whole pipeline** | | **{total:,.0f}** ({total / 60:.0f} min) | 100% |")
    body = ("## 14. GPL pipeline wall time (rag24-mini, CPU)\n\n" + __doc__.split("\n\n")[1] + "\n\n" + "\n".join(lines)
            + f"\n\nMachine: {machine()}.\n\n```\n{module_command()}\n```\n")
    write_section(args.output, "bench-gpl-pipeline", body)


if __name__ == "__main__":
    main()
