"""``python -m ance_ir.documents derive|split|pool``: the ANCE paper's document task (FirstP, MaxP).

    # documents and document qrels from a segmented corpus (a document: its segments joined)
    python -m ance_ir.documents derive --corpus rag24-mini --qrels rag24-mini-test rag24-mini-train \\
        --output data/rag24-mini-docs
    # MaxP: the first 4 windows of 512 tokens; FirstP: --max-passages 1
    python -m ance_ir.documents split --corpus data/rag24-mini-docs/corpus.jsonl --tokenizer bert-tiny \\
        --length 510 --stride 510 --max-passages 4 --output data/rag24-mini-docs/maxp.jsonl
    # a passage run ranked by document: max (MaxP) or first passage (FirstP)
    python -m ance_ir.documents pool --run runs/maxp.trec --pooling max --hits 100 --output runs/maxp.doc.trec

``derive`` writes ``corpus.jsonl`` and one ``qrels.NAME.txt`` per ``--qrels`` into the output folder (a document
is as relevant as its best judged segment;
``qrels.test.txt`` gives ``qrels.qrels.test.txt``). Ids are split at the first ``--delimiter`` (``#``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ance_ir.cli import ArgumentParser, add_run_tag_argument, check_apart, check_output, positive_int, run_cli
from ance_ir.data import InputError, default_run_tag, read_run, write_run
from ance_ir.data.corpus import iter_corpus, write_corpus
from ance_ir.data.qrels import write_qrels
from ance_ir.data.resume import slow_bar
from ance_ir.datasets import resolve_corpus, resolve_qrels
from ance_ir.documents import POOLINGS, document_qrels, documents_from_segments, pool_run
from ance_ir.documents.segments import DEFAULT_DELIMITER


def _stem(name: str) -> str:
    """A qrels file's or dataset's name without folders and extensions (``a/qrels.test.txt`` -> ``qrels.test``)."""
    return Path(name).name.removesuffix(".gz").removesuffix(".txt").removesuffix(".tsv")


def _non_empty(value: str) -> str:
    if not value:
        raise argparse.ArgumentTypeError("expected a non-empty string")
    return value


def _check_split_ids(ids: Iterable[str], delimiter: str, source: str | Path) -> None:
    """Refuse passage ids none of which has ``delimiter`` (every passage would be a document of its own) and an id
    that starts with it (it names no document)."""
    split = False
    for docid in ids:
        if docid.startswith(delimiter):
            raise InputError(source, f"passage id {docid!r} starts with the delimiter {delimiter!r}, so it names no "
                                     "document")
        split = split or delimiter in docid
    if not split:
        raise InputError(source, f"no passage id contains the delimiter {delimiter!r} (ids DOC{delimiter}N), so no "
                                 "passages join into a document; see --delimiter")


def _derive(args: argparse.Namespace) -> None:
    check_output(args.output, folder=True)
    names = [f"qrels.{_stem(name)}.txt" for name in args.qrels]
    twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if twice is not None:
        raise ValueError(f"--qrels: two of them would both be written to {twice}")
    corpus = resolve_corpus(args.corpus)
    for name in ("corpus.jsonl", *names):
        check_apart(Path(args.output) / name, [corpus, *args.qrels])
    segments = list(iter_corpus(corpus))
    _check_split_ids((segment.docid for segment in segments), args.delimiter, corpus)
    documents = documents_from_segments(segments, args.delimiter)
    qrels = {name: document_qrels(resolve_qrels(name), args.delimiter) for name in args.qrels}
    ids = {document.docid for document in documents}
    for name, judged in qrels.items():
        if not any(docid in ids for docs in judged.values() for docid in docs):
            raise InputError(name, f"judges none of the documents of {args.corpus}'s segments")
    output = Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    write_corpus(documents, output / "corpus.jsonl")
    for judged, file in zip(qrels.values(), names, strict=True):
        write_qrels(judged, output / file)
    print(f"wrote {output}: {len(documents)} documents, qrels {', '.join(qrels)}", file=sys.stderr)


def _split(args: argparse.Namespace) -> None:
    from ance_ir.documents.passages import split_documents
    from ance_ir.modeling.encoder import load_tokenizer
    from ance_ir.modeling.resolve import check_loadable, resolve_model_path

    check_output(args.output)
    corpus = resolve_corpus(args.corpus)
    check_apart(args.output, [corpus])
    model = resolve_model_path(args.tokenizer)
    check_loadable(model)
    tokenizer = load_tokenizer(model)
    positions, special = _positions(model, tokenizer), tokenizer.num_special_tokens_to_add()
    if args.length > positions - special:
        raise ValueError(f"--length: at most the model's {positions} positions less its {special} special tokens, "
                         f"{positions - special}, got {args.length}")
    documents = slow_bar(iter_corpus(corpus), desc="split", unit="document", show=not args.quiet)
    n = write_corpus(split_documents(documents, corpus, tokenizer, args.length, args.stride or args.length,
                                     args.max_passages, args.delimiter), args.output)
    print(f"wrote {args.output}: {n} passages", file=sys.stderr)


def _positions(model: str | Path, tokenizer: Any) -> int:
    """The tokens a window of ``model`` can hold: its position embeddings, else the tokenizer's limit."""
    from transformers import AutoConfig

    from ance_ir.modeling.kinds import text_positions

    try:
        positions = text_positions(AutoConfig.from_pretrained(model))
    except (OSError, ValueError):  # a tokenizer without a model config
        positions = None
    return min(tokenizer.model_max_length, positions or tokenizer.model_max_length)


def _pool(args: argparse.Namespace) -> None:
    check_output(args.output)
    check_apart(args.output, [args.run])
    tag = default_run_tag(args.output, args.run_tag)
    run = read_run(args.run)
    _check_split_ids((docid for ranking in run.values() for docid, _ in ranking), args.delimiter, args.run)
    pooled = pool_run(run, args.pooling, args.hits, args.delimiter)
    if not any(pooled.values()):
        raise InputError(args.run, f"{args.pooling} pooling leaves no document: no passage of the run is a "
                                   f"document's first (DOC{args.delimiter}0)")
    write_run(pooled, args.output, tag=tag)
    print(f"wrote {args.output}: {len(pooled)} queries", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m ance_ir.documents", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    derive = sub.add_parser("derive", help="documents and document qrels from a segmented corpus")
    derive.add_argument("--corpus", required=True, help="corpus of segments (file or dataset name)")
    derive.add_argument("--qrels", nargs="*", default=[], help="segment qrels (files or names) to turn into "
                                                               "document qrels")
    derive.add_argument("--output", required=True, help="folder to write corpus.jsonl and qrels.*.txt into")
    split = sub.add_parser("split", help="documents cut into windows of model tokens (DOCID#K)")
    split.add_argument("--corpus", required=True, help="document corpus (file or dataset name)")
    split.add_argument("--tokenizer", required=True, help="the model whose tokenizer counts tokens (alias, dir, id)")
    split.add_argument("--length", type=positive_int, default=510, help="tokens per window (default 510: 512 "
                                                                        "with [CLS] and [SEP])")
    split.add_argument("--stride", type=positive_int, help="tokens between window starts (default: --length)")
    split.add_argument("--max-passages", type=positive_int, help="windows kept per document (1: FirstP; "
                                                                 "default: all)")
    split.add_argument("--output", required=True, help="passage corpus to write (JSONL, or TSV by extension)")
    split.add_argument("--quiet", action="store_true", help="no progress bar (shown past a few seconds)")
    pool = sub.add_parser("pool", help="a passage run ranked by document (MaxP, FirstP)")
    pool.add_argument("--run", required=True, help="TREC run of passages DOCID#K")
    pool.add_argument("--pooling", choices=POOLINGS, default="max", help="max: MaxP; first: FirstP (default max)")
    pool.add_argument("--hits", type=positive_int, default=100, help="documents per query (default 100)")
    pool.add_argument("--output", required=True, help="TREC run file to write")
    add_run_tag_argument(pool)
    for command in (derive, split, pool):
        command.add_argument("--delimiter", type=_non_empty, default=DEFAULT_DELIMITER,
                             help=f"separates a document id from the rest of a passage id "
                                  f"(default {DEFAULT_DELIMITER})")
    args = parser.parse_args(argv)
    {"derive": _derive, "split": _split, "pool": _pool}[args.command](args)
    return 0


if __name__ == "__main__":
    run_cli(main)
