"""Table 1 for one model family from the committed run files (see ``experiments.rag24_table1``)."""

from __future__ import annotations

import json
import statistics

from ance_ir.data import read_run, write_run
from ance_ir.datasets import resolve_qrels
from ance_ir.eval import evaluate, evaluate_per_query
from ance_ir.fusion.tune import cross_validated_interpolation
from ance_ir.train import read_log
from bench.common import write_section
from experiments.rag24_interaction_report import cell
from experiments.rag24_table1 import BM25_RUNS, FAMILIES, ROOT, kept_file, reported_rows, run_file, times_file

DEPTH = 100  # hits kept per query in the committed dense runs
FOLDS = 5  # cross-validation folds of the test topics for the fusion weight


def measures(path) -> dict[str, float]:
    """The report's columns for one test run file."""
    run = read_run(path)
    umbrela = evaluate(resolve_qrels("rag24-mini-test"), run, ["ndcg@10", "mrr@10", "r@100"])
    nist = evaluate(resolve_qrels("rag24-mini-test-nist"), run, ["ndcg@10"])
    return {**umbrela, "nist_ndcg_cut_10": nist["ndcg_cut_10"]}


def fuse_with_bm25(family: str, row: str, seed: int) -> list[float]:
    """Interpolate the dense test run with BM25, alpha chosen by 5-fold cross-validation on the test topics
    (a trained model's train-topic runs would overrate it); write the fused run; return the folds' alphas."""
    bm25, dense = read_run(ROOT / BM25_RUNS["test"]), read_run(run_file(family, row, seed, "test"))
    tuned = cross_validated_interpolation(bm25, dense, resolve_qrels("rag24-mini-test"), FOLDS, depth=DEPTH, k=DEPTH)
    write_run(tuned.run, run_file(family, f"hybrid-{row}", seed, "test"), tag=f"{family}-hybrid-{row}")
    return tuned.fold_alphas


def per_query_ndcg(family: str, row: str, seeds: list[int] | None) -> dict[str, float]:
    """Test nDCG@10 of every query, averaged over the seeds' runs (``seeds`` None: the one unseeded run)."""
    qrels = resolve_qrels("rag24-mini-test")
    runs = [run_file(family, row, None, "test")] if seeds is None else [run_file(family, row, s, "test")
                                                                        for s in seeds]
    per_run = [evaluate_per_query(qrels, read_run(path), ["ndcg@10"]) for path in runs]
    return {q: statistics.fmean(r[q]["ndcg_cut_10"] for r in per_run) for q in per_run[0]}


def paired_comparisons(family: str, seeds: list[int]) -> str:
    """ANCE against the other rows: mean difference of per-query nDCG@10 (seed-averaged) and a paired t-test."""
    from ance_ir.eval.significance import PairedDifference

    labels = {r.name: r.label for r in reported_rows(family, seeds)}
    labels["zero-shot"] = f"zero-shot {FAMILIES[family].model}"
    pairs = [("ance", other) for other in ("zero-shot", "rand", "nce", "bm25", "bm25-rand", "bm25-nce", "inbatch",
                                           "dpr", "bm25-and-rand", "bm25-bm25-and-rand")]
    pairs += [("ance-inbatch", other) for other in ("dpr", "inbatch", "ance")]
    pairs += [("ance-partial", "ance")]  # issue 12: within 0.005 nDCG@10 of the full refresh?
    pairs = [(a, b) for a, b in pairs if a in labels and b in labels]
    lines = ["| comparison (test nDCG@10, 101 queries) | A | B | A − B | queries A better / worse | paired t-test p |",
             "| --- | --- | --- | --- | --- | --- |"]
    ndcg = {row: per_query_ndcg(family, row, None if row == "zero-shot" else seeds)
            for row in dict.fromkeys(name for pair in pairs for name in pair)}
    for a, b in pairs:
        x, y = ndcg[a], ndcg[b]
        qids = sorted(x.keys() & y.keys())
        xs, ys = [x[q] for q in qids], [y[q] for q in qids]
        c = PairedDifference.of(xs, ys)
        lines.append(f"| {labels[a]} vs {labels[b]} | {statistics.fmean(xs):.4f} | {statistics.fmean(ys):.4f} | "
                     f"{c.difference:+.4f} | {c.better} / {c.worse} | {c.t_p:.3g} |")
    return "\n".join(lines) + "\n"


def training_signal(family: str, seeds: list[int]) -> str:
    """Median loss and gradient norms over each row's last C steps (the continuation stage), mean over seeds."""
    cont = FAMILIES[family].cont
    lines = [f"| row | loss (median, last {cont} steps) | gradient norm | bottom third of the layers |",
             "| --- | --- | --- | --- |"]
    for row in reported_rows(family, seeds):
        per_seed = []
        for seed in seeds:
            records = [r for r in read_log(kept_file(family, row.name, seed, "log.jsonl")) if "loss" in r]
            last = [r for r in records if r["step"] > records[-1]["step"] - cont]
            per_seed.append([statistics.median(r[k] for r in last)
                             for k in ("loss", "grad_norm", "grad_norm_bottom")])
        lines.append(f"| {row.label} | " + " | ".join(f"{statistics.fmean(v):.4g}" for v in zip(*per_seed, strict=True))
                     + " |")
    return "\n".join(lines) + "\n"


def median_or_dash(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}" if values else "–"


def async_overlap(family: str, seeds: list[int]) -> str:
    """Per asynchronously refreshed run: refresh time, when each negatives version was adopted, and the
    trainer's speed in log windows with no refresh running against windows entirely during one."""
    lines = ["| run | async refreshes | refresh s (median) | version → adopted at step | staleness at adoption | "
             "max staleness | steps/s, no refresh | steps/s, during a refresh | ratio |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in (r for r in reported_rows(family, seeds) if r.refresh):
        for seed in seeds:
            log = read_log(kept_file(family, row.name, seed, "log.jsonl"))
            refreshes = [r for r in json.loads(kept_file(family, row.name, seed, "refresh.json").read_text())
                         if r["mode"] == "async"]
            adopted = [(e["version"], e["step"]) for e in log if e.get("event") == "negatives" and e["version"]]
            windows = [r for r in log if "steps_per_s" in r]
            idle = [r["steps_per_s"] for r in windows if r["inferencer_busy"] == 0]
            busy = [r["steps_per_s"] for r in windows if r["inferencer_busy"] == 1]
            ratio = f"{statistics.median(busy) / statistics.median(idle):.2f}" if idle and busy else "–"
            lines.append(
                f"| {row.label}, seed {seed} | {len(refreshes)} | "
                f"{median_or_dash([r['total_s'] for r in refreshes])} | "
                f"{', '.join(f'{v} → {s}' for v, s in adopted) or '–'} | "
                f"{', '.join(str(s - v) for v, s in adopted) or '–'} | {max(r['staleness'] for r in windows)} | "
                f"{median_or_dash(idle)} | {median_or_dash(busy)} | {ratio} |")
    return "\n".join(lines) + "\n"


def report(family: str, seeds: list[int], output: str | None) -> None:
    times = json.loads(times_file(family).read_text()) if times_file(family).is_file() else {}
    rows: list[tuple[str, list[dict], list[float]]] = [
        ("BM25 (Pyserini, k1=0.9 b=0.4)", [measures(ROOT / BM25_RUNS["test"])], []),
        (f"zero-shot {FAMILIES[family].model}", [measures(run_file(family, "zero-shot", None, "test"))], []),
    ]
    train_ndcg = {}
    for row in reported_rows(family, seeds):
        rows.append((row.label, [measures(run_file(family, row.name, s, "test")) for s in seeds],
                     [times[f"{row.name}.seed{s}"] for s in seeds if f"{row.name}.seed{s}" in times]))
        train_ndcg[row.name] = statistics.fmean(
            evaluate(resolve_qrels("rag24-mini-train"), read_run(run_file(family, row.name, s, "train")),
                     ["ndcg@10"])["ndcg_cut_10"] for s in seeds)
    best = max(train_ndcg, key=train_ndcg.get)
    alphas = sorted({a for s in seeds for a in fuse_with_bm25(family, best, s)})
    label = next(r.label for r in reported_rows(family, seeds) if r.name == best)
    rows.append((f"{label} + BM25 (alpha by {FOLDS}-fold CV: {', '.join(f'{a:g}' for a in alphas)})",
                 [measures(run_file(family, f"hybrid-{best}", s, "test")) for s in seeds], []))

    keys = ["ndcg_cut_10", "recip_rank", "recall_100", "nist_ndcg_cut_10"]
    lines = ["| row | nDCG@10 | MRR@10 | R@100 | nDCG@10 (NIST) | train wall time (s) |",
             "| --- | --- | --- | --- | --- | --- |"]
    for name, per_seed, walls in rows:
        values = [cell([m[k] for m in per_seed], 3) for k in keys]
        lines.append(f"| {name} | " + " | ".join(values) + f" | {cell(walls, 0) if walls else '–'} |")
    body = (f"### Family `{family}` (seeds {', '.join(map(str, seeds))}; best dense row on train nDCG@10: "
            f"{label})\n\n" + "\n".join(lines) + "\n\n"
            "Per query, each row's nDCG@10 averaged over the seeds, ANCE against the other rows:\n\n"
            + paired_comparisons(family, seeds) + "\n"
            "Training signal, from the committed logs (`ROW.seedN.log.jsonl`):\n\n"
            + training_signal(family, seeds) + "\n"
            f"Asynchronous refreshes of the `{family}` ANCE runs (from the committed `*.log.jsonl` and "
            "`*.refresh.json` copies of each run's log and refresh records; a window is `log_every` steps):\n\n"
            + async_overlap(family, seeds))
    print(body)
    if output:
        write_section(output, f"table1 {family}", body)
