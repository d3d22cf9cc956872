"""Issue 14's methods in one table: every row of ``experiments.rag24_negatives`` (STAR, ADORE, STAR → ADORE,
RocketQA, RocketQAv2) and of ``experiments.rag24_distill`` with the cross-encoder teacher (MSE, Margin-MSE, KL,
TAS-B), beside Table 1's ANCE and DPR rows, each compared with both.

    python -m experiments.rag24_negatives_teachers --family bert-tiny --seeds 1 2 3   # docs/negatives-teachers-rag24.md
    python -m experiments.rag24_negatives_teachers --family minilm --seeds 1

It reads the committed test runs the two experiments write (``run`` there trains the missing ones); nothing is
trained here.
"""

from __future__ import annotations

import argparse

from bench.common import write_section
from experiments import rag24_distill, rag24_negatives
from experiments.comparison import comparison_table, left_out, which_seeds


def report(family: str, seeds: list[int], output: str) -> None:
    """Write the family's table (paired tests against ANCE and DPR over the seeds' mean per-topic nDCG@10)."""
    ance = [rag24_negatives.run_file(family, "ance", s) for s in seeds]
    dpr = [rag24_negatives.run_file(family, "dpr", s) for s in seeds]
    rows = [("ANCE (BM25 warm-up, Table 1)", ance), ("DPR (BM25 + in-batch, Table 1)", dpr),
            *[(f"{r.label} [negatives]", [rag24_negatives.run_file(family, r.name, s) for s in seeds])
              for r in rag24_negatives.ROWS],
            *[(f"{r.label} [distill]", [rag24_distill.run_file(r.name, s, family) for s in seeds])
              for r in rag24_distill.ROWS if r.teacher == "cross-encoder"]]
    text = " ".join(map(str, seeds))
    which = which_seeds(seeds)
    distill_family = "" if family == "bert-tiny" else f" --family {family}"
    body = (f"### {family}, {which}\n\n" + "\n".join(comparison_table(rows, {"ANCE": ance, "DPR": dpr}))
            + left_out(rows)
            + "\n\nPaired two-sided t-tests over the 101 test topics of each row's per-topic nDCG@10 (mean over seeds) "
              "against ANCE's and DPR's.\n\n```bash\n"
              f"python -m experiments.rag24_negatives run --family {family} --seeds {text}\n"
              "python -m experiments.rag24_distill teacher\n"
              f"python -m experiments.rag24_distill run --teacher cross-encoder --seeds {text}{distill_family}\n"
              f"python -m experiments.rag24_negatives_teachers --family {family} --seeds {text} --output {output}\n```")
    write_section(output, f"negatives-teachers-{family}-seeds-{'-'.join(map(str, seeds))}", body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--family", choices=sorted(rag24_negatives.FAMILY_FLAGS), default="bert-tiny")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--output", default="docs/negatives-teachers-rag24.md")
    args = parser.parse_args()
    report(args.family, args.seeds, args.output)


if __name__ == "__main__":
    main()
