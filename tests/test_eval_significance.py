"""Paired tests and corrections on cases computable by hand."""

from __future__ import annotations

import itertools
import math
import random
import statistics

import pytest

from ance_ir.eval.significance import (
    PairedDifference,
    bonferroni,
    compare_to_baseline,
    correct,
    exact_permutation,
    holm,
    paired_t_test,
    permutation_test,
)


def _enumerated_p(differences: list[float]) -> float:
    """The exact two-sided sign-flip p-value by brute force over all 2^n patterns."""
    observed = abs(sum(differences))
    patterns = list(itertools.product((1, -1), repeat=len(differences)))
    hits = sum(abs(sum(s * d for s, d in zip(signs, differences, strict=True))) >= observed - 1e-12
               for signs in patterns)
    return hits / len(patterns)


def test_a_run_against_itself_gives_p_one():
    scores = [random.Random(3).random() for _ in range(30)]
    assert paired_t_test(scores, scores) == 1.0
    assert permutation_test(scores, scores) == 1.0  # Monte Carlo: (1 + B) / (1 + B)
    assert permutation_test(scores[:5], scores[:5]) == 1.0  # exact


def test_differences_within_rounding_count_as_none():
    """0.1 + 0.2 and 0.3 differ in the last bit: no evidence of a difference, not scipy's p = 0 of a constant one."""
    a, b = [0.1 + 0.2] * 10, [0.3] * 10
    assert a != b
    assert paired_t_test(a, b) == 1.0
    assert permutation_test(a, b) == 1.0
    noisy = [x + 0.1 * (i % 3 == 0) for i, x in enumerate(a)]  # a real difference on 4 queries stays one
    assert paired_t_test(noisy, b) == pytest.approx(paired_t_test([0.1 * (i % 3 == 0) for i in range(10)], [0] * 10))


def test_better_on_every_query_is_significant():
    rng = random.Random(5)
    base = [rng.random() * 0.5 for _ in range(20)]
    better = [b + 0.1 + rng.random() * 0.2 for b in base]
    assert paired_t_test(better, base) < 1e-8
    # 2^20 patterns > 10000: sampled; only the all-plus and all-minus patterns reach the observed sum
    p = permutation_test(better, base, permutations=10000, seed=1)
    assert p < 5e-4
    assert p >= 1 / 10001


def test_permutation_is_exact_on_tiny_examples():
    # differences 3, -1, 1, 1: |sum| = 4; of the 16 sign patterns 8 reach |sum| >= 4 (by hand: with the 3
    # positive the other three sum to 3 once and to 1 three times: 4 patterns; mirrored: 4 more)
    a, b = [3.0, 0.0, 1.0, 1.0], [0.0, 1.0, 0.0, 0.0]
    assert permutation_test(a, b) == 0.5
    # 1, 2, 3: |sum| = 6 only for all-plus and all-minus: 2 of 8
    assert permutation_test([1, 2, 3], [0, 0, 0]) == 0.25
    rng = random.Random(11)
    for n in (1, 2, 5, 9, 13):  # 2^13 = 8192 <= 10000: still exact
        d = [round(rng.uniform(-1, 1), 3) for _ in range(n)]
        assert exact_permutation(n, 10000)
        assert permutation_test(d, [0.0] * n, permutations=10000) == pytest.approx(_enumerated_p(d), abs=1e-12)


def test_exact_permutation_counts_every_block_of_patterns():
    # 2^19 patterns enumerated in blocks of 2^22 // 19: the all-minus pattern is in the last block, and the
    # patterns with one sign flipped reach pattern 2^18, past the first block
    n = 19
    assert exact_permutation(n, 2**n)
    assert permutation_test([1.0] * n, [0.0] * n, permutations=2**n) == 2 / 2**n  # only all-plus and all-minus
    # one difference of -1: |sum| >= 17 with 0 or 1 of the other signs flipped, or all or all but one
    assert permutation_test([1.0] * (n - 1) + [0.0], [0.0] * (n - 1) + [1.0], permutations=2**n) == 40 / 2**n


def test_sampled_permutation_is_near_the_exact_value_and_seeded():
    rng = random.Random(17)
    d = [round(rng.gauss(0.05, 0.2), 4) for _ in range(14)]  # 16384 patterns > 10000: sampled
    assert not exact_permutation(14, 10000)
    zeros = [0.0] * 14
    p = permutation_test(d, zeros, permutations=10000, seed=3)
    assert p == pytest.approx(_enumerated_p(d), abs=0.02)
    assert permutation_test(d, zeros, permutations=10000, seed=3) == p
    assert permutation_test(d, zeros, permutations=10000, seed=4) != p
    assert permutation_test(d, zeros, permutations=20000, seed=3) == pytest.approx(_enumerated_p(d), abs=0.015)


def test_t_test_by_hand():
    # differences 1, 2, 3, 4: mean 2.5, sd sqrt(5/3), t = 2.5 / (sd / 2) = 3.8730, 3 degrees of freedom;
    # two-sided p = 2 * P(T_3 > t), with P(T_3 > t) in closed form for 3 degrees of freedom
    a, b = [1.0, 2.0, 3.0, 4.0], [0.0, 0.0, 0.0, 0.0]
    t = 2.5 / (statistics.stdev([1, 2, 3, 4]) / 2)
    x = t / math.sqrt(3)
    upper = 0.5 - (math.atan(x) + x / (1 + x * x)) / math.pi
    assert paired_t_test(a, b) == pytest.approx(2 * upper, rel=1e-9)
    assert paired_t_test(b, a) == pytest.approx(2 * upper, rel=1e-9)  # two-sided
    assert paired_t_test([1.0, 1.0], [0.0, 0.0]) == 0.0  # constant difference: infinite t
    assert math.isnan(paired_t_test([1.0], [0.0]))
    with pytest.raises(ValueError, match="equally long"):
        paired_t_test([1.0, 2.0], [1.0])


def test_a_paired_difference_is_the_mean_difference_the_queries_each_way_and_the_t_test():
    a, b = [0.5, 0.7, 0.2, 0.9], [0.4, 0.7, 0.3, 0.6]
    c = PairedDifference.of(a, b)
    assert (c.better, c.worse) == (2, 1) and c.difference == pytest.approx(0.075)
    assert c.t_p == paired_t_test(a, b)
    assert PairedDifference.of(a, a).t_p == 1.0  # scipy's ttest_rel gives NaN for no difference at all


def test_corrections_by_hand():
    p = [0.01, 0.04, 0.03, 0.005]
    # Holm: sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04 -> running max 0.06
    assert holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert bonferroni(p) == pytest.approx([0.04, 0.16, 0.12, 0.02])
    assert holm([0.5, 0.4]) == [0.8, 0.8] and bonferroni([0.5, 0.4]) == [1.0, 0.8]
    assert correct(p, "none") == p
    nan_holm = holm([0.01, math.nan, 0.02])
    assert nan_holm[0] == pytest.approx(0.02) and math.isnan(nan_holm[1]) and nan_holm[2] == pytest.approx(0.02)
    with pytest.raises(ValueError, match="unknown correction"):
        correct(p, "sidak")


def test_compare_to_baseline_corrects_across_runs():
    rng = random.Random(23)
    base = [rng.random() for _ in range(30)]
    runs = [base, [b + rng.gauss(0.02, 0.1) for b in base], [b + rng.gauss(0.3, 0.1) for b in base],
            list(base)]
    scores = [{"m": r, "other": list(reversed(r))} for r in runs]
    out = compare_to_baseline(scores, permutations=2000, seed=0, correction="holm")
    assert [(c.run, c.measure) for c in out] == [(1, "m"), (2, "m"), (3, "m"), (1, "other"), (2, "other"),
                                                 (3, "other")]
    m = [c for c in out if c.measure == "m"]
    assert [c.t_p_corrected for c in m] == pytest.approx(holm([c.t_p for c in m]))
    assert [c.permutation_p_corrected for c in m] == pytest.approx(holm([c.permutation_p for c in m]))
    assert m[1].t_p_corrected < 1e-6 and m[1].better == 30 and m[2].t_p == 1.0 and m[2].permutation_p == 1.0
    assert m[1].difference == pytest.approx(statistics.fmean(runs[2]) - statistics.fmean(base))
    none = compare_to_baseline(scores, permutations=2000, seed=0, correction="none")
    assert [c.t_p_corrected for c in none] == [c.t_p for c in none]
    assert compare_to_baseline(scores[:1]) == []
