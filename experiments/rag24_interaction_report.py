"""The report of ``experiments.rag24_interaction``: quality over seeds and size/speed, from the committed runs."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from ance_ir.data import read_run
from ance_ir.datasets import resolve_qrels
from ance_ir.eval import evaluate_per_query
from ance_ir.eval.significance import paired_t_test
from bench.common import write_section
from experiments.rag24_interaction import SYSTEMS, TEST, run_file, speed_file

MEASURES = {"ndcg_cut_10": "nDCG@10", "recall_100": "R@100", "recip_rank": "MRR@10"}


def per_query(backbone: str, system: str, seeds: list[int]) -> dict[str, dict[str, list[float]]] | None:
    """measure -> qid -> one value per seed (None when a seed's run is missing)."""
    return per_query_of([run_file(backbone, system, seed) for seed in seeds])


def per_query_of(paths: list[Path]) -> dict[str, dict[str, list[float]]] | None:
    """measure -> test qid -> one value per run file (None when a file is missing)."""
    qrels = resolve_qrels(TEST)
    values: dict[str, dict[str, list[float]]] = {m: {q: [] for q in qrels} for m in MEASURES}
    for path in paths:
        if not path.is_file():
            return None
        scores = evaluate_per_query(qrels, read_run(path), ["ndcg@10", "r@100", "mrr@10"])
        for measure in MEASURES:
            for qid in qrels:
                values[measure][qid].append(scores.get(qid, {}).get(measure, 0.0))
    return values


def cell(seed_values: list[float], digits: int = 4) -> str:
    """A table cell: the mean ± the standard deviation over seeds, or the one seed's value."""
    mean = statistics.fmean(seed_values)
    spread = f" ± {statistics.stdev(seed_values):.{digits}f}" if len(seed_values) > 1 else ""
    return f"{mean:.{digits}f}{spread}"


def _size(entry: dict) -> tuple[str, str, str]:
    if "index_bytes" not in entry:
        return "–", "–", "–"
    encoded = f"{entry['passages'] / entry['encode_s']:.0f}" if "encode_s" in entry else "–"
    return f"{entry['index_bytes'] / 2**20:.1f}", f"{entry['index_bytes'] / entry['passages']:,.0f}", encoded


def report(backbone: str, seeds: list[int], output: str) -> None:
    speed = json.loads(speed_file(backbone).read_text()) if speed_file(backbone).is_file() else {}
    dense = per_query(backbone, "dense", seeds)
    header = ("| system | nDCG@10 | R@100 | MRR@10 | nDCG@10 vs dense (p) | index MB | bytes/passage | "
              "passages/s encoded | ms/query | ms/query, one at a time |")
    lines = [header, "|" + " --- |" * (header.count("|") - 1)]
    for system in SYSTEMS:
        values = per_query(backbone, system.name, seeds)
        if values is None:
            continue
        cells = []
        for measure in MEASURES:
            seed_means = [statistics.fmean(v[i] for v in values[measure].values()) for i in range(len(seeds))]
            cells.append(cell(seed_means))
        if system.name == "dense" or dense is None:
            versus = ""
        else:
            a = [statistics.fmean(v) for v in values["ndcg_cut_10"].values()]
            b = [statistics.fmean(v) for v in dense["ndcg_cut_10"].values()]
            versus = f"{statistics.fmean(a) - statistics.fmean(b):+.4f} ({paired_t_test(a, b):.2g})"
        entry = speed.get(system.name, {})
        ms = [str(entry.get(k, "–")) for k in ("ms_per_query", "ms_per_query_one_at_a_time")]
        lines.append(f"| {system.label} | {' | '.join(cells)} | {versus} | {' | '.join(_size(entry))} | "
                     f"{' | '.join(ms)} |")
    timed_seeds = sorted({entry["seed"] for entry in speed.values() if "seed" in entry})
    timed = f" --seeds {' '.join(map(str, timed_seeds))}" if timed_seeds else ""
    body = (f"### {backbone}, seeds {', '.join(map(str, seeds))} (mean ± std over seeds)\n\n" + "\n".join(lines)
            + "\n\nPaired two-sided t-test over the 101 topics of each system's per-topic nDCG@10 (mean over seeds) "
              "against the dense row's.\n\n```bash\n"
              f"python -m experiments.rag24_interaction run --backbone {backbone} --seeds {' '.join(map(str, seeds))}\n"
              f"python -m experiments.rag24_interaction speed --backbone {backbone}{timed}\n"
              f"python -m experiments.rag24_interaction report --backbone {backbone} "
              f"--seeds {' '.join(map(str, seeds))}\n```")
    write_section(output, f"interaction-{backbone}", body)
