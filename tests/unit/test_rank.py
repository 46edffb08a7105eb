"""quietcore's rank statistics (written without scipy.stats, whose import
costs 0.7 s) give SciPy's results: Mann-Whitney U exact and asymptotic,
with and without ties; Spearman's rho and p; the Theil-Sen slope and Sen's
interval."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from scipy import special, stats

from quietcore.stats.rank import EXACT_UP_TO, betainc, mann_whitney, spearman, student_ppf, student_sf, theil_sen


def samples(seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    out = []
    for n1 in (1, 2, 3, 5, 7, 8, 9, 12, 20):
        for n2 in (1, 3, 6, 8, 10, 15):
            out.append((rng.normal(0, 1, n1), rng.normal(0.5, 1, n2)))  # no ties
            out.append((rng.integers(0, 4, n1).astype(float), rng.integers(0, 5, n2).astype(float)))  # ties
    return out


@pytest.mark.parametrize("method", ["auto", "exact", "asymptotic"])
def test_mann_whitney_is_scipys(method: str) -> None:
    for x, y in samples(1):
        ties = len(np.unique(np.concatenate((x, y)))) < len(x) + len(y)
        if method == "exact" and ties:
            continue  # SciPy's exact distribution assumes no ties; quietcore asks for it only without
        u, p = mann_whitney(x, y, method)
        ref = stats.mannwhitneyu(x, y, alternative="two-sided", method=method)
        assert u == pytest.approx(float(ref.statistic)) and p == pytest.approx(float(ref.pvalue), rel=1e-9, abs=1e-15)


def test_the_quick_reps_pattern_is_exact() -> None:
    # The pattern stats.compare.quick_reps tests: one pair of runs out of order.
    for n in range(6, 12):
        baseline, candidate = [*range(n - 1), n], [n - 1, *range(n + 1, 2 * n)]
        p = mann_whitney(candidate, baseline, "exact")[1]
        assert p == pytest.approx(float(stats.mannwhitneyu(candidate, baseline, method="exact").pvalue), rel=1e-12)


def _rho(y: np.ndarray, x: np.ndarray) -> float:
    return float(stats.spearmanr(x, y).statistic)


def test_spearman_is_scipys() -> None:
    rng = np.random.default_rng(2)
    for n in (3, 4, 6, 10, 25):
        for _ in range(5):
            x = rng.normal(size=n)
            y = x * rng.uniform(-1, 1) + rng.normal(size=n)
            y[: n // 3] = np.round(y[: n // 3])  # some ties
            rho, p = spearman(x, y)
            ref = stats.spearmanr(x, y)
            assert rho == pytest.approx(float(ref.statistic), abs=1e-12)
            if n <= EXACT_UP_TO:  # exact: scipy's permutation test over every pairing
                # every order of x paired with y, held
                exact = stats.permutation_test((x,), functools.partial(_rho, y), permutation_type="pairings",
                                               n_resamples=np.inf)  # fmt: skip
                assert p == pytest.approx(float(exact.pvalue), rel=1e-9)
            else:
                assert p == pytest.approx(float(ref.pvalue), rel=1e-8, abs=1e-14)
    assert all(math.isnan(v) for v in spearman([1, 2, 3], [5, 5, 5]))
    # three runs in perfect order: one order in three is as extreme either way, not p = 0
    rho, p = spearman([1, 2, 3], [30, 20, 10])
    assert rho == pytest.approx(-1.0) and p == pytest.approx(1 / 3)


def test_student_tail_and_the_incomplete_beta() -> None:
    for df in (1, 2, 5, 30):
        for t in (-3.0, -0.5, 0.0, 0.7, 2.5, 8.0):
            assert student_sf(t, df) == pytest.approx(float(stats.t.sf(t, df)), rel=1e-10, abs=1e-15)
    for df in (1, 3, 9, 40):
        for q in (0.025, 0.5, 0.9, 0.975):
            assert student_ppf(q, df) == pytest.approx(float(stats.t.ppf(q, df)), rel=1e-9, abs=1e-12)
    for a, b, x in ((2.5, 0.5, 0.3), (0.5, 0.5, 0.9), (10.0, 3.0, 0.6), (1.0, 1.0, 0.25)):
        assert betainc(a, b, x) == pytest.approx(float(special.betainc(a, b, x)), rel=1e-12)


def test_theil_sen_is_scipys() -> None:
    rng = np.random.default_rng(3)
    for n in (3, 5, 8, 13, 30):
        x = rng.integers(0, 6, n).astype(float)  # repeats in x
        y = 2 * x + rng.normal(0, 1, n)
        y[:2] = y[2]  # and in y
        slope, low, high = theil_sen(y, x)
        ref = stats.theilslopes(y, x, alpha=0.95)
        assert (slope, low, high) == pytest.approx((ref.slope, ref.low_slope, ref.high_slope), rel=1e-12)
    assert all(math.isnan(v) for v in theil_sen([1, 2, 3], [4, 4, 4]))
