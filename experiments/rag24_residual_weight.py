"""The weight of a first stage's scores for a residual cross-encoder, chosen on the training groups alone.

    python -m experiments.rag24_residual_weight --groups train-runs/rag24-mini/groups.hybrid.grades.jsonl.gz \\
        --run train-runs/rag24-mini/hybrid.train.trec

A cross-encoder trained with ``task.first_stage`` learns a residual: its score plus ``w`` times the first stage's
score, min-max normalised over each query's top ``--depth`` hits (``ance_ir.data.min_max_scores``; the model's
``first_stage_depth``). This prints, for each ``w``, how far the
first stage's term alone is from the training target: the mean KL from the softmax of the groups' teacher scores (the
grades) to the softmax of ``w`` times the normalised scores, over groups drawn as the ``groups`` sampler draws them
(one positive and ``--negatives`` of the query's negatives, ``--draws`` times a group, seeded). The ``w`` with the
least KL starts the model's residual at the first stage's best fit; no test topic is read.
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy.special import log_softmax, softmax

from ance_ir.data import min_max_scores, read_groups, read_run

WEIGHTS = (0.0, 1.0, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 8.0, 10.0)


def mean_kl(groups: list, prior: dict[str, dict[str, float]], weight: float, negatives: int, draws: int,
            seed: int) -> float:
    """Mean KL(softmax(teacher scores) || softmax(weight * prior)) over ``draws`` sampled groups per query."""
    rng = np.random.default_rng(seed)
    values = []
    for group in groups:
        for _ in range(draws):
            chosen = [group.positives[rng.integers(len(group.positives))],
                      *(group.negatives[i] for i in rng.choice(len(group.negatives), negatives, replace=False))]
            target = softmax([p.score for p in chosen])
            logits = weight * np.array([prior[group.query_id].get(p.docid, 0.0) for p in chosen])
            values.append(float(np.sum(target * (np.log(target) - log_softmax(logits)))))
    return float(np.mean(values))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", required=True, help="training groups with teacher scores (the grades)")
    parser.add_argument("--run", required=True, help="the first stage's run of the training queries")
    parser.add_argument("--depth", type=int, default=100, help="hits normalised a query (first_stage_depth)")
    parser.add_argument("--negatives", type=int, default=7, help="negatives a group (task.n_negatives)")
    parser.add_argument("--draws", type=int, default=20, help="groups drawn a query")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--weights", type=float, nargs="+", default=WEIGHTS)
    args = parser.parse_args()
    groups = read_groups(args.groups)
    prior = min_max_scores(read_run(args.run), args.depth)
    print("weight  mean KL")
    for weight in args.weights:
        print(f"{weight:6g}  {mean_kl(groups, prior, weight, args.negatives, args.draws, args.seed):.4f}")


if __name__ == "__main__":
    main()
