"""Beyond one vector on rag24-mini: BERT_DOT against late interaction, multi-vector and BERT_CAT (issue 13).

    python -m experiments.rag24_interaction run --backbone bert-tiny --seeds 1 2 3
    python -m experiments.rag24_interaction speed --backbone bert-tiny --seeds 2
    python -m experiments.rag24_interaction report --backbone bert-tiny --seeds 1 2 3 --output docs/interaction-rag24.md

``run`` trains each model kind on the 200 training topics with the backbone's budget (the one of its best dense
row in Table 1, ``experiments.rag24_table1``: same steps, queries a step, learning rate), then writes 100 hits a
query for the 101 test topics to ``runs/rag24/interaction/BACKBONE/`` (committed): end-to-end runs from each
kind's index, and reranked top 100s of BM25 and of the dense row. Every step is a package CLI, printed as it
runs; finished steps are skipped, so an interrupted run continues. Training folders and indexes go to
``train-runs/interaction/BACKBONE/`` (git-ignored).

``run`` records each index's size on disk (seed 1). ``speed`` times each system on the models of the first of
``--seeds`` (any seed's models cost the same; the seed is recorded): encoding wall time through ``ance_ir.encode``
(model loading included), then, in this process with the model loaded once and warmed up, the milliseconds per test
topic of searching (or reranking) all 101 topics in one call ("batched") and one topic a call ("one at a time"):
median of ``--repeats`` repeats, the two alternating so that a change of machine load falls on both. A reranker
reranks the committed first-stage top 100s; BM25 is Pyserini's searcher on a Lucene index of the corpus. ``report``
evaluates the committed runs and writes the table with paired tests against the dense row.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ance_ir.index.records import folder_bytes
from experiments.rag24_table1 import BM25_RUNS, ROOT, py, sh

HITS = 100
TEST = "rag24-mini-test"
THREADS = 2  # torch and faiss threads: the CLIs' default on this two-core machine


@dataclass(frozen=True)
class Backbone:
    """A shipped model and the budget its kinds train with (Table 1's settings for its family)."""

    model: str
    steps: int
    batch_size: int
    lr: float
    dense_row: str  # Table 1's best dense row: runs/rag24/table1/BACKBONE/ROW.seedN.test.trec.gz
    dense_flags: tuple[str, ...] = ()  # how Table 1 encodes with this backbone
    extra: tuple[str, ...] = ()  # further training flags


BACKBONES = {
    "bert-tiny": Backbone("bert-tiny", steps=600, batch_size=16, lr=1e-4, dense_row="dpr",
                          dense_flags=("--pooling", "mean", "--no-normalize")),
    "minilm": Backbone("minilm", steps=100, batch_size=8, lr=2e-5, dense_row="dpr"),
}


@dataclass(frozen=True)
class Model:
    """A model kind trained from its config (``configs/rag24-mini/CONFIG.yaml``) with ``sets`` on top."""

    name: str
    config: str
    sets: tuple[str, ...] = ()


MODELS = {
    # a cross-encoder has no in-batch negatives: its config's 8 queries x 8 passages a step
    "cross-encoder": Model("cross-encoder", "cross-encoder", ("task.batch_size=8",)),
    # one BM25 negative a query + in-batch, as the dense DPR row
    "colbert": Model("colbert", "colbert", ("task.n_negatives=1",)),
    "mebert-m1": Model("mebert-m1", "mebert", ("model.m=1",)),
    "mebert-m2": Model("mebert-m2", "mebert", ("model.m=2",)),
    "mebert-m4": Model("mebert-m4", "mebert", ("model.m=4",)),
    "poly-encoder": Model("poly-encoder", "poly-encoder"),
}


@dataclass(frozen=True)
class System:
    """One row: a model used end to end (``first`` None: its own index) or reranking a first stage's top 100."""

    name: str
    label: str
    model: str | None  # a key of MODELS; None: BM25 or the dense row (committed runs)
    first: str | None = None  # "bm25" or "dense": rerank that run's top 100
    bits: int | None = None  # ColBERTv2: the token index compressed to this many bits a dimension


SYSTEMS = [
    System("bm25", "BM25", None),
    System("dense", "dense dual encoder (BERT_DOT, Table 1's best row)", None),
    System("ce-bm25", "cross-encoder (BERT_CAT) reranking BM25 top 100", "cross-encoder", first="bm25"),
    System("ce-dense", "cross-encoder (BERT_CAT) reranking dense top 100", "cross-encoder", first="dense"),
    System("colbert", "ColBERT end to end", "colbert"),
    System("colbert-rerank", "ColBERT reranking dense top 100", "colbert", first="dense"),
    System("colbertv2-2bit", "ColBERTv2, 2-bit residuals", "colbert", bits=2),
    System("colbertv2-1bit", "ColBERTv2, 1-bit residuals", "colbert", bits=1),
    System("mebert-m1", "ME-BERT m = 1", "mebert-m1"),
    System("mebert-m2", "ME-BERT m = 2", "mebert-m2"),
    System("mebert-m4", "ME-BERT m = 4", "mebert-m4"),
    System("poly-dense", "poly-encoder reranking dense top 100", "poly-encoder", first="dense"),
]


def work(backbone: str, *parts: str) -> Path:
    return ROOT / "train-runs" / "interaction" / backbone / Path(*parts)


def run_file(backbone: str, system: str, seed: int | None) -> Path:
    if system == "bm25":
        return ROOT / BM25_RUNS["test"]
    if system == "dense":
        row = BACKBONES[backbone].dense_row
        return ROOT / "runs" / "rag24" / "table1" / backbone / f"{row}.seed{seed}.test.trec.gz"
    return ROOT / "runs" / "rag24" / "interaction" / backbone / f"{system}.seed{seed}.test.trec.gz"


def train(backbone: str, model: Model, seed: int) -> Path:
    """Train (or find) ``model`` for ``seed``; return its run folder."""
    out = work(backbone, f"{model.name}.seed{seed}")
    if not (out / "final").is_dir():
        b = BACKBONES[backbone]
        sets = [f"model.name={b.model}", f"task.batch_size={b.batch_size}", f"optim.lr={b.lr}",
                f"optim.max_steps={b.steps}", *model.sets]
        sh(py("ance_ir.train", "--config", f"configs/rag24-mini/{model.config}.yaml", "--seed", str(seed),
              "--output", str(out), "--no-progress", *[a for s in sets for a in ("--set", s)], *b.extra))
    return out


def index_of(backbone: str, system: System, seed: int) -> Path:
    """Encode the corpus with the system's model (once per model and seed), compressed to ``system.bits``."""
    model = MODELS[system.model]
    index = work(backbone, "indexes", f"{model.name}.seed{seed}")
    if not (index / "meta.json").is_file():
        sh(py("ance_ir.encode", "--corpus", "rag24-mini", "--encoder", str(work(backbone, f"{model.name}.seed{seed}")),
              "--output", str(index), "--quiet"))
    if system.bits is None:
        return index
    compressed = index.with_name(f"{index.name}.{system.bits}bit")
    if not (compressed / "meta.json").is_file():
        sh(py("ance_ir.index.compress", "--index", str(index), "--bits", str(system.bits), "--output",
              str(compressed)))
    return compressed


def search_command(backbone: str, system: System, seed: int, topics: str, output: Path) -> list[str]:
    """The CLI that writes ``system``'s run for ``topics`` (a reranker reranks its first stage's run)."""
    model = str(work(backbone, f"{system.model}.seed{seed}"))
    if system.first is None:
        return py("ance_ir.search", "--index", str(index_of(backbone, system, seed)), "--topics", topics,
                  "--hits", str(HITS), "--output", str(output))
    return py("ance_ir.rerank", "--run", str(run_file(backbone, system.first, seed)), "--topics", topics,
              "--corpus", "rag24-mini", "--model", model, "--depth", str(HITS), "--hits", str(HITS), "--quiet",
              "--output", str(output))


def run(backbone: str, seeds: list[int], only: list[str] | None = None) -> None:
    for seed in seeds:
        for system in SYSTEMS:
            if system.model is None or (only and system.name not in only):
                continue
            out = run_file(backbone, system.name, seed)
            if not out.is_file():
                train(backbone, MODELS[system.model], seed)
                out.parent.mkdir(parents=True, exist_ok=True)
                sh(search_command(backbone, system, seed, TEST, out))
            if system.first is None and seed == 1:
                train(backbone, MODELS[system.model], seed)  # a committed run skipped it; the index needs the model
                index = index_of(backbone, system, seed)
                meta = json.loads((index / "meta.json").read_text())
                record(backbone, system.name, index_bytes=folder_bytes(index),
                       passages=meta["count"] // meta.get("vectors_per_passage", 1))


def record(backbone: str, system: str, **values: float) -> None:
    """Merge ``values`` into ``system``'s entry of the backbone's size and speed file."""
    path = speed_file(backbone)
    results = json.loads(path.read_text()) if path.is_file() else {}
    results.setdefault(system, {}).update(values)
    path.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")


def speed_file(backbone: str) -> Path:
    return ROOT / "runs" / "rag24" / "interaction" / backbone / "speed.json"


def speed(backbone: str, seed: int, repeats: int, only: list[str] | None = None) -> None:
    """Size and speed of each system (or of ``only`` these) on ``seed``'s models (see the module docstring); each
    system's entry is merged into the speed file as it is timed, so the systems can be timed in parts."""
    import faiss
    import torch

    from ance_ir.data import iter_corpus
    from ance_ir.datasets import resolve_corpus, resolve_topics

    torch.set_num_threads(THREADS)
    faiss.omp_set_num_threads(THREADS)
    topics = resolve_topics(TEST)
    encode_s: dict[str, float] = {}  # model -> its encoding time, taken once a call
    for system in SYSTEMS:
        if system.name == "dense" or (only and system.name not in only):
            continue  # dense: Table 1's model, not kept; ME-BERT m = 1 is the same single-vector search
        entry = {}
        if system.model is not None:
            train(backbone, MODELS[system.model], seed)  # kept in train-runs/; trained here when missing
        if system.name == "bm25":  # the Lucene index's size, beside the dense and token indexes' (``run``)
            entry.update(index_bytes=folder_bytes(bm25_index(backbone)),
                         passages=sum(1 for _ in iter_corpus(resolve_corpus("rag24-mini"))))
        if system.model is not None and system.first is None:  # a compressed index: the full one's time
            if system.model not in encode_s:
                encode_s[system.model] = sh(py("ance_ir.encode", "--corpus", "rag24-mini", "--encoder",
                                               str(work(backbone, f"{system.model}.seed{seed}")), "--output",
                                               str(work(backbone, "speed-index")), "--force", "--quiet"))
            entry["encode_s"] = round(encode_s[system.model], 2)
        print(f"timing {system.name}", flush=True)
        entry.update(latency(searcher(backbone, system, seed), topics, repeats))
        record(backbone, system.name, **entry, seed=seed)


def searcher(backbone: str, system: System, seed: int) -> Callable[[dict[str, str], int], dict]:
    """``system`` loaded once, as a function of (topics, query batch size) to a run of ``HITS`` hits a query, as its
    CLI (``ance_ir.search`` or ``ance_ir.rerank``) runs it."""
    if system.name == "bm25":
        from ance_ir.bm25 import BM25Searcher

        bm25 = BM25Searcher(bm25_index(backbone))
        return lambda topics, _: bm25.search(topics, hits=HITS, threads=THREADS)
    if system.first is not None:
        from ance_ir.data import read_run
        from ance_ir.datasets import resolve_corpus
        from ance_ir.rerank import load_reranker, passages_for, rerank

        first_path = run_file(backbone, system.first, seed)
        first = read_run(first_path)
        passages = passages_for(first, HITS, resolve_corpus("rag24-mini"), first_path)
        model = load_reranker(work(backbone, f"{system.model}.seed{seed}"))
        return lambda topics, _: rerank({q: first[q] for q in topics}, topics, passages, model, HITS,
                                        precision="auto")
    from ance_ir.index import load_dense_index
    from ance_ir.index.token_index import is_token_index, load_token_index
    from ance_ir.search import DenseSearcher, encoder_for_index
    from ance_ir.search.tokens import TokenSearcher, model_for_index

    index = index_of(backbone, system, seed)
    if is_token_index(index):
        tokens = load_token_index(index)
        late = TokenSearcher(tokens, model_for_index(tokens))
        return lambda topics, batch: late.search(topics, hits=HITS, batch_size=batch)
    dense = load_dense_index(index)
    single = DenseSearcher(dense, encoder_for_index(dense, None))
    return lambda topics, batch: single.search(topics, hits=HITS, batch_size=batch)


def bm25_index(backbone: str) -> Path:
    """rag24-mini's Lucene index (built by ``ance_ir.bm25`` once)."""
    index = work(backbone, "bm25-index")
    if not index.is_dir():
        sh(py("ance_ir.bm25", "index", "--corpus", "rag24-mini", "--output", str(index)))
    return index


def latency(search: Callable[[dict[str, str], int], dict], topics: dict[str, str], repeats: int) -> dict:
    """Milliseconds per topic of ``search`` over all ``topics`` in one call and one topic a call (medians of
    ``repeats`` alternating repeats after a warm-up call), with each repeat's values."""
    qids = list(topics)
    search({q: topics[q] for q in qids[:8]}, 8)
    batched, single = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        search(topics, 64)
        batched.append((time.perf_counter() - start) / len(qids) * 1000)
        start = time.perf_counter()
        for qid in qids:
            search({qid: topics[qid]}, 1)
        single.append((time.perf_counter() - start) / len(qids) * 1000)
    return {"ms_per_query": round(statistics.median(batched), 2),
            "ms_per_query_one_at_a_time": round(statistics.median(single), 2),
            "ms_repeats": [[round(b, 2), round(s, 2)] for b, s in zip(batched, single, strict=True)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["run", "speed", "report"])
    parser.add_argument("--backbone", choices=sorted(BACKBONES), required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--only", nargs="+", choices=[s.name for s in SYSTEMS if s.name != "dense"],
                        help="run and speed: these systems only (run skips BM25, which it does not train)")
    parser.add_argument("--repeats", type=int, default=3, help="speed: timed repeats a system (default 3)")
    parser.add_argument("--output", default="docs/interaction-rag24.md", help="report: Markdown file to update")
    args = parser.parse_args()
    if args.command == "run":
        run(args.backbone, args.seeds, args.only)
    elif args.command == "speed":
        speed(args.backbone, args.seeds[0], args.repeats, args.only)
    else:
        from experiments.rag24_interaction_report import report

        report(args.backbone, args.seeds, args.output)


if __name__ == "__main__":
    main()
