"""``python -m ance_ir.rerank``: rerank a first-stage TREC run (BM25, dense, hybrid) with a cross-encoder or ColBERT.

    python -m ance_ir.rerank --run runs/rag24/bm25.test.trec.gz --topics rag24-mini-test --corpus rag24-mini \\
        --model train-runs/rag24-mini/cross-encoder --depth 100 --output runs/bm25.ce.trec

Each query's top ``--depth`` hits are scored by the model (``[CLS] query [SEP] passage``) and ordered by that score;
the hits below ``--depth`` keep their first-stage order beneath them (scored below the lowest reranked hit), and
``--hits`` of them are written per query. The pairs of all queries run together, ``--chunk-size`` at a time, longest
first, in batches padded to their own longest. When the topics have known qrels (or ``--qrels`` is given), the
metrics are printed. The scores are kept in chunks of ``--chunk-size`` pairs in ``OUTPUT.partial`` until the output
is written: an interrupted run (Ctrl-C, SIGTERM, a kill) rerun with the same command scores only the pairs it had
not reached (:mod:`ance_ir.rerank.resume`).

With ``--groups`` instead of ``--run``, it scores training groups (JSONL, as ``python -m ance_ir.negatives`` or
``ance_ir.pretrain_data`` writes them; a passage outside the corpus is scored by its own text): every passage gets
the model's score as its ``score``, the teacher score that training with ``data.source: groups`` hands to a
distillation loss, and ``--output`` is a groups file. Several ``--model``s of one kind make a teacher ensemble: each
passage's score is the mean of the models' scores (all are loaded together, on one device):

    python -m ance_ir.rerank --groups train-runs/bm25-groups.jsonl.gz --corpus rag24-mini \\
        --model train-runs/rag24-mini/cross-encoder --output train-runs/bm25-groups.ce.jsonl.gz

The model is a cross-encoder saved by ance-ir (``task: cross-encoder`` training, its run folder or ``final/``), a
Hugging Face sequence-classification checkpoint with one label (``cross-encoder/ms-marco-MiniLM-L-6-v2``), or a
poly-encoder (``task: poly-encoder``), or a ColBERT model (``task: colbert``: each distinct query and passage of a
chunk is then encoded once and every pair scored by MaxSim): the kind its folder records decides (``--max-length``
is a cross-encoder setting).
"""

from __future__ import annotations

import sys
from argparse import Namespace
from pathlib import Path

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
)
from ance_ir.data import default_run_tag, output_lock
from ance_ir.train.settings import INFERENCE_PRECISIONS


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m ance_ir.rerank", description=__doc__)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--run", help="first-stage TREC run file to rerank")
    source.add_argument("--groups", help="training groups (JSONL) to score: write them with the model's scores")
    parser.add_argument("--topics", help="topics TSV file or name (rag24-mini-test, dl19, ...); needed with --run")
    parser.add_argument("--corpus", required=True, help="corpus JSONL/TSV file or dataset name (rag24-mini): the "
                                                        "passages' texts")
    parser.add_argument("--model", required=True, nargs="+",
                        help="cross-encoder, poly-encoder or colbert model: model dir, training run folder or HF id; "
                             "with --groups, several of one kind: each passage's score is the mean of theirs (a "
                             "teacher ensemble)")
    parser.add_argument("--output", required=True, help="TREC run file to write (with --groups: a groups file)")
    parser.add_argument("--depth", type=int,
                        help="rerank each query's top N hits; the hits below keep their first-stage order "
                             "beneath them (default 100)")
    parser.add_argument("--hits", type=int, help="hits written per query (default 1000)")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="pairs per forward pass (default 32)")
    parser.add_argument("--chunk-size", type=positive_int, default=10_000,
                        help="pairs scored and kept together in OUTPUT.partial, from which an interrupted run "
                             "resumes; ColBERT and the poly-encoder encode a passage once per chunk it is in, so "
                             "larger chunks encode less (default 10000)")
    parser.add_argument("--precision", choices=INFERENCE_PRECISIONS, default="auto",
                        help="auto (bf16 where the CPU/GPU computes it natively, fp16 on older GPUs, else fp32), fp32, "
                             "bf16, fp16 (CUDA) or int8 (CPU, lossy) (default auto)")
    parser.add_argument("--first-stage-weight", type=non_negative_float,
                        help="add this times the run's scores, min-max normalised per query (over the top hits "
                             "a cross-encoder's first_stage_depth says, 100 by default; else the top --depth), to "
                             "the model's (default: the weight a cross-encoder trained with task.first_stage saved, "
                             "else 0)")
    parser.add_argument("--max-length", type=positive_int,
                        help="tokens per (query, passage) pair (default: the model's, 320 for a new one)")
    parser.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cuda when available)")
    parser.add_argument("--threads", type=positive_int, help="torch CPU threads (default: torch's choice)")
    add_run_tag_argument(parser)
    parser.add_argument("--qrels", help="qrels to evaluate with (default: the topics' own, when known)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_import_argument(parser)
    args = parser.parse_args(argv)
    given = given_flags(args, {"--topics": "topics", "--qrels": "qrels", "--depth": "depth", "--hits": "hits",
                               "--run-tag": "run_tag", "--first-stage-weight": "first_stage_weight"})
    if args.groups and given:
        raise ValueError(f"{given[0]} is a setting of --run, not of --groups (every passage of a group is scored)")
    fill_defaults(args, {"depth": 100, "hits": 1000})
    for flag, value in (("--depth", args.depth), ("--hits", args.hits)):
        if value < 1:
            raise ValueError(f"{flag} must be at least 1, got {value}")
    if args.run and len(args.model) > 1:
        raise ValueError("--model: several models are a teacher ensemble for --groups; to combine rerankings of a run, "
                         "rerank with each and fuse: python -m ance_ir.fusion --method average")
    if args.run and not args.topics:
        raise ValueError("--run needs --topics (the queries' texts)")
    check_output(args.output)
    check_apart(args.output, [args.run, args.groups, args.topics, args.corpus, args.qrels])
    if args.run:
        args.run_tag = default_run_tag(args.output, args.run_tag)
    load_cli_plugins(args.imports)
    with output_lock(args.output):  # one writer, refused at once; the temporaries of a killed run are ours
        return _rerank(args)


def _rerank(args: Namespace) -> int:
    import torch

    from ance_ir.data import read_groups, read_run, truncate, write_groups, write_run
    from ance_ir.datasets import resolve_corpus, resolve_eval_qrels, resolve_topics
    from ance_ir.modeling.inference import check_precision, resolve_device, weights_sha256
    from ance_ir.modeling.resolve import resolve_model_path
    from ance_ir.rerank import (
        MeanScorer,
        check_run,
        check_standalone,
        group_passages,
        load_reranker,
        passages_for,
        rerank,
        score_groups,
    )
    from ance_ir.rerank.resume import ChunkedScorer

    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    check_precision(args.precision, device)  # fail before reading anything
    if args.groups:
        groups = read_groups(args.groups)
    else:
        first_stage = read_run(args.run)  # a local file first: resolving a named topic set may download it
        topics = resolve_topics(args.topics)
        check_run(first_stage, topics, args.run, args.topics)
        qrels = resolve_eval_qrels(args.qrels, args.topics, topics)
    models, records = [], []
    for name in args.model:
        one = load_reranker(name, **({"max_length": args.max_length} if args.max_length else {}))
        one.to(device)
        resolved = resolve_model_path(name)
        models.append(one)
        records.append({"model": str(Path(resolved).resolve()) if Path(resolved).is_dir() else resolved,
                        "weights_sha256": weights_sha256(one), "kind": one.kind,
                        "max_length": getattr(one, "max_length", None)})
    for one, name in zip(models[1:], args.model[1:], strict=True):
        if one.kind != models[0].kind:
            raise ValueError(f"--model: a teacher ensemble averages the models' raw scores, which only models of one "
                             f"kind share a scale for; {name} is a {one.kind!r} model, {args.model[0]} a "
                             f"{models[0].kind!r} one")
    if len(models) == 1:
        model, settings = models[0], {**records[0], "device": device.type}
    else:
        model, settings = MeanScorer(models), {"models": records, "device": device.type}
    if args.groups:
        for one, name in zip(models, args.model, strict=True):
            check_standalone(one, name)
        passages = group_passages(groups, resolve_corpus(args.corpus), args.groups, not args.quiet)
        with ChunkedScorer(model, args.output, settings, args.chunk_size) as scorer:
            scored = score_groups(groups, passages, scorer, batch_size=args.batch_size, precision=args.precision,
                                  show_progress=not args.quiet, scored_by=" + ".join(args.model))
            write_groups(args.output, scored)
        pairs = sum(len(g.positives) + len(g.negatives) for g in scored)
        print(f"wrote {args.output}: {len(scored)} groups, {pairs} (query, passage) pairs scored", file=sys.stderr)
        return 0
    passages = passages_for(first_stage, args.depth, resolve_corpus(args.corpus), args.run, not args.quiet)
    with ChunkedScorer(model, args.output, settings, args.chunk_size) as scorer:
        weight = getattr(model, "first_stage_weight", 0.0) if args.first_stage_weight is None \
            else args.first_stage_weight
        run = truncate(rerank(first_stage, topics, passages, scorer, args.depth, batch_size=args.batch_size,
                              precision=args.precision, show_progress=not args.quiet, first_stage_weight=weight,
                              first_stage_depth=getattr(model, "first_stage_depth", args.depth)), args.hits)
        write_run(run, args.output, tag=args.run_tag)
    pairs = sum(min(len(r), args.depth) for r in first_stage.values())
    plus = f", plus {weight:g} x the run's normalised scores" if weight else ""
    print(f"wrote {args.output}: {len(run)} queries, {pairs} pairs reranked{plus}", file=sys.stderr)
    if qrels:
        from ance_ir.eval import print_run_metrics

        print_run_metrics(qrels, run, args.output, args.qrels or args.topics)
    return 0


if __name__ == "__main__":
    run_cli(main)
