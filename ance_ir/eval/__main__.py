"""``python -m ance_ir.eval``: evaluate runs with pytrec_eval, compare runs, or measure QA answer coverage.

    python -m ance_ir.eval --qrels rag24-mini-test --run runs/bm25.trec
    python -m ance_ir.eval --qrels qrels.txt --run run.trec --metrics ndcg@10 r@20 P.5 map_cut.100 --json
    python -m ance_ir.eval --qrels dl19 --run bm25.trec --run dense.trec hybrid.trec --metrics ndcg@10 r@1000
    python -m ance_ir.eval --answers nq-test.answers.jsonl --corpus wiki.jsonl --run dpr.trec --k 1 5 20 100

Measures (--metrics): every measure pytrec_eval knows, by trec_eval's names with parameters (ndcg_cut.10,
recall.20,100, P.5, map_cut.100, success.1, iprec_at_recall.0.10, recip_rank, bpref, Rprec, ndcg, infAP ...),
by pytrec_eval's output keys (ndcg_cut_10, recall_100) or by short aliases (ndcg@10, r@20 or recall@20, p@5,
map, map@100, success@5, mrr@K). A cut-off family without cut-offs gives trec_eval's defaults (P: P_5 ...
P_1000). Reciprocal rank is taken over each query's top K (trec_eval -M K): recip_rank and mrr@10 are MRR@10
(key recip_rank); mrr@K has the key recip_rank_cut_K. num_* measures are summed over queries and gm_* are
geometric means, as trec_eval reports them. judged@K (judged.K), not in pytrec_eval, is
ir_measures' Judged@K: the share of each query's top K hits judged at any grade (out of its hits where it has
fewer than K).

One run: the measures over the queries in both qrels and run (trec_eval's default; --complete: every query
of the qrels, as trec_eval -c). Several runs: a table of every run's measures and, for each run against the
first (the baseline), the two-sided paired t-test and a paired randomisation test (sign flips of the
per-query differences; exact when 2^queries <= --permutations), corrected for multiple comparisons across
the runs compared with the baseline, measure by measure and test by test. Comparisons use every query of
the qrels: a query missing from a run scores 0 (trec_eval -c). A dagger marks p < --alpha-level.

A warning line goes to stderr when none of a run's retrieved documents is judged for its query.

QA answer coverage (--answers): accuracy@k, the share of questions with an answer string in the text (the
contents, not the title, as DPR matches) of one of the top k passages: DPR's top-k accuracy. --match dpr
(default) matches token sequences as DPR's has_answer does (NFD, lower case, "1" does not match "10");
--match kilt matches substrings after DPR's answer normalisation (lower case, no punctuation, no a/an/the,
single spaces). The answers file is JSONL {"qid": ..., "answers": [...]} or TSV qid<TAB>answer1<TAB>...;
a question missing from a run counts as a miss; a passage a run names that the corpus lacks is an error.
Several runs are compared as above, on the per-question hits.
"""

from __future__ import annotations

import argparse
import json
import sys

from ance_ir.cli import ArgumentParser, fill_defaults, given_flags, non_negative_int, positive_int, run_cli, unit_float
from ance_ir.data import Run, read_run
from ance_ir.eval import (
    DEFAULT_METRICS,
    evaluate_per_query,
    format_table,
    mean_over_queries,
    parse_measures,
)
from ance_ir.eval.report import unjudged_warning
from ance_ir.eval.significance import CORRECTIONS


def _parser() -> ArgumentParser:
    parser = ArgumentParser(prog="python -m ance_ir.eval", description=__doc__)
    parser.add_argument("--qrels", help="TREC qrels file or name (e.g. rag24-mini-test, dl19)")
    parser.add_argument("--run", required=True, action="extend", nargs="+", metavar="RUN",
                        help="TREC run file; several (--run A --run B, or --run A B) compare each with the first")
    parser.add_argument("--metrics", nargs="+",
                        help=f"measures, any spelling above (default: {' '.join(DEFAULT_METRICS)})")
    parser.add_argument("--relevance-level", type=positive_int,
                        help="lowest grade counted relevant by the binary measures (P, recall, MAP, MRR, success, "
                             "bpref, Rprec; trec_eval -l), default 1")
    parser.add_argument("--complete", action="store_true",
                        help="one run: average over every query of the qrels, a query missing from the run "
                             "scoring 0 (trec_eval -c); comparisons always do")
    qa = parser.add_argument_group("QA answer coverage")
    qa.add_argument("--answers", help="answers file (JSONL or TSV) instead of --qrels")
    qa.add_argument("--corpus", help="corpus file or dataset name holding the runs' passages")
    qa.add_argument("--k", nargs="+", type=positive_int, help="depths of accuracy@k (default 1 5 20 100)")
    qa.add_argument("--match", choices=("dpr", "kilt"), help="how answers match passage text (default dpr)")
    qa.add_argument("--quiet", action="store_true", help="no progress bar while the corpus is read (shown past 10 s)")
    tests = parser.add_argument_group("comparing runs")
    tests.add_argument("--permutations", type=positive_int,
                       help="sign flips of the randomisation test (default 10000)")
    tests.add_argument("--seed", type=non_negative_int, help="seed of the randomisation test (default 0)")
    tests.add_argument("--correction", choices=CORRECTIONS,
                       help="multiple-comparison correction across the runs compared with the first (default holm, "
                            "Holm-Bonferroni)")
    tests.add_argument("--alpha-level", type=unit_float,
                       help="significance level marked with a dagger (default 0.05)")
    parser.add_argument("--per-query", action="store_true", help="also print each query's values")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object: one run, its means (with --per-query: {\"mean\", "
                             "\"per_query\"}); several runs, the comparison")
    return parser


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def _qrels_scores(args: argparse.Namespace, runs: list[Run]) -> tuple[list[dict[str, dict[str, float]]], list[int]]:
    """Per-query values of each run, and how many evaluated queries each run misses; warnings to stderr."""
    from ance_ir.datasets import resolve_qrels

    metrics = args.metrics or DEFAULT_METRICS
    qrels = resolve_qrels(args.qrels)
    complete = args.complete or len(runs) > 1
    scores, missing, warnings = [], [], []
    for name, run in zip(args.run, runs, strict=True):
        if not any(q in run for q in qrels):
            raise ValueError(f"{name}: no query of the run has judgments in {args.qrels}")
        per_query = evaluate_per_query(qrels, run, metrics, args.relevance_level, complete=complete)
        if warning := unjudged_warning(qrels, run, name, args.qrels, list(per_query)):
            warnings.append(warning)
        scores.append(per_query)
        missing.append(sum(q not in run for q in per_query))
    for w in warnings:
        _warn(w)
    return scores, missing


def _answer_scores(args: argparse.Namespace, runs: list[Run]) -> tuple[list[dict[str, dict[str, float]]], list[int]]:
    from ance_ir.datasets import resolve_corpus
    from ance_ir.eval.answers import DEFAULT_K, accuracy_per_query, needed_docids, passage_texts, read_answers

    match, ks = args.match or "dpr", args.k or list(DEFAULT_K)
    answers = read_answers(args.answers, match)
    corpus = resolve_corpus(args.corpus)
    for name, run in zip(args.run, runs, strict=True):
        if not any(q in run for q in answers):
            raise ValueError(f"{name}: no question of {args.answers} has a ranking in the run")
    texts = passage_texts(corpus, needed_docids(answers, runs, max(ks)), match, not args.quiet)
    scores = [accuracy_per_query(answers, run, texts, ks, match, name, args.corpus)
              for name, run in zip(args.run, runs, strict=True)]
    missing = [sum(q not in run for q in answers) for run in runs]
    for name, m in zip(args.run, missing, strict=True):
        if m:
            _warn(f"{name}: {m} of {len(answers)} questions have no ranking in the run and count as misses")
    return scores, missing


def _print_one(args: argparse.Namespace, per_query: dict[str, dict[str, float]], unit: str) -> None:
    means = mean_over_queries(per_query)
    if args.json:
        print(json.dumps({"mean": means, "per_query": per_query} if args.per_query else means))
        return
    if args.per_query:
        for qid, values in per_query.items():
            print(qid + "\t" + "\t".join(f"{n}={v:.4f}" for n, v in values.items()))
    print(format_table(means, label=f"{len(per_query)} {unit}"))


def _print_comparison(args: argparse.Namespace, scores: list[dict[str, dict[str, float]]], missing: list[int],
                      source: str, unit: str, missing_rule: str) -> None:
    from ance_ir.eval.report import comparison_json, format_comparison
    from ance_ir.eval.significance import compare_to_baseline

    qids = list(scores[0])
    keys = list(next(iter(scores[0].values())))
    columns = [{k: [pq[q][k] for q in qids] for k in keys} for pq in scores]
    comparisons = compare_to_baseline(columns, args.permutations, args.seed, args.correction)
    means = [mean_over_queries(pq) for pq in scores]
    common = dict(queries=len(qids), correction=args.correction, alpha=args.alpha_level,
                  permutations=args.permutations, seed=args.seed)
    if args.json:
        print(json.dumps(comparison_json(args.run, means, comparisons, missing_queries=missing,
                                         per_query=scores if args.per_query else None, **common)))
        return
    if args.per_query:
        print("qid\tmeasure\t" + "\t".join(args.run))
        for q in qids:
            for k in keys:
                print(f"{q}\t{k}\t" + "\t".join(f"{pq[q][k]:.4f}" for pq in scores))
    print(format_comparison(args.run, means, comparisons, source=source, unit=unit, missing=missing_rule,
                            **common))


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if (args.qrels is None) == (args.answers is None):
        parser.error("give either --qrels (relevance judgments) or --answers (QA answer strings)")
    if args.answers is not None:
        if args.corpus is None:
            parser.error("--answers needs --corpus (the passages the runs retrieved)")
        if qrels_only := given_flags(args, {"--metrics": "metrics", "--complete": "complete",
                                            "--relevance-level": "relevance_level"}):
            parser.error(f"{qrels_only[0]} goes with --qrels; with --answers the measures are accuracy@k (--k)")
    else:
        if answers_only := given_flags(args, {"--corpus": "corpus", "--k": "k", "--match": "match",
                                              "--quiet": "quiet"}):
            parser.error(f"{answers_only[0]} goes with --answers")
        parse_measures(args.metrics or DEFAULT_METRICS)  # a bad name fails before any file is read
    comparing = given_flags(args, {"--permutations": "permutations", "--seed": "seed", "--correction": "correction",
                                   "--alpha-level": "alpha_level"})
    if len(args.run) == 1 and comparing:
        parser.error(f"{comparing[0]} is a setting of comparing runs; give two runs or more")
    fill_defaults(args, {"relevance_level": 1, "permutations": 10000, "seed": 0, "correction": "holm",
                         "alpha_level": 0.05})

    runs = [read_run(path) for path in args.run]
    if args.qrels is not None:
        scores, missing = _qrels_scores(args, runs)
        source, unit, rule = args.qrels, "queries", "a query missing from a run scores 0"
    else:
        scores, missing = _answer_scores(args, runs)
        source, unit, rule = args.answers, "questions", "a question missing from a run is a miss"
    if len(runs) == 1:
        _print_one(args, scores[0], unit)
    else:
        _print_comparison(args, scores, missing, source, unit, rule)
    return 0


if __name__ == "__main__":
    run_cli(main)
