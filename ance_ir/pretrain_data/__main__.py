"""``python -m ance_ir.pretrain_data SOURCE``: write a pretraining source's pairs as training groups (JSONL).

    python -m ance_ir.pretrain_data ict --corpus rag24-mini --output pretrain/ict.jsonl --show 10
    python -m ance_ir.pretrain_data wlp --corpus rag24-mini --option titles=first-line --output pretrain/wlp.jsonl
    python -m ance_ir.pretrain_data qgen --corpus rag24-mini --option queries=expanded.jsonl.queries.jsonl \\
        --output qgen.jsonl --topics-out qgen.tsv --qrels-out qgen.qrels

The pairs are the ones ``data.source: SOURCE`` trains on with the same ``--seed`` and options, one group a pair:
new texts (ICT's passage without its sentence, crops) inline, corpus passages by id (``--with-text``: with their
text too), Spider's negative as the group's negative. ``data.source: groups`` with ``negatives: groups`` trains on
the file; pairs of one passage or document then may meet as in-batch negatives, which the source itself masks.
``--topics-out`` and ``--qrels-out`` also write the pairs whose positive is a corpus passage as topics and qrels
(grade 1), what ``python -m ance_ir.negatives`` mines hard negatives for (GPL's second stage); refused for a source
whose pairs keep other corpus passages from being their negatives (bfs, spider and wlp keep a document's or a
span's passages), which qrels cannot carry.
"""

from __future__ import annotations

import random
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from ance_ir.cli import ArgumentParser, check_apart, check_output, non_negative_int, positive_int, run_cli
from ance_ir.pretrain_data import SOURCES

if TYPE_CHECKING:
    from ance_ir.data import TrainingGroup
    from ance_ir.train.dataset import TrainData


def _option(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ValueError(f"--option: expected KEY=VALUE, got {text!r}")
    try:
        return key, yaml.safe_load(value) if value else ""
    except yaml.YAMLError:
        raise ValueError(f"--option {text!r}: the value is not valid YAML") from None


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="python -m ance_ir.pretrain_data", description=__doc__)
    parser.add_argument("source", choices=SOURCES, help="the pretraining data source")
    parser.add_argument("--corpus", required=True, help="corpus JSONL/TSV file or name (e.g. rag24-mini)")
    parser.add_argument("--output", required=True, help="groups JSONL to write (.gz: gzip)")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting of the source, as data.KEY in a training config (repeatable)")
    parser.add_argument("--seed", type=int, default=42, help="the training run's seed draws the same pairs")
    parser.add_argument("--sample", type=positive_int, help="write this many pairs drawn at random (default: all)")
    parser.add_argument("--show", type=non_negative_int, default=0, help="print this many of the written pairs")
    parser.add_argument("--with-text", action="store_true", help="write corpus passages' texts too")
    parser.add_argument("--quiet", action="store_true", help="no progress bars (shown past a few seconds)")
    parser.add_argument("--topics-out", help="also write the pairs' queries as a topics TSV (corpus positives only)")
    parser.add_argument("--qrels-out", help="also write the pairs as qrels, positive grade 1 (with --topics-out)")
    return parser


def _as_options(message: str) -> str:
    """A data source's message with its settings named as this command gives them: ``data.KEY`` -> ``--option KEY``."""
    return re.sub(r"\bdata\.(\w+)", r"--option \1", message)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if bool(args.topics_out) != bool(args.qrels_out):
        raise ValueError("--topics-out and --qrels-out go together")
    written: dict[Path, str] = {}  # each output file, resolved -> its flag
    for flag, path in (("--output", args.output), ("--topics-out", args.topics_out), ("--qrels-out", args.qrels_out)):
        if path:
            where = check_output(path).resolve()
            check_apart(path, [args.corpus])
            if where in written:
                raise ValueError(f"{written[where]} and {flag} name the same file {path}: each needs its own")
            written[where] = flag
    options: dict[str, object] = {}
    for key, value in map(_option, args.option):
        if key in options:
            raise ValueError(f"--option {key}: given twice")
        options[key] = value

    from ance_ir.data import GroupPassage, InputError, write_groups
    from ance_ir.train.dataset import DATA_SOURCES

    try:
        source = DATA_SOURCES[args.source].from_settings(args.corpus, options, args.seed, not args.quiet)
        data = source.load()
        groups = source.groups(data)
    except InputError as e:
        raise InputError(e.path, _as_options(e.reason), e.line) from None
    except ValueError as e:  # a ConfigError names the data.KEY setting
        raise ValueError(_as_options(str(e))) from None
    if args.sample and args.sample < len(groups):
        chosen = set(random.Random(args.seed).sample(range(len(groups)), args.sample))
        groups = [g for i, g in enumerate(groups) if i in chosen]
    if args.with_text:
        groups = [replace(g, positives=tuple(GroupPassage(p.docid, data.texts[p.docid]) for p in g.positives),
                          negatives=tuple(GroupPassage(n.docid, data.texts[n.docid]) for n in g.negatives))
                  for g in groups]
    queries = corpus_positive_groups(args.source, data, groups) if args.topics_out else []
    written = write_groups(args.output, groups)
    if args.topics_out:
        write_topics_and_qrels(queries, args.topics_out, args.qrels_out)
    print(f"{args.source}: {len(data.pairs)} pairs from {data.corpus_path}; wrote {written} to {args.output}",
          file=sys.stderr)
    for group in groups[:args.show]:
        positive = group.positives[0]
        print(f"{group.query_id}\tQ: {group.query}\n\tP: {positive.docid}: {data.texts[positive.docid]}")
    return 0


def corpus_positive_groups(source: str, data: TrainData, groups: list[TrainingGroup]) -> list[TrainingGroup]:
    """The groups whose positive is a corpus passage, what ``--topics-out`` writes.

    ValueError when there is none, or when a pair keeps other corpus passages from being its negatives (BFS's
    document, Spider's span holders): qrels of grade 1 would make them positives and, left out, they would be mined
    as hard negatives."""
    corpus = frozenset(data.docids)
    kept = [g for g in groups if g.positives[0].docid in corpus]
    if not kept:
        raise ValueError(f"--topics-out: no {source} pair has a corpus passage as its positive, so there are no "
                         "topics and qrels to write")
    for group in kept:
        shielded = (data.exclude[group.query_id] & corpus) - {group.positives[0].docid}
        if shielded:
            raise ValueError(f"--topics-out: {source} pairs keep other corpus passages from being their negatives "
                             f"({group.query_id}: {len(shielded)} of them), which topics and qrels cannot say; train "
                             "on the groups file (--output) instead")
    return kept


def write_topics_and_qrels(groups: list[TrainingGroup], topics: str, qrels: str) -> None:
    """``groups`` as a topics TSV and qrels (their positive, grade 1), each written atomically."""
    from ance_ir.data import atomic_write

    with atomic_write(topics) as f:
        f.writelines(f"{g.query_id}\t{' '.join(g.query.split())}\n" for g in groups)
    with atomic_write(qrels) as f:
        f.writelines(f"{g.query_id} 0 {g.positives[0].docid} 1\n" for g in groups)


if __name__ == "__main__":
    run_cli(main)
