"""``python -m ance_ir.expand``: doc2query, a corpus with queries appended to its passages, for BM25 to index.

    python -m ance_ir.expand --corpus rag24-mini --generator train-runs/rag24-mini/generator --n 10 \\
        --output corpora/rag24-mini.d2q.jsonl
    python -m ance_ir.bm25 index --corpus corpora/rag24-mini.d2q.jsonl --output indexes/rag24-mini.d2q.lucene

Each passage gets --n queries sampled from the generator (a model trained with task: generator, its run folder, or
a sequence-to-sequence checkpoint such as castorini/doc2query-t5-base-msmarco): each token from the --top-k most
likely, then the smallest set of them with probability --top-p, at --temperature. A passage's queries depend only
on its text and these settings with --seed, so a rerun, a resumed run or the same passage in another corpus gets
the same ones (with the same --batch-size and --precision).

With --topics (and --qrels, unless a named topic set brings its own) instead of --generator, every passage judged
>= --min-positive-grade for one of the topics gets those topics' own text (the upper bound of doc2query: the real
queries); the others stay as they are.

OUTPUT is the expanded corpus (JSONL {"id", "contents"}: the corpus's ids and order, the text then its queries);
OUTPUT.queries.jsonl lists each passage's queries ({"docid": ..., "queries": [...]} a line, the file the qgen data
source and GPL read). Work is saved in chunks under OUTPUT.partial: rerun the same command after an interruption
to continue (the output is then the same bytes); a rerun with other settings is refused.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ance_ir.cli import (
    ArgumentParser,
    add_import_argument,
    check_apart,
    check_output,
    fill_defaults,
    given_flags,
    load_cli_plugins,
    non_negative_int,
    positive_float,
    positive_int,
    run_cli,
    share_float,
)
from ance_ir.train.settings import INFERENCE_PRECISIONS

if TYPE_CHECKING:
    import torch


#: the flags of --generator only, with their defaults (None in argparse, so that --topics can refuse them)
GENERATOR_DEFAULTS = {"n": 10, "seed": 42, "top_k": 10, "top_p": 1.0, "temperature": 1.0, "max_length": None,
                      "batch_size": 16, "precision": "fp32", "device": None, "threads": None}
#: the flags of --topics only
JUDGED_DEFAULTS = {"min_positive_grade": 1}


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m ance_ir.expand", description=__doc__)
    parser.add_argument("--corpus", required=True, help="corpus JSONL/TSV file or dataset name (rag24-mini)")
    parser.add_argument("--output", required=True, help="expanded corpus to write (JSONL); OUTPUT.queries.jsonl "
                                                        "beside it")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--generator", help="query generator: model dir, training run folder (task: generator) or "
                                            "a sequence-to-sequence Hugging Face id")
    source.add_argument("--topics", help="instead of a generator: topics whose text expands the passages judged "
                                         "relevant to them (in --qrels)")
    parser.add_argument("--qrels", help="with --topics: the judgments (TREC file or name; default: the named topic "
                                        "set's own)")
    parser.add_argument("--min-positive-grade", type=non_negative_int,
                        help="with --topics: a passage judged at least this grade gets the topic's text (default: 1)")
    parser.add_argument("--n", type=positive_int, help="queries generated per passage (default: 10)")
    parser.add_argument("--seed", type=int, help="sampling seed (default: 42)")
    parser.add_argument("--top-k", type=non_negative_int,
                        help="sample each token from the k most likely (0: no cut; default: 10)")
    parser.add_argument("--top-p", type=share_float,
                        help="nucleus sampling: then from the smallest set of probability p (1, the default: no cut)")
    parser.add_argument("--temperature", type=positive_float, help="sampling temperature (default: 1)")
    parser.add_argument("--max-length", type=positive_int,
                        help="tokens per query, its end token included (default: the generator's query length)")
    parser.add_argument("--batch-size", type=positive_int,
                        help="passages decoded together, each with its --n samples (default: 16)")
    parser.add_argument("--chunk-size", type=positive_int, default=1000, help="passages per resumable chunk")
    parser.add_argument("--stop-after-chunks", type=positive_int,
                        help="stop after writing this many chunks (the work is kept); rerun to continue")
    parser.add_argument("--precision", choices=INFERENCE_PRECISIONS,
                        help="fp32 (the default: the same queries on every CPU), auto (bf16 where the CPU/GPU "
                             "computes it natively, fp16 on older GPUs), bf16, fp16 (CUDA) or int8 (CPU, lossy)")
    parser.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda when available)")
    parser.add_argument("--threads", type=positive_int, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--force", action="store_true", help="replace an existing output")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_import_argument(parser)
    args = parser.parse_args(argv)
    if args.qrels and not args.topics:
        raise ValueError("--qrels goes with --topics (expansion with the judged queries' own text); a generator "
                         "needs none")
    _only_for_own_mode(args)
    output = check_output(args.output)
    if not args.topics:  # a generator's device and precision fail before the corpus is read
        from ance_ir.modeling.inference import check_precision, resolve_device

        device = resolve_device(args.device)
        precision = check_precision(args.precision, device)
    from ance_ir.data import InputError
    from ance_ir.data.corpus import is_tsv
    from ance_ir.datasets import resolve_corpus
    from ance_ir.expand import check_outputs, expand_corpus, queries_path

    if is_tsv(output):
        raise ValueError(f"{output}: the expanded corpus is JSONL (name it .jsonl or .jsonl.gz)")
    check_output(queries_path(output))
    corpus = resolve_corpus(args.corpus)
    if corpus.resolve() in (output.resolve(), queries_path(output).resolve()):
        raise InputError(output, "is the corpus itself; write the expanded corpus to another file")
    for written in (output, queries_path(output)):
        check_apart(written, [args.topics, args.qrels], models=[args.generator] if args.generator else ())
    check_outputs(output, args.force)
    load_cli_plugins(args.imports)
    from ance_ir.data import sha256_file

    job = {"corpus": str(corpus.resolve()), "corpus_sha256": sha256_file(corpus)}
    if args.topics:
        generate, job = _judged(args, job, corpus)
    else:
        generate, job = _generator(args, job, device, precision)
    counts = expand_corpus(corpus, output, generate, job, chunk_size=args.chunk_size, overwrite=args.force,
                           stop_after=args.stop_after_chunks, show_progress=not args.quiet)
    if counts is not None:
        print(f"wrote {output}: {counts['passages']} passages, {counts['expanded']} expanded with "
              f"{counts['queries']} queries; {queries_path(output)}", file=sys.stderr)
    return 0


def _only_for_own_mode(args: argparse.Namespace) -> None:
    """Refuse the other mode's flags (they would be ignored), then fill in this mode's defaults."""
    own, other = (JUDGED_DEFAULTS, GENERATOR_DEFAULTS) if args.topics else (GENERATOR_DEFAULTS, JUDGED_DEFAULTS)
    given = given_flags(args, {"--" + dest.replace("_", "-"): dest for dest in other})
    if given:
        mode = "--topics (the judged queries' own text)" if args.topics else "--generator"
        raise ValueError(f"{', '.join(given)}: not used with {mode}")
    fill_defaults(args, own)


def _recorded(value: str) -> str:
    """How the resume record names an input: a file or folder by its absolute path (a rerun from another folder, or
    with ``./`` added, names the same one), a dataset or Hugging Face name as given."""
    return str(Path(value).resolve()) if Path(value).exists() else value


def _judged(args: argparse.Namespace, job: dict, corpus: Path):
    from ance_ir.data import InputError, iter_corpus
    from ance_ir.datasets import qrels_for_topics, resolve_qrels, resolve_topics
    from ance_ir.expand import judged_queries, mapping_digest

    topics = resolve_topics(args.topics)
    qrels = resolve_qrels(args.qrels) if args.qrels else qrels_for_topics(args.topics)
    if qrels is None:
        raise ValueError(f"no qrels are known for {args.topics}; pass --qrels (which passages each topic's text "
                         "expands)")
    judgments = args.qrels or args.topics
    queries = judged_queries(topics, qrels, args.min_positive_grade)
    if not queries:
        raise ValueError(f"no passage is judged >= {args.min_positive_grade} (--min-positive-grade) for a topic of "
                         f"{args.topics} in {judgments}")
    if not any(passage.docid in queries for passage in iter_corpus(corpus)):
        raise InputError(corpus, f"holds none of the {len(queries)} passages {judgments} judges >= "
                                 f"{args.min_positive_grade}: the qrels are of another corpus")
    job = {**job, "source": "judged queries", "topics": _recorded(args.topics), "qrels": _recorded(judgments),
           "min_positive_grade": args.min_positive_grade, "queries_sha256": mapping_digest(queries)}
    return (lambda passages: [queries.get(p.docid, []) for p in passages]), job


def _generator(args: argparse.Namespace, job: dict, device: torch.device, precision: str):
    import torch

    from ance_ir.modeling.inference import weights_sha256
    from ance_ir.modeling.kinds import load_model

    if args.threads:
        torch.set_num_threads(args.threads)
    model = load_model(args.generator, "generator")
    if model.fresh:
        raise ValueError(f"{args.generator}: an encoder checkpoint, not a trained query generator; train one "
                         "(python -m ance_ir.train --config configs/rag24-mini/generator.yaml) or pass a "
                         "sequence-to-sequence model (castorini/doc2query-t5-base-msmarco)")
    max_length = args.max_length or model.query_max_length
    if model.decoder_positions and max_length > model.decoder_positions:
        raise ValueError(f"--max-length: at most the decoder's {model.decoder_positions} positions, got {max_length}")
    model.to(device)
    settings = {"n": args.n, "seed": args.seed, "top_k": args.top_k, "top_p": args.top_p,
                "temperature": args.temperature, "max_length": max_length,
                "batch_size": args.batch_size, "precision": precision,
                "device": device.type}  # sampling inverts a CDF: another device's rounding picks other tokens
    job = {**job, "source": "generator", "generator": _recorded(args.generator),
           "generator_sha256": weights_sha256(model.model), "generator_settings": model.settings, "sampling": settings}

    def generate(passages):
        return model.generate([p.text for p in passages], n=args.n, seed=args.seed, top_k=args.top_k,
                              top_p=args.top_p, max_length=settings["max_length"], temperature=args.temperature,
                              batch_size=args.batch_size, precision=args.precision)

    return generate, job


if __name__ == "__main__":
    run_cli(main)
