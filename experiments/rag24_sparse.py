"""The sparse side on rag24-mini (issue 15): BM25, BM25 with k1 and b tuned, learned sparse indexes (SPLADE, DeepCT)
and doc2query expansions, each alone and fused with the best dense run.

    python -m experiments.rag24_sparse run [--only bm25 bm25-tuned]
    python -m experiments.rag24_sparse report --output docs/sparse-rag24.md

``run`` builds each system's Lucene index with Pyserini under ``train-runs/sparse/`` (git-ignored), writes its
train and test runs (1,000 hits a query) to ``runs/rag24/sparse/`` (committed), and records the index's size and
postings and the queries/s of searching the 101 test topics in one process (``runs/rag24/sparse/stats.json``).
BM25 rows tune k1 and b by nDCG@10 on the 200 training topics (the grid below) and search the test topics with the
chosen values. Fusion interpolates each system with the zero-shot MiniLM run (``runs/rag24/minilm.*``, the best
dense run of docs/retrieval-rag24.md), alpha chosen on the training topics, as ``python -m ance_ir.fusion --method
interpolation --tune`` does. ``report`` evaluates the committed runs. The models are trained here once (git-ignored
under ``train-runs/sparse/``): SPLADE-tiny fine-tuned, DeepCT and the doc2query generator, each from its config in
``configs/rag24-mini/``; the generator's perplexities and samples go to ``stats.json`` and the report.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ance_ir.data import read_run
from ance_ir.datasets import resolve_qrels, resolve_topics
from ance_ir.eval import evaluate
from ance_ir.fusion.tune import best_alpha, sweep_alpha
from ance_ir.index.records import folder_bytes
from bench.common import write_section
from experiments.rag24_table1 import ROOT, py, sh

WORK = ROOT / "train-runs" / "sparse"
RUNS = ROOT / "runs" / "rag24" / "sparse"
STATS = RUNS / "stats.json"
DENSE = {split: ROOT / "runs" / "rag24" / f"minilm.{split}.trec.gz" for split in ("train", "test")}
K1S = (0.4, 0.6, 0.8, 0.9, 1.0, 1.2, 1.5, 1.8, 2.2, 2.6, 3.0)
BS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.75, 0.9)
HITS = 1000


@dataclass(frozen=True)
class System:
    """A Lucene index (folder ``index``) built by ``build(output)``: searched with BM25 (``tune``: k1 and b chosen
    on train; ``query_weights``: the queries weighted by the DeepCT-Query model it returns), or, with ``impact``, an
    impact index searched by ``python -m ance_ir.search`` with its model."""

    name: str
    label: str
    index: str
    build: Callable[[Path], None]
    tune: bool = False
    impact: bool = False
    query_weights: Callable[[], str] | None = None


def bm25_index(corpus: str) -> Callable[[Path], None]:
    def build(output: Path) -> None:
        sh(py("ance_ir.bm25", "index", "--corpus", corpus, "--output", str(output)))
    return build


def impact_index(encoder: Callable[[], str]) -> Callable[[Path], None]:
    def build(output: Path) -> None:
        sh(py("ance_ir.encode", "--corpus", "rag24-mini", "--encoder", encoder(), "--output", str(output), "--quiet"))
    return build


SPLADE_CPU_BUDGET = ("--batch-size", "8", "--set", "task.n_negatives=1", "--max-steps", "300")


def splade_finetuned() -> str:
    """SPLADE-tiny fine-tuned on the training topics (``configs/rag24-mini/splade.yaml``), trained once, at a budget
    a 2-core CPU trains in minutes (``SPLADE_CPU_BUDGET``: 8 queries and 16 passages a step, in-batch, 300 steps;
    the config's 16 x 8 passages and 600 steps run at 0.05 steps/s here)."""
    model = WORK / "splade-ft"
    if not (model / "final").is_dir():
        sh(py("ance_ir.train", "--config", "configs/rag24-mini/splade.yaml", "--output", str(model), "--no-progress",
              "--save-every", "100", *SPLADE_CPU_BUDGET))
    return str(model / "final")


def deepct_trained() -> str:
    """DeepCT on bert-tiny, trained on the training topics' term recall (``configs/rag24-mini/deepct.yaml``)."""
    model = WORK / "deepct"
    if not (model / "final").is_dir():
        sh(py("ance_ir.train", "--config", "configs/rag24-mini/deepct.yaml", "--output", str(model), "--no-progress"))
    return str(model / "final")


def deepct_query_trained() -> str:
    """DeepCT-Query on bert-tiny, trained on the training queries' term recall over their judged passages
    (``configs/rag24-mini/deepct-query.yaml``)."""
    model = WORK / "deepct-query"
    if not (model / "final").is_dir():
        sh(py("ance_ir.train", "--config", "configs/rag24-mini/deepct-query.yaml", "--output", str(model),
              "--no-progress"))
    return str(model / "final")


def deepct_rewritten(output: Path) -> None:
    """DeepCT's own setup: the DeepCT impact index's passages rewritten with each word repeated by its impact (its
    predicted term frequency), indexed for BM25."""
    impact = WORK / "indexes" / "deepct"
    if not (impact / "meta.json").is_file():
        impact_index(deepct_trained)(impact)
    corpus = WORK / "deepct-rewritten.jsonl"
    if not corpus.is_file():
        sh(py("ance_ir.index.rewrite", "--index", str(impact), "--output", str(corpus)))
    bm25_index(str(corpus))(output)


def generator_trained() -> str:
    """The bert-tiny query generator trained on the training topics (``configs/rag24-mini/generator.yaml``)."""
    model = WORK / "generator"
    if not (model / "final").is_dir():
        sh(py("ance_ir.train", "--config", "configs/rag24-mini/generator.yaml", "--output", str(model),
              "--no-progress"))
    return str(model / "final")


def expanded_corpus(n: int) -> Path:
    """rag24-mini with ``n`` generated queries appended to each passage (``python -m ance_ir.expand``, seed 42)."""
    corpus = WORK / f"d2q-{n}.jsonl"
    if not corpus.is_file():
        sh(py("ance_ir.expand", "--corpus", "rag24-mini", "--generator", generator_trained(), "--n", str(n),
              "--seed", "42", "--output", str(corpus), "--quiet"))
    return corpus


def doc2query(n: int) -> Callable[[Path], None]:
    return lambda output: bm25_index(str(expanded_corpus(n)))(output)


def doc2query_upper_bound(output: Path) -> None:
    """Passages judged relevant (>= 2) to a training topic expanded with those topics' own text."""
    corpus = WORK / "d2q-train-queries.jsonl"
    if not corpus.is_file():
        sh(py("ance_ir.expand", "--corpus", "rag24-mini", "--topics", "rag24-mini-train", "--qrels",
              "rag24-mini-train", "--min-positive-grade", "2", "--output", str(corpus), "--quiet"))
    bm25_index(str(corpus))(output)


SYSTEMS = [
    System("bm25", "BM25 (k1 = 0.9, b = 0.4)", "bm25", bm25_index("rag24-mini")),
    System("bm25-tuned", "BM25, k1 and b tuned on train", "bm25", bm25_index("rag24-mini"), tune=True),
    System("splade-tiny", "SPLADE-tiny, zero-shot (impact index)", "splade-tiny",
           impact_index(lambda: "splade-tiny"), impact=True),
    System("splade-ft", "SPLADE-tiny fine-tuned on train, 300 steps of 8 queries (impact index)", "splade-ft",
           impact_index(splade_finetuned), impact=True),
    System("deepct", "DeepCT (bert-tiny trained on train; impact index, queries as words, no IDF)", "deepct",
           impact_index(deepct_trained), impact=True),
    System("deepct-bm25", "DeepCT, passages rewritten with its term frequencies, BM25 tuned on train",
           "deepct-bm25", deepct_rewritten, tune=True),
    System("deepct-query", "DeepCT-Query (query words weighted by bert-tiny trained on train), BM25 tuned on train",
           "bm25", bm25_index("rag24-mini"), tune=True, query_weights=deepct_query_trained),
    *(System(f"d2q-{n}", f"doc2query, {n} generated queries a passage (bert-tiny generator), BM25 tuned on train",
             f"d2q-{n}", doc2query(n), tune=True) for n in (5, 10, 20)),
    System("d2q-train-queries", "passages judged for a training topic expanded with its text (upper bound), "
           "BM25 tuned on train", "d2q-train-queries", doc2query_upper_bound, tune=True),
]


def run_file(system: str, split: str) -> Path:
    return RUNS / f"{system}.{split}.trec.gz"


def fused_file(system: str, split: str, method: str = "interpolation") -> Path:
    return RUNS / f"{system}+minilm{'.rrf' if method == 'rrf' else ''}.{split}.trec.gz"


def index_stats(index: Path) -> dict[str, float]:
    """Size on disk, passages, and postings (sum of document frequencies) per passage, from Pyserini's reader."""
    from pyserini.index.lucene import LuceneIndexReader

    reader = LuceneIndexReader(str(index))
    passages = reader.stats()["documents"]
    postings = sum(term.df for term in reader.terms())
    return {"index_bytes": folder_bytes(index), "passages": passages, "postings_per_passage": postings / passages}


def tuned_parameters(index: Path, query_weights: str | None) -> tuple[float, float, list[dict[str, float]]]:
    """The (k1, b) of the grid with the best train nDCG@10, and the whole sweep."""
    from ance_ir.bm25 import BM25Searcher

    topics, qrels = resolve_topics("rag24-mini-train"), resolve_qrels("rag24-mini-train")
    searcher, sweep = BM25Searcher(index, query_weights=query_weights), []  # the model loaded once
    for k1 in K1S:
        for b in BS:
            searcher.searcher.set_bm25(k1, b)
            found = searcher.search(topics, hits=100)
            ndcg = evaluate(qrels, found, ["ndcg@10"])["ndcg_cut_10"]
            sweep.append({"k1": k1, "b": b, "ndcg@10": ndcg})
    best = max(sweep, key=lambda s: (s["ndcg@10"], -abs(s["k1"] - 0.9) - abs(s["b"] - 0.4)))
    return best["k1"], best["b"], sweep


def queries_per_second(system: System, index: Path, k1: float, b: float) -> float:
    """Test topics searched in one process, one thread, after a warm-up search (impact, query weights: query encoding
    included)."""
    topics = resolve_topics("rag24-mini-test")
    if system.impact:
        from ance_ir.index.impact import read_meta
        from ance_ir.modeling.kinds import load_model
        from ance_ir.search.impact import ImpactSearcher

        meta = read_meta(index)
        searcher = ImpactSearcher(index, load_model(meta["encoder"], meta["kind"], **meta["encoder_config"]))
    else:
        from ance_ir.bm25 import BM25Searcher

        searcher = BM25Searcher(index, k1, b, system.query_weights() if system.query_weights else None)
    searcher.search(topics, hits=HITS, threads=1)
    start = time.perf_counter()
    searcher.search(topics, hits=HITS, threads=1)
    return len(topics) / (time.perf_counter() - start)


def fuse(system: str) -> float:
    """Interpolate the system's test run with MiniLM's, alpha chosen on the training topics, and fuse them by RRF
    (k = 60); returns alpha."""
    alpha = best_alpha(sweep_alpha(read_run(run_file(system, "train")), read_run(DENSE["train"]),
                                   resolve_qrels("rag24-mini-train")))
    sh(py("ance_ir.fusion", "--runs", str(run_file(system, "test")), str(DENSE["test"]), "--method", "interpolation",
          "--alpha", str(alpha), "--hits", str(HITS), "--run-tag", f"{system}+minilm",
          "--output", str(fused_file(system, "test"))))
    sh(py("ance_ir.fusion", "--runs", str(run_file(system, "test")), str(DENSE["test"]), "--method", "rrf",
          "--hits", str(HITS), "--run-tag", f"{system}+minilm.rrf", "--output", str(fused_file(system, "test", "rrf"))))
    return alpha


def run_system(system: System, stats: dict) -> None:
    index = WORK / "indexes" / system.index
    if not (index / "meta.json").is_file() and not any(index.glob("segments*")):
        system.build(index)
    entry = stats.setdefault(system.name, {})
    k1, b = 0.9, 0.4
    weights = system.query_weights() if system.query_weights else None
    if system.tune:
        if "k1" not in entry:
            k1, b, sweep = tuned_parameters(index, weights)
            entry.update(k1=k1, b=b, sweep=sweep)
        k1, b = entry["k1"], entry["b"]
    for split in ("train", "test"):
        out = run_file(system.name, split)
        if out.is_file():
            continue
        if system.impact:
            sh(py("ance_ir.search", "--topics", f"rag24-mini-{split}", "--index", str(index), "--hits", str(HITS),
                  "--run-tag", system.name, "--output", str(out)))
        else:
            sh(py("ance_ir.bm25", "search", "--index", str(index), "--topics", f"rag24-mini-{split}", "--k1", str(k1),
                  "--b", str(b), "--hits", str(HITS), "--run-tag", system.name, "--output", str(out),
                  *(["--query-weights", weights] if weights else [])))
    entry.update(index_stats(index / "lucene" if system.impact else index),
                 queries_per_second=queries_per_second(system, index, k1, b), alpha=fuse(system.name))


def judged_pairs(split: str) -> list[tuple[str, str, str]]:
    """``(qid, docid, query)`` of every passage judged >= 2 for a topic of ``split``, by topic then passage id."""
    topics, qrels = resolve_topics(f"rag24-mini-{split}"), resolve_qrels(f"rag24-mini-{split}")
    return [(qid, docid, topics[qid]) for qid in sorted(qrels) if qid in topics
            for docid, grade in sorted(qrels[qid].items()) if grade >= 2]


def generator_record() -> dict:
    """The generator's perplexity on judged (passage, query) pairs of train and of the held-out test topics (and the
    untrained warm start's), and ten test passages with their test query and the queries it wrote for them."""
    from ance_ir.data.corpus import corpus_texts
    from ance_ir.datasets import resolve_corpus
    from ance_ir.modeling.kinds import load_model
    from ance_ir.pretrain_data.qgen import read_generated_queries

    passages = corpus_texts(resolve_corpus("rag24-mini"))
    pairs = {split: [(passages[d], q) for _, d, q in judged_pairs(split) if d in passages]
             for split in ("train", "test")}
    trained, start = load_model(generator_trained()), load_model("bert-tiny", "generator")
    record = {f"perplexity_{split}": trained.perplexity(pairs[split]) for split in pairs}
    record["perplexity_test_untrained"] = start.perplexity(pairs["test"])
    generated = read_generated_queries(expanded_corpus(5).with_name(expanded_corpus(5).name + ".queries.jsonl"))
    samples, seen = [], set()
    for qid, docid, query in judged_pairs("test"):
        if qid not in seen and docid in generated:
            seen.add(qid)
            samples.append({"qid": qid, "docid": docid, "query": query, "passage": passages[docid][:300],
                            "generated": generated[docid]})
        if len(samples) == 10:
            break
    return {**record, "pairs": {split: len(pairs[split]) for split in pairs}, "samples": samples}


def run(only: list[str] | None) -> None:
    RUNS.mkdir(parents=True, exist_ok=True)
    stats = json.loads(STATS.read_text()) if STATS.is_file() else {}
    for system in SYSTEMS:
        if only is None or system.name in only:
            run_system(system, stats)
            STATS.write_text(json.dumps(stats, indent=1, sort_keys=True) + "\n")
    if (only is None or "d2q-5" in only) and "generator" not in stats:
        stats["generator"] = generator_record()
        STATS.write_text(json.dumps(stats, indent=1, sort_keys=True) + "\n")


def generator_section(record: dict) -> str:
    """The generator's perplexities and its samples next to the real test queries."""
    lines = [f"Perplexity per query token (end token included) of the bert-tiny generator on the judged (passage, "
             f"query) pairs: {record['perplexity_train']:.1f} on train ({record['pairs']['train']} pairs, seen in "
             f"training), {record['perplexity_test']:.1f} on the held-out test topics ({record['pairs']['test']} "
             f"pairs); the untrained warm start: {record['perplexity_test_untrained']:.1f} on test.", "",
             "Ten test passages (the first judged >= 2 for each of the first ten test topics), the test query, and "
             "the five queries the generator wrote for the passage (`d2q-5`, seed 42, top-k 10):", ""]
    for sample in record["samples"]:
        passage = " ".join(sample["passage"].split())
        lines += [f"- **{sample['qid']}**, `{sample['docid']}`: \"{passage}...\"",
                  f"  - test query: *{sample['query']}*",
                  f"  - generated: {'; '.join(sample['generated'])}"]
    return "\n".join(lines) + "\n\n```bash\npython -m experiments.rag24_sparse run --only d2q-5\n```"


def report(output: str) -> None:
    stats = json.loads(STATS.read_text())
    qrels = resolve_qrels("rag24-mini-test")
    measures = ["ndcg@10", "r@100", "mrr@10"]
    keys = ["ndcg_cut_10", "recall_100", "recip_rank"]
    header = ("| system | nDCG@10 | R@100 | MRR@10 | interpolated with MiniLM: nDCG@10 (alpha) | R@100 | "
              "RRF with MiniLM: nDCG@10 | R@100 | index MB | postings / passage | queries/s |")
    lines = [header, "|" + " --- |" * (header.count("|") - 1)]
    dense = evaluate(qrels, read_run(DENSE["test"]), measures)
    lines.append(f"| zero-shot MiniLM (dense, for reference) | "
                 f"{' | '.join(f'{dense[k]:.4f}' for k in keys)} | – | – | – | – | – | – | – |")
    for system in SYSTEMS:
        if not run_file(system.name, "test").is_file():
            continue
        entry = stats[system.name]
        alone = evaluate(qrels, read_run(run_file(system.name, "test")), measures)
        fused = evaluate(qrels, read_run(fused_file(system.name, "test")), measures)
        rrf = evaluate(qrels, read_run(fused_file(system.name, "test", "rrf")), measures)
        label = system.label + (f" (k1 = {entry['k1']}, b = {entry['b']})" if system.tune else "")
        lines.append(f"| {label} | {' | '.join(f'{alone[k]:.4f}' for k in keys)} | "
                     f"{fused['ndcg_cut_10']:.4f} ({entry['alpha']}) | {fused['recall_100']:.4f} | "
                     f"{rrf['ndcg_cut_10']:.4f} | {rrf['recall_100']:.4f} | "
                     f"{entry['index_bytes'] / 2**20:.1f} | {entry['postings_per_passage']:.1f} | "
                     f"{entry['queries_per_second']:.0f} |")
    body = ("\n".join(lines) + "\n\nnDCG@10, R@100 and MRR@10 on the 101 rag24-mini-test topics (UMBRELA qrels). "
            "Postings per passage: the index's postings (sum of its terms' document frequencies) over its passages. "
            "Queries/s: the 101 test topics searched in one process with one thread, 1,000 hits, after a warm-up.\n\n"
            f"```bash\npython -m experiments.rag24_sparse run\npython -m experiments.rag24_sparse report "
            f"--output {output}\n```")
    write_section(output, "sparse-table", body)
    if "generator" in stats:
        write_section(output, "generator-samples", generator_section(stats["generator"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="index, search and fuse every system")
    run_parser.add_argument("--only", nargs="+", choices=[s.name for s in SYSTEMS])
    report_parser = commands.add_parser("report", help="write the table")
    report_parser.add_argument("--output", default="docs/sparse-rag24.md")
    args = parser.parse_args()
    if args.command == "run":
        run(args.only)
    else:
        report(args.output)


if __name__ == "__main__":
    main()
