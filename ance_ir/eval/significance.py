"""Paired significance tests between runs, over per-query scores, and multiple-comparison corrections.

* :func:`paired_t_test`: two-sided paired t-test (``scipy.stats.ttest_rel``'s statistic, as a one-sample test of
  the differences), trec_eval users' staple;
* :func:`permutation_test`: two-sided paired randomisation test (Fisher's; ranx's "Fisher's randomization"):
  the sign of each query's difference is flipped at random and the absolute mean difference compared with
  the observed one. With ``2**n <= permutations`` every one of the ``2**n`` sign patterns is enumerated and
  the p-value is exact; otherwise ``permutations`` random patterns give ``(1 + hits) / (1 + permutations)``;
* :func:`holm` and :func:`bonferroni` adjust the p-values of a family of comparisons.

All are pure functions of their arguments; the random test is seeded.
"""

from __future__ import annotations

import math
import statistics
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ance_ir.eval.metrics import aggregate

CORRECTIONS = ("holm", "bonferroni", "none")
CORRECTION_NAMES = {"holm": "Holm-Bonferroni", "bonferroni": "Bonferroni", "none": "no"}


def _differences(a: Sequence[float], b: Sequence[float]) -> np.ndarray:
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"paired scores need two equally long lists, got {x.shape} and {y.shape}")
    return x - y


def paired_t_test(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of the paired t-test of ``a`` against ``b``.

    Differences within rounding (``1e-9`` of the largest score's magnitude, at least ``1e-9``) count as zero
    (:func:`permutation_test` has its own tolerance, on its statistic); 1.0 when every difference is zero (no
    evidence of any difference); NaN for fewer than two pairs. Differences all equal and non-zero give 0.0
    (scipy's infinite t).
    """
    from scipy.stats import ttest_1samp

    d = _differences(a, b)
    if d.size:
        scale = max(1.0, float(np.abs(np.asarray(a, dtype=np.float64)).max()),
                    float(np.abs(np.asarray(b, dtype=np.float64)).max()))
        d = np.where(np.abs(d) <= 1e-9 * scale, 0.0, d)
        if not d.any():
            return 1.0
    if d.size < 2:
        return math.nan
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(ttest_1samp(d, 0.0).pvalue)  # ttest_rel's statistic: the differences against 0


def _sign_patterns(n: int, start: int, stop: int) -> np.ndarray:
    """Sign vectors ``start`` to ``stop - 1`` of all ``2**n`` as rows of +-1 (row i is -1 where i has a bit set)."""
    bits = (np.arange(start, stop, dtype=np.int64)[:, None] >> np.arange(n, dtype=np.int64)) & 1
    return 1.0 - 2.0 * bits


def exact_permutation(n: int, permutations: int) -> bool:
    """Whether :func:`permutation_test` enumerates all ``2**n`` sign patterns rather than sampling."""
    return n < 63 and 2**n <= permutations


def permutation_test(a: Sequence[float], b: Sequence[float], permutations: int = 10000, seed: int = 0) -> float:
    """Two-sided p-value of the paired randomisation (sign-flip) test of ``a`` against ``b``.

    The statistic is ``|sum of differences|``; a pattern counts when it reaches the observed value (up to
    rounding). Exact over all ``2**n`` sign patterns when ``2**n <= permutations``, else a seeded Monte Carlo
    estimate ``(1 + hits) / (1 + permutations)``, which is never 0. NaN for no pairs.
    """
    if permutations < 1:
        raise ValueError(f"permutations must be at least 1, got {permutations}")
    d = _differences(a, b)
    n = d.size
    if n == 0:
        return math.nan
    observed = abs(math.fsum(d))
    tolerance = 1e-9 * max(1.0, float(np.abs(d).sum()))
    chunk = max(1, (1 << 22) // n)  # sign patterns per block: memory stays a few blocks of 2**22 values
    if exact_permutation(n, permutations):
        hits = sum(int(np.count_nonzero(np.abs(_sign_patterns(n, start, min(start + chunk, 2**n)) @ d)
                                        >= observed - tolerance))
                   for start in range(0, 2**n, chunk))
        return hits / 2**n
    rng = np.random.default_rng(seed)
    hits, done = 0, 0
    while done < permutations:
        rows = min(chunk, permutations - done)
        signs = 1.0 - 2.0 * rng.integers(0, 2, size=(rows, n), dtype=np.int8)
        hits += int(np.count_nonzero(np.abs(signs @ d) >= observed - tolerance))
        done += rows
    return (1 + hits) / (1 + permutations)


def bonferroni(pvalues: Sequence[float]) -> list[float]:
    """Bonferroni-adjusted p-values: ``min(1, m * p)``, m the number of (non-NaN) p-values."""
    m = sum(not math.isnan(p) for p in pvalues)
    return [p if math.isnan(p) else min(1.0, m * p) for p in pvalues]


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni step-down adjusted p-values (NaN stays NaN and is not counted).

    The i-th smallest of m p-values becomes ``max over j <= i of min(1, (m - j + 1) * p_(j))``.
    """
    order = sorted((i for i, p in enumerate(pvalues) if not math.isnan(p)), key=lambda i: pvalues[i])
    m = len(order)
    adjusted = list(pvalues)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return [float(p) for p in adjusted]


def correct(pvalues: Sequence[float], method: str) -> list[float]:
    """Adjust a family of p-values with ``holm``, ``bonferroni`` or ``none``."""
    if method == "holm":
        return holm(pvalues)
    if method == "bonferroni":
        return bonferroni(pvalues)
    if method == "none":
        return [float(p) for p in pvalues]
    raise ValueError(f"unknown correction {method!r} (known: {', '.join(CORRECTIONS)})")


@dataclass(frozen=True)
class PairedDifference:
    """Per-query scores ``a`` against ``b`` (the same queries in the same order)."""

    difference: float  # mean of a less mean of b
    better: int  # queries where a is higher
    worse: int
    t_p: float  # :func:`paired_t_test`

    @classmethod
    def of(cls, a: Sequence[float], b: Sequence[float]) -> PairedDifference:
        d = _differences(a, b)
        difference = statistics.fmean(a) - statistics.fmean(b) if d.size else math.nan
        return cls(difference, int((d > 0).sum()), int((d < 0).sum()), paired_t_test(a, b))


@dataclass(frozen=True)
class Comparison:
    """One run against the baseline on one measure."""

    run: int  # index of the run (the baseline is 0)
    measure: str
    difference: float  # the run's summary minus the baseline's (the mean difference, but for gm_* and num_*)
    better: int  # queries where the run scores higher than the baseline
    worse: int
    t_p: float
    t_p_corrected: float
    permutation_p: float
    permutation_p_corrected: float


def compare_to_baseline(scores: Sequence[dict[str, Sequence[float]]], permutations: int = 10000, seed: int = 0,
                        correction: str = "holm") -> list[Comparison]:
    """Every run after the first against the first (the baseline), measure by measure.

    ``scores[r][measure]`` holds run ``r``'s per-query values, the queries in the same order for every run.
    The p-values of each test are corrected across the ``len(scores) - 1`` comparisons of one measure.
    """
    if len(scores) < 2:
        return []
    base = scores[0]
    out: list[Comparison] = []
    for measure, baseline in base.items():
        t = [paired_t_test(s[measure], baseline) for s in scores[1:]]
        perm = [permutation_test(s[measure], baseline, permutations, seed) for s in scores[1:]]
        for r, (tp, tc, pp, pc) in enumerate(zip(t, correct(t, correction), perm, correct(perm, correction),
                                                 strict=True), start=1):
            d = _differences(scores[r][measure], baseline)
            # as the means are summarised: trec_eval's geometric mean for gm_* (per-query logarithms), sum for num_*
            difference = aggregate(measure, scores[r][measure]) - aggregate(measure, baseline) if d.size else math.nan
            out.append(Comparison(r, measure, difference, int((d > 0).sum()), int((d < 0).sum()), tp, tc, pp, pc))
    return out
