"""``python -m ance_ir.search``: dense or late-interaction (optionally hybrid with BM25) search to a TREC run.

    python -m ance_ir.search --topics rag24-mini-test --index indexes/rag24-mini.minilm \\
        --encoder minilm --output runs/minilm.trec
    python -m ance_ir.search --topics dl19 --index indexes/X --output runs/X.trec \\
        --bm25-index indexes/rag24-mini.lucene --fusion interpolation --alpha 0.02

Hybrid interpolation scores ``alpha * bm25 + (1 - alpha) * dense``, the meaning ``--alpha`` has in every
ance-ir CLI (``python -m ance_ir.fusion --runs BM25 DENSE --method interpolation --alpha A`` fuses the same
way): like Pyserini's hybrid alpha it weights the sparse side (Pyserini scores ``alpha * sparse + dense``: its
alpha a ranks as a / (1 + a) here). A passage missing from one list takes that list's lowest score for the query
(Pyserini's hybrid convention). ``--fusion rrf`` uses reciprocal rank fusion. When the topics have known qrels, the
metrics are printed.

A token index (a colbert model's, ``python -m ance_ir.encode``; compressed or not) is recognised by its
``meta.json``: each query token's ``--nprobe`` nearest centroids give the candidate passages, which are scored
exactly by MaxSim over their stored token vectors (``--nprobe 0``: exhaustive MaxSim over every passage;
``--ndocs N``: only the N candidates best by centroid interaction, PLAID's pruning):

    python -m ance_ir.search --topics rag24-mini-test --index indexes/rag24-mini.colbert --output runs/colbert.trec

An impact index (a splade model's, ``python -m ance_ir.encode``) is recognised by its ``meta.json`` too: the
queries are encoded by its model to integer term weights and searched with Pyserini's LuceneImpactSearcher:

    python -m ance_ir.search --topics rag24-mini-test --index indexes/rag24-mini.splade --output runs/splade.trec

Queries are encoded as the index's ``meta.json`` records (encoder, pooling, normalisation); another model named
with ``--encoder`` keeps the index's pooling, normalisation, query length and prefix. An index without one (built
by Pyserini) needs ``--encoder`` and, unless the model's own settings fit, ``--pooling`` and ``--normalize``; given
for an index whose ``meta.json`` says otherwise, the flags win with a warning. ``--nprobe`` applies to a token index
or an IVF-PQ dense index (the lists searched), ``--ndocs`` to a token index only, ``--ef-search`` to an HNSW dense
index only, ``--fusion``/``--alpha``/``--k1``/``--b`` to hybrid search only (``--bm25-index``).

The queries are searched in chunks of 512, each kept in OUTPUT.partial until the run is written: an interrupted
search resumes where it stopped (the same command; other settings, an index encoded again or a model trained again
in place are refused).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ance_ir.cli import (
    ArgumentParser,
    add_import_argument,
    add_run_tag_argument,
    check_apart,
    check_output,
    fill_defaults,
    given_flags,
    load_cli_plugins,
    non_negative_float,
    positive_int,
    run_cli,
    unit_float,
)
from ance_ir.data import InputError, Run, Topics, default_run_tag
from ance_ir.datasets import resolve_eval_qrels, resolve_topics
from ance_ir.fusion.fuse import ALPHA_MEANING
from ance_ir.negatives.resume import QUERY_CHUNK, write_searched_run

if TYPE_CHECKING:
    import torch

    from ance_ir.bm25 import BM25Searcher

#: a search of the command: queries and hits per query -> their run
Search = Callable[[Topics, int], Run]
#: the hybrid's part of a resume record, for a search that is not one (so that a resume cannot switch it on or off)
NOT_HYBRID = {"bm25_index": None, "index_commit": None, "k1": None, "b": None, "fusion": None, "alpha": None}


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m ance_ir.search", description=__doc__)
    parser.add_argument("--topics", required=True, help="topics TSV file or name (rag24-mini-test, dl19, ...)")
    parser.add_argument("--index", required=True, help="dense index folder or Pyserini prebuilt dense index name")
    parser.add_argument("--encoder", help="model dir, training run folder, alias or HF id (default: the one in "
                                          "the index's meta.json)")
    parser.add_argument("--output", required=True, help="TREC run file to write")
    parser.add_argument("--pooling", choices=("cls", "mean"),
                        help="query pooling (default: the index's meta.json, else the encoder's own)")
    parser.add_argument("--normalize", action=argparse.BooleanOptionalAction,
                        help="L2-normalise query vectors (default: the index's meta.json, else the encoder's own)")
    parser.add_argument("--hits", type=positive_int, default=1000, help="hits per query (default 1000)")
    parser.add_argument("--nprobe", type=int,
                        help="token index: centroids probed per query token for candidates (0: exhaustive MaxSim "
                             "over every passage; default 4); IVF-PQ dense index: inverted lists searched per "
                             "query (default: the index's own)")
    parser.add_argument("--ndocs", type=int,
                        help="token index: score exactly only the N candidates best by centroid interaction "
                             "(PLAID's pruning; 0: every candidate, the default)")
    parser.add_argument("--ef-search", type=positive_int,
                        help="HNSW dense index: candidates kept per query while searching (faiss efSearch; default: "
                             "the index's own, 128 when built here); a query gets at most about this many hits")
    parser.add_argument("--batch-size", type=positive_int, default=64, help="queries per forward pass")
    parser.add_argument("--threads", type=positive_int, default=2, help="torch and faiss threads")
    parser.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cuda when available)")
    add_run_tag_argument(parser)
    parser.add_argument("--bm25-index", help="Lucene index for hybrid search")
    parser.add_argument("--fusion", choices=["interpolation", "rrf"],
                        help="how --bm25-index's run and the dense run are fused (default interpolation)")
    parser.add_argument("--k1", type=non_negative_float, help="hybrid: BM25's k1 (default 0.9)")
    parser.add_argument("--b", type=unit_float, help="hybrid: BM25's b, 0 to 1 (default 0.4)")
    parser.add_argument("--alpha", type=unit_float,
                        help=f"interpolation: {ALPHA_MEANING}; the first run is BM25 (--bm25-index) (default 0.1)")
    parser.add_argument("--qrels", help="qrels to evaluate with (default: the topics' own, when known)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar (shown over the chunks of a search of "
                                                             "more than 512 queries; for fewer, when they take more "
                                                             "than one --batch-size of a dense or token search, or 128 "
                                                             "queries of a BM25 or impact one)")
    add_import_argument(parser)
    args = parser.parse_args(argv)
    check_output(args.output)
    check_apart(args.output, [args.topics, args.qrels], [args.index, args.bm25_index])
    args.run_tag = default_run_tag(args.output, args.run_tag)
    _check_hybrid_settings(args)
    for index in filter(None, (args.index, args.bm25_index)):  # before a named topic set is fetched
        if ("/" in index or index.startswith((".", "~"))) and not Path(index).expanduser().is_dir():
            raise InputError(index, "no such index folder")  # a path: no Pyserini prebuilt index is named so
    load_cli_plugins(args.imports)

    import faiss
    import torch

    from ance_ir.modeling.inference import resolve_device

    device = resolve_device(args.device)
    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)
    topics = resolve_topics(args.topics)
    qrels = resolve_eval_qrels(args.qrels, args.topics, topics)
    show_progress = not args.quiet and len(topics) <= QUERY_CHUNK  # more: a bar over the chunks
    search, record = _searcher(args, device, show_progress)
    if args.bm25_index:
        search, record = _hybrid(args, search, record, show_progress)
    run = write_searched_run(search, topics, args.hits, args.output, args.run_tag,
                             {**NOT_HYBRID, **record, "device": device.type, "batch_size": args.batch_size},
                             show_progress=not args.quiet)
    if qrels:
        from ance_ir.eval import print_run_metrics

        print_run_metrics(qrels, run, args.output, args.qrels or args.topics)
    return 0


def _check_hybrid_settings(args: argparse.Namespace) -> None:
    """Refuse ``--fusion``/``--alpha``/``--k1``/``--b`` without ``--bm25-index``, and ``--alpha`` with rrf; fill in
    their defaults."""
    given = given_flags(args, {"--fusion": "fusion", "--alpha": "alpha", "--k1": "k1", "--b": "b"})
    if given and not args.bm25_index:
        raise ValueError(f"{given[0]} sets hybrid search; it needs --bm25-index")
    if args.fusion == "rrf" and "--alpha" in given:
        raise ValueError("--alpha weights --fusion interpolation; rrf has no weight")
    fill_defaults(args, {"fusion": "interpolation", "alpha": 0.1, "k1": 0.9, "b": 0.4})


def _searcher(args: argparse.Namespace, device: torch.device, show_progress: bool) -> tuple[Search, dict[str, Any]]:
    """The search of ``--index`` (dense, token or impact: told apart by its ``meta.json``), and the record of what
    decides its runs, which a resumed search must find unchanged."""
    from ance_ir.index.impact import is_impact_index
    from ance_ir.index.token_index import is_token_index

    if is_token_index(args.index):
        if args.ef_search:
            raise ValueError(f"{args.index}: --ef-search applies to an HNSW dense index; this is a token index")
        return _token_searcher(args, device, show_progress)
    if args.ndocs is not None:
        raise ValueError(f"{args.index}: --ndocs applies to a token index's candidates; this is not a token index")
    if is_impact_index(args.index):
        if flags := given_flags(args, {"--nprobe": "nprobe", "--ef-search": "ef_search"}):
            raise ValueError(f"{args.index}: {flags[0]} applies to a dense or token index; this is an impact index")
        return _impact_searcher(args, device, show_progress)
    return _dense_searcher(args, device, show_progress)


def _dense_searcher(args: argparse.Namespace, device: torch.device,
                    show_progress: bool) -> tuple[Search, dict[str, Any]]:
    """Dense search of a faiss index with the query encoder its ``meta.json`` names (or ``--encoder``)."""
    from ance_ir.index import load_dense_index
    from ance_ir.search import DenseSearcher, encoder_for_index, resolve_index

    index = load_dense_index(resolve_index(args.index))
    if args.nprobe is not None:
        index.set_nprobe(args.nprobe)
    if args.ef_search:
        index.set_ef_search(args.ef_search)
    if index.ef_search is not None and index.ef_search < args.hits:
        print(f"note: {args.index} is an HNSW index searched with ef_search {index.ef_search}, below --hits "
              f"{args.hits}: a query gets at most about {index.ef_search} hits (raise --ef-search)", file=sys.stderr)
    overrides = {k: v for k, v in (("pooling", args.pooling), ("normalize", args.normalize)) if v is not None}
    encoder = encoder_for_index(index, args.encoder, **overrides).to(device)
    searcher = DenseSearcher(index, encoder)
    record = {**_index_record(index.folder, encoder), "encoder_config": encoder.config.to_dict(),
              "nprobe": index.nprobe, "ef_search": index.ef_search}
    return (lambda queries, hits: searcher.search(queries, hits=hits, batch_size=args.batch_size,
                                                  progress=show_progress)), record


def _token_searcher(args: argparse.Namespace, device: torch.device,
                    show_progress: bool) -> tuple[Search, dict[str, Any]]:
    """Late-interaction search of a token index with the colbert model its ``meta.json`` names (or ``--encoder``)."""
    from ance_ir.index.token_index import load_token_index
    from ance_ir.search.tokens import TokenSearcher, model_for_index

    fill_defaults(args, {"nprobe": 4, "ndocs": 0})
    if args.pooling or args.normalize is not None:
        raise ValueError(f"{args.index}: a token index; --pooling and --normalize are dense settings")
    if args.nprobe < 0:
        raise ValueError(f"--nprobe must be 0 (exhaustive) or more, got {args.nprobe}")
    if args.ndocs < 0:
        raise ValueError(f"--ndocs must be 0 (no pruning) or more, got {args.ndocs}")
    if args.ndocs and not args.nprobe:
        raise ValueError("--ndocs prunes the candidates of --nprobe; --nprobe 0 scores every passage exactly")
    if 0 < args.ndocs < args.hits:
        raise ValueError(f"--ndocs {args.ndocs} is below --hits {args.hits}: a pruned search returns at most "
                         f"--ndocs passages a query")
    index = load_token_index(args.index)
    model = model_for_index(index, args.encoder).to(device)
    searcher = TokenSearcher(index, model)
    record = {**_index_record(Path(args.index), model), "nprobe": args.nprobe, "ndocs": args.ndocs}
    return (lambda queries, hits: searcher.search(queries, hits=hits, nprobe=args.nprobe, batch_size=args.batch_size,
                                                  ndocs=args.ndocs, progress=show_progress)), record


def _impact_searcher(args: argparse.Namespace, device: torch.device,
                     show_progress: bool) -> tuple[Search, dict[str, Any]]:
    """Learned-sparse search of an impact index with the splade model its ``meta.json`` names (or ``--encoder``)."""
    from ance_ir.index.impact import read_meta
    from ance_ir.index.records import recorded_model
    from ance_ir.modeling.kinds import load_index_model
    from ance_ir.search.impact import ImpactSearcher

    if args.pooling or args.normalize is not None:
        raise ValueError(f"{args.index}: an impact index; --pooling and --normalize are dense settings")
    meta = read_meta(args.index)

    def load() -> torch.nn.Module:
        return load_index_model(args.encoder or meta["encoder"], meta["kind"], "head", **meta["encoder_config"])

    model = load() if args.encoder else recorded_model(args.index, load)
    searcher = ImpactSearcher(args.index, model.to(device))
    return (lambda queries, hits: searcher.search(queries, hits=hits, batch_size=args.batch_size,
                                                  threads=args.threads, progress=show_progress)), \
        _index_record(Path(args.index), model)


def _index_record(folder: Path, model: torch.nn.Module) -> dict[str, Any]:
    """What identifies an index (:func:`~ance_ir.index.records.index_identity`: encoded again in place, it changes)
    and the model that encodes the queries (its weights: trained again in place)."""
    from ance_ir.index.records import index_identity
    from ance_ir.modeling.inference import weights_sha256

    return {"index": str(folder.resolve()), **index_identity(folder), "weights_sha256": weights_sha256(model)}


def _hybrid(args: argparse.Namespace, search: Search, record: dict[str, Any],
            show_progress: bool) -> tuple[Search, dict[str, Any]]:
    """``search`` fused with BM25 over ``--bm25-index`` (``--fusion``, ``--alpha``), and its record."""
    from ance_ir.bm25 import BM25Searcher
    from ance_ir.fusion import interpolate, reciprocal_rank_fusion
    from ance_ir.negatives.sources import BM25Source

    bm25 = BM25Searcher(args.bm25_index, args.k1, args.b)
    checked: list[bool] = []

    def fused(queries: Topics, hits: int) -> Run:
        run = search(queries, hits)
        if not checked:  # the first queries' passages tell whether the two indexes share a corpus
            _check_same_corpus(bm25, args.bm25_index, args.index, run)
            checked.append(True)
        sparse = bm25.search(queries, hits=hits, threads=args.threads, progress=show_progress)
        if args.fusion == "interpolation":
            return interpolate(sparse, run, args.alpha, 1 - args.alpha, depth=hits, k=hits)
        return reciprocal_rank_fusion([run, sparse], depth=hits, k=hits)

    return fused, {**record, "bm25_index": str(Path(args.bm25_index).resolve()),
                   **BM25Source(args.bm25_index).resume_record(), "k1": args.k1, "b": args.b, "fusion": args.fusion,
                   "alpha": args.alpha}


def _check_same_corpus(bm25: BM25Searcher, bm25_index: str, index: str, run: Run) -> None:
    """Refuse a BM25 index of another corpus than ``index``'s: up to 100 of the passages ``index`` retrieved (its
    run, ``run``) must each be a document of the Lucene index."""
    docids = sorted({docid for ranking in run.values() for docid, _ in ranking})[:100]
    missing = next((docid for docid in docids if bm25.searcher.doc(docid) is None), None)
    if missing is not None:
        raise InputError(bm25_index, f"has no document {missing!r}, which {index} retrieved: the two indexes are of "
                                     "different corpora")


if __name__ == "__main__":
    run_cli(main)
