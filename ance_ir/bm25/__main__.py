"""``python -m ance_ir.bm25 index|search``: Lucene indexing and BM25 batch search through Pyserini.

    python -m ance_ir.bm25 index --corpus rag24-mini --output indexes/rag24-mini.lucene
    python -m ance_ir.bm25 search --index indexes/rag24-mini.lucene --topics rag24-mini-test --output runs/bm25.trec

``search`` prints the run's metrics when the topics have known qrels (or ``--qrels`` is given), as
``python -m ance_ir.search`` does.

``search`` goes through the topics in chunks of 512 kept in OUTPUT.partial until the run is written: an interrupted
search resumes where it stopped (other settings, or an index built again in place, are refused).

``--query-weights MODEL`` searches DeepCT-Query's way: each query's words weighted by a DeepCT model trained on query
term recall (``task: deepct`` with ``task.target: query``), over the unchanged passages.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ance_ir.cli import (
    ArgumentParser,
    check_apart,
    check_new_folder,
    check_output,
    non_negative_float,
    positive_int,
    run_cli,
    unit_float,
)
from ance_ir.data import check_run_tag
from ance_ir.datasets import resolve_corpus, resolve_eval_qrels, resolve_topics

if TYPE_CHECKING:
    from ance_ir.bm25 import BM25Searcher


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m ance_ir.bm25", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    index_p = sub.add_parser("index", help="build a Lucene index")
    index_p.add_argument("--corpus", required=True, help="corpus JSONL/TSV file or dataset name")
    index_p.add_argument("--output", required=True, help="index folder to create")
    index_p.add_argument("--threads", type=positive_int, default=2, help="indexing threads")
    index_p.add_argument("--force", action="store_true", help="replace an existing output folder")
    index_p.add_argument("--quiet", action="store_true", help="no progress bars (reading the corpus, then Lucene's "
                                                              "count, logged about once a minute)")
    search_p = sub.add_parser("search", help="batch BM25 search to a TREC run")
    search_p.add_argument("--index", required=True, help="Lucene index folder")
    search_p.add_argument("--topics", required=True, help="topics TSV file or name (e.g. rag24-mini-test, dl19)")
    search_p.add_argument("--output", required=True, help="TREC run file to write")
    search_p.add_argument("--k1", type=non_negative_float, default=0.9, help="BM25 term-frequency saturation")
    search_p.add_argument("--b", type=unit_float, default=0.4, help="BM25 length normalisation, 0 to 1")
    search_p.add_argument("--hits", type=positive_int, default=1000, help="hits per query (default 1000)")
    search_p.add_argument("--threads", type=positive_int, default=2, help="search threads")
    search_p.add_argument("--run-tag", default="bm25", help="the run file's last column")
    search_p.add_argument("--query-weights", metavar="MODEL",
                          help="weight each query's words with a DeepCT-Query model (deepct, task.target: query); "
                               "searched one query at a time, in one thread")
    search_p.add_argument("--qrels", help="qrels to evaluate with (default: the topics' own, when known)")
    search_p.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)

    if args.command == "index":
        from ance_ir.bm25 import build_lucene_index

        check_new_folder(args.output, args.force)
        corpus = resolve_corpus(args.corpus)
        check_apart(args.output, [corpus])
        try:
            out = build_lucene_index(corpus, args.output, threads=args.threads,
                                     progress=not args.quiet)
        except KeyboardInterrupt as e:  # Ctrl-C or SIGTERM (cli.Terminated): the same kind goes on
            kept = "the index it replaces is kept" if Path(args.output).exists() else "nothing was written"
            raise type(e)(f"interrupted: {kept}; a rerun builds the index from the start") from None
        print(f"wrote Lucene index {out}", file=sys.stderr)
        return 0

    from ance_ir.bm25 import BM25Searcher
    from ance_ir.negatives.resume import QUERY_CHUNK, write_searched_run
    from ance_ir.negatives.sources import BM25Source

    check_output(args.output)
    check_apart(args.output, [args.topics, args.qrels], [args.index])
    check_run_tag(args.run_tag)
    topics = resolve_topics(args.topics)
    qrels = resolve_eval_qrels(args.qrels, args.topics, topics)
    searcher = BM25Searcher(args.index, args.k1, args.b, args.query_weights)
    settings = {"index": str(Path(args.index).resolve()), **BM25Source(args.index).resume_record(),
                "k1": args.k1, "b": args.b, "query_weights": _weights(searcher)}
    run = write_searched_run(lambda queries, hits: searcher.search(
        queries, hits=hits, threads=args.threads, progress=not args.quiet and len(topics) <= QUERY_CHUNK),
        topics, args.hits, args.output, args.run_tag, settings, show_progress=not args.quiet)
    if qrels:
        from ance_ir.eval import print_run_metrics

        print_run_metrics(qrels, run, args.output, args.qrels or args.topics)
    return 0


def _weights(searcher: BM25Searcher) -> str | None:
    """The sha256 of the DeepCT-Query model's weights that weight the queries; None without one."""
    if searcher.weigher is None:
        return None
    from ance_ir.modeling.inference import weights_sha256

    return weights_sha256(searcher.weigher)


if __name__ == "__main__":
    run_cli(main)
