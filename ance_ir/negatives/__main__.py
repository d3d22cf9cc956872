"""``python -m ance_ir.negatives``: mine hard negatives into Tevatron-style training groups (JSONL).

    python -m ance_ir.negatives --topics rag24-mini-train --qrels rag24-mini-train --corpus rag24-mini \\
        --source bm25 --index indexes/rag24-mini.lucene --output negatives/bm25.jsonl.gz
    python -m ance_ir.negatives --topics rag24-mini-train --corpus rag24-mini --source dense \\
        --index indexes/rag24-mini.minilm --skip 3 --relative-margin 0.05 --output negatives/minilm.jsonl
    python -m ance_ir.negatives --topics T.tsv --qrels Q.txt --corpus C.jsonl --source run --run R.trec --output G.jsonl

One group per topic with a positive (judged >= --min-positive-grade and in the corpus): the query, its
positives and up to --depth negatives mined from the source's top --hits candidates, best first, with the
source's scores. Passages judged >= --exclude-grade are never negatives. --skip / --max-rank keep candidate
ranks in [skip, max-rank) (0-based, counted before any removal); --margin / --relative-margin drop
candidates scoring within that distance of the query's lowest-scoring retrieved positive (the rules of
sentence-transformers' mine_hard_negatives). With the defaults and a bm25 source this is exactly the
trainer's BM25 warm-up negatives (the bm25 sampler's, as ance_ir.bm25.bm25_negatives gives them, at depth 200).

The candidates are retrieved in chunks of 512 queries, each kept in OUTPUT.partial until the groups are written: an
interrupted run resumes from the chunks it finished, and a rerun with other source settings, topics or --hits is
refused (a --source run file is read, not retrieved, so it has nothing to resume).

Topics without qrels get pseudo labels with --pseudo-positives K: each query's top K candidates (scoring at least
--min-pseudo-score) are its positives, e.g. a teacher's ranking of unlabelled queries (RocketQA's augmentation):

    python -m ance_ir.negatives --topics msmarco-dev --corpus rag24-mini --source dense \\
        --index indexes/rag24-mini.minilm --hits 31 --depth 30 --pseudo-positives 1 --output pseudo.jsonl.gz
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
from typing import TYPE_CHECKING

from ance_ir.cli import (
    ArgumentParser,
    add_import_argument,
    check_apart,
    check_output,
    fill_defaults,
    finite_float,
    given_flags,
    load_cli_plugins,
    non_negative_float,
    non_negative_int,
    positive_int,
    run_cli,
    unit_float,
)
from ance_ir.negatives.sources import CANDIDATE_SOURCES, source_class

if TYPE_CHECKING:
    from ance_ir.data import TrainingGroup
    from ance_ir.negatives.mining import MiningReport


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="python -m ance_ir.negatives", description=__doc__)
    data = parser.add_argument_group("data")
    data.add_argument("--topics", required=True, help="topics TSV file or name (e.g. rag24-mini-train)")
    data.add_argument("--qrels", help="qrels file or name (default: the topics' own, for a topics name)")
    data.add_argument("--corpus", required=True, help="corpus JSONL/TSV file or name (e.g. rag24-mini)")
    data.add_argument("--output", required=True, help="groups JSONL to write (.gz: gzip)")
    add_import_argument(parser)
    data.add_argument("--with-text", action="store_true", help="write passage texts and titles (query text always)")
    source = parser.add_argument_group("candidates")
    source.add_argument("--source", default="bm25",
                        help=f"where candidates come from: {', '.join(sorted(CANDIDATE_SOURCES))} or a plugin's "
                             "(--import) (default bm25)")
    source.add_argument("--source-option", type=_key_value, action="append", metavar="KEY=VALUE",
                        help="a parameter of a plugin's source (repeatable)")
    source.add_argument("--index", help="bm25: Lucene index folder; dense: dense index folder")
    source.add_argument("--encoder", help="dense: query encoder (default: the one in the index's meta.json)")
    source.add_argument("--run", help="run: TREC run file")
    source.add_argument("--hits", type=positive_int, default=200, help="candidates retrieved per query (default 200)")
    source.add_argument("--k1", type=non_negative_float, help="bm25: k1 (default 0.9)")
    source.add_argument("--b", type=unit_float, help="bm25: b, 0 to 1 (default 0.4)")
    source.add_argument("--threads", type=positive_int,
                        help="bm25: search threads; dense: torch and faiss threads (default 2)")
    source.add_argument("--batch-size", type=positive_int, help="dense: query batch size (default 64)")
    source.add_argument("--device", help="dense: cpu, cuda or cuda:N for the query encoder (default: cuda when "
                                          "available)")
    mining = parser.add_argument_group("mining")
    mining.add_argument("--depth", type=positive_int, default=200, help="negatives kept per query (default 200)")
    mining.add_argument("--skip", type=non_negative_int, default=0,
                        help="ignore candidates ranked above this (0-based)")
    mining.add_argument("--max-rank", type=positive_int, help="ignore candidates ranked at or below this (0-based)")
    mining.add_argument("--margin", type=non_negative_float,
                        help="drop candidates with score + margin > the positive's score")
    mining.add_argument("--relative-margin", type=non_negative_float,
                        help="drop candidates with score > the positive's score * (1 - margin)")
    mining.add_argument("--min-positive-grade", type=non_negative_int, default=1,
                        help="judgments of at least this grade are positives (default 1: binary qrels; graded "
                             "qrels such as rag24-mini's 0-3 may want 2, as the trainer's configs use)")
    mining.add_argument("--pseudo-positives", type=positive_int, metavar="K",
                        help="topics without qrels: each query's top K candidates are its positives (pseudo labels, "
                             "e.g. from a teacher's run: RocketQA's augmentation); its negatives the rest")
    mining.add_argument("--min-pseudo-score", type=finite_float, metavar="S",
                        help="with --pseudo-positives: only candidates scoring at least S (the confident ones); a "
                             "query with none gets no group")
    mining.add_argument("--exclude-grade", type=non_negative_int, default=1,
                        help="passages judged at least this grade are never negatives (default 1)")
    mining.add_argument("--grade-scores", action="store_true",
                        help="each passage's score is its judged grade for the query (0 when unjudged), not the "
                             "source's: the qrels as the teacher of a listwise distillation loss (loss: kl)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


# each built-in source's own flags (option: dest); --source-option is a plugin source's
SOURCE_FLAGS = {"bm25": {"--index": "index", "--k1": "k1", "--b": "b", "--threads": "threads"},
                "dense": {"--index": "index", "--encoder": "encoder", "--threads": "threads",
                          "--batch-size": "batch_size", "--device": "device"},
                "run": {"--run": "run"}}


def source_params(args: argparse.Namespace) -> dict:
    """The ``build_source`` parameters for the chosen source; ValueError for an unknown source or flags that do not
    apply to it."""
    source_class(args.source)
    flags = {flag: dest for own in SOURCE_FLAGS.values() for flag, dest in own.items()}
    flags["--source-option"] = "source_option"
    own = SOURCE_FLAGS.get(args.source, {"--source-option": "source_option"})
    misplaced = [flag for flag in given_flags(args, flags) if flag not in own]
    if misplaced:
        raise ValueError(f"{misplaced[0]} does not apply to --source {args.source}")
    fill_defaults(args, {"k1": 0.9, "b": 0.4, "threads": 2, "batch_size": 64, "source_option": []})
    if args.source == "bm25":
        if args.index is None:
            raise ValueError(f"--source bm25 needs --index, a Lucene index of the corpus; build one with: "
                             f"python -m ance_ir.bm25 index --corpus {args.corpus} --output DIR")
        return {"index": args.index, "k1": args.k1, "b": args.b, "threads": args.threads}
    if args.source == "dense":
        if args.index is None:
            raise ValueError(f"--source dense needs --index, a dense index of the corpus; build one with: "
                             f"python -m ance_ir.encode --corpus {args.corpus} --encoder MODEL --output DIR")
        return {"index": args.index, "encoder": args.encoder, "batch_size": args.batch_size,
                "threads": args.threads, "device": args.device}
    if args.source == "run":
        if args.run is None:
            raise ValueError("--source run needs --run, a TREC run file")
        return {"path": args.run}
    return dict(args.source_option)  # a plugin's source: its own parameters


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    check_output(args.output)
    check_apart(args.output, [args.topics, args.qrels, args.corpus, args.run], [args.index])
    load_cli_plugins(args.imports)
    from ance_ir.data import output_lock

    with output_lock(args.output):  # one writer, refused at once; the chunks and temporaries of a killed run are ours
        return _negatives(args)


def _negatives(args: argparse.Namespace) -> int:
    from ance_ir.data import write_groups
    from ance_ir.data.resume import kept_on_interrupt, work_folder
    from ance_ir.datasets import qrels_for_topics, resolve_corpus, resolve_qrels, resolve_topics
    from ance_ir.negatives.mining import build_groups, check_mining_params
    from ance_ir.negatives.resume import ChunkedRetrieval, retrieval_settings
    from ance_ir.negatives.sources import build_source

    check_mining_params(args.depth, args.skip, args.max_rank, args.margin, args.relative_margin)
    params = source_params(args)
    source = build_source(args.source, **params)
    if source.computes:  # a source that only reads its candidates has nothing to resume
        source = ChunkedRetrieval(source, args.output, retrieval_settings(args.source, params, source),
                                  show_progress=not args.quiet)
    topics = resolve_topics(args.topics)
    if args.pseudo_positives and args.qrels:
        raise ValueError("--pseudo-positives labels topics from the source's ranking; drop --qrels")
    if args.min_pseudo_score is not None and not args.pseudo_positives:
        raise ValueError("--min-pseudo-score needs --pseudo-positives")
    if args.grade_scores and args.pseudo_positives:
        raise ValueError("--grade-scores needs judged topics; it does not go with --pseudo-positives")
    if args.pseudo_positives:
        qrels = {}
    else:
        qrels = resolve_qrels(args.qrels) if args.qrels else qrels_for_topics(args.topics)
    if qrels is None:
        raise ValueError(f"no qrels are known for {args.topics}; pass --qrels")
    corpus = resolve_corpus(args.corpus)
    chunked = isinstance(source, ChunkedRetrieval)
    with kept_on_interrupt(source.work, "mining and writing the groups", lambda: source.complete) if chunked \
            else contextlib.nullcontext():
        try:
            groups, report = build_groups(
                topics, qrels, corpus, source, hits=args.hits, depth=args.depth, skip=args.skip,
                max_rank=args.max_rank, margin=args.margin, relative_margin=args.relative_margin,
                min_positive_grade=args.min_positive_grade, exclude_grade=args.exclude_grade, with_text=args.with_text,
                progress=None if args.quiet else lambda line: print(f"{line} ...", file=sys.stderr),
                pseudo_positives=args.pseudo_positives or 0, min_pseudo_score=args.min_pseudo_score,
                grade_scores=args.grade_scores)
        except Exception:  # only an interrupted retrieval is kept to resume
            if chunked:
                source.discard()
            raise
        _report(args, groups, report)
        write_groups(args.output, groups)
    shutil.rmtree(work_folder(args.output), ignore_errors=True)
    mean = report.negatives / len(groups)
    print(f"wrote {args.output}: {len(groups)} groups, {report.negatives} negatives ({mean:.1f} per group, "
          f"{report.short} groups with fewer than {args.depth})", file=sys.stderr)
    return 0


def _report(args: argparse.Namespace, groups: list[TrainingGroup], report: MiningReport) -> None:
    """Refuse a mining that made no group; say on stderr what the mining left out, and that the groups are written."""
    qrels_name = "the pseudo labels" if args.pseudo_positives else args.qrels or args.topics
    if not groups:
        raise ValueError(f"no training groups: no topic of {args.topics} has a passage of {args.corpus} judged "
                         f">= {args.min_positive_grade} in {qrels_name}")
    notes = [(report.positives_not_in_corpus, f"positives of {qrels_name} are not in the corpus; skipped"),
             (report.without_positive, f"topics have no passage of the corpus judged >= {args.min_positive_grade}; "
                                       "no group for them"),
             (report.candidates_not_in_corpus, "candidates are not in the corpus; never used as negatives")]
    for count, what in notes:
        if count:
            print(f"note: {count} {what}", file=sys.stderr)
    if report.without_candidates:
        print(f"note: the {args.source} source gave no candidates for {report.without_candidates} queries",
              file=sys.stderr)
    if report.no_positive_score:
        print(f"note: no positive of {report.no_positive_score} queries is among their candidates; "
              "no margin applied to them", file=sys.stderr)
    if not args.quiet:
        print(f"writing {len(groups)} groups to {args.output} ...", file=sys.stderr)


if __name__ == "__main__":
    run_cli(main)
