"""The rank statistics quietcore's comparisons use: the Mann-Whitney U test,
Spearman's rho and the Theil-Sen slope with Sen's interval.

They follow SciPy's definitions (scipy.stats.mannwhitneyu with method
"auto" or "exact", spearmanr, theilslopes; tests/unit/test_rank.py holds
them to SciPy's results), written on numpy and the standard library
because importing scipy.stats costs 0.7 s here, more than most runs'
analysis: every `run`, `compare` and report paid it at start-up."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Any

import numpy as np
from numpy.typing import NDArray

#: What the tests take: a list or a numpy array of numbers.
Values = Sequence[float] | NDArray[Any]
EXACT_MAX = 8  # "auto": exact when either sample has at most this many values and nothing ties


def ranks(values: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Average ranks (1-based) and the size of each group of equal values."""
    order = np.argsort(values, kind="mergesort")
    sorted_ = values[order]
    new = np.concatenate(([True], sorted_[1:] != sorted_[:-1]))
    group = np.cumsum(new) - 1
    starts = np.flatnonzero(new)
    counts = np.diff(np.append(starts, len(values)))
    average = starts + (counts + 1) / 2.0  # the mean of ranks start+1 .. start+count
    out = np.empty(len(values))
    out[order] = average[group]
    return out, counts


def _u_counts(n1: int, n2: int) -> NDArray[np.float64]:
    """How many orderings of n1 + n2 distinct values give U = 0 .. n1*n2.
    The largest value is from the first sample (adding n2 to U) or not:
    f(i, j, u) = f(i-1, j, u-j) + f(i, j-1, u)."""
    prev = [np.ones(1) for _ in range(n2 + 1)]  # i = 0
    for i in range(1, n1 + 1):
        cur = [np.ones(1)]  # j = 0
        for j in range(1, n2 + 1):
            row = np.zeros(i * j + 1)
            row[j : j + len(prev[j])] += prev[j]
            row[: len(cur[j - 1])] += cur[j - 1]
            cur.append(row)
        prev = cur
    return prev[n2]


def _normal_sf(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def mann_whitney(x: Values, y: Values, method: str = "auto") -> tuple[float, float]:
    """Two-sided Mann-Whitney U: (U of x, p). `method`: auto, exact or
    asymptotic (the normal approximation with tie and continuity
    corrections)."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n1, n2 = len(a), len(b)
    if not n1 or not n2:
        raise ValueError("mann_whitney needs two non-empty samples")
    r, ties = ranks(np.concatenate((a, b)))
    u1 = float(r[:n1].sum()) - n1 * (n1 + 1) / 2
    u = max(u1, n1 * n2 - u1)
    if method == "auto":
        method = "asymptotic" if (n1 > EXACT_MAX and n2 > EXACT_MAX) or bool((ties > 1).any()) else "exact"
    if method == "exact":
        counts = _u_counts(min(n1, n2), max(n1, n2))
        p = float(counts[round(u) :].sum() / counts.sum())
    else:
        n = n1 + n2
        tie_term = float((ties.astype(float) ** 3 - ties).sum())
        s = math.sqrt(n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1))))
        p = _normal_sf((u - n1 * n2 / 2 - 0.5) / s) if s > 0 else 1.0
    return u1, min(max(2 * p, 0.0), 1.0)


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def student_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with df degrees of freedom."""
    near = t * t / (df + t * t)  # small for small |t|, where df/(df+t*t) would round to 1
    both = betainc(df / 2.0, 0.5, df / (df + t * t)) if near > 0.5 else 1.0 - betainc(0.5, df / 2.0, near)
    tail = 0.5 * both  # P(T > |t|)
    return tail if t > 0 else 1.0 - tail


def student_ppf(q: float, df: float) -> float:
    """The q quantile of Student's t (bisection on the tail, to 1e-12)."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"a quantile needs 0 < q < 1, got {q}")
    lo, hi = -1.0, 1.0
    while student_sf(lo, df) < 1.0 - q:
        lo *= 2.0
    while student_sf(hi, df) > 1.0 - q:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if student_sf(mid, df) > 1.0 - q:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, abs(mid)):
            break
    return (lo + hi) / 2.0


#: Up to this many pairs, Spearman's p is exact: every order of one side's ranks is tried (8! = 40,320).
EXACT_UP_TO = 8


def spearman(x: Values, y: Values) -> tuple[float, float]:
    """Spearman's rho and its two-sided p: exact up to EXACT_UP_TO pairs, past it the t approximation
    (n - 2 degrees of freedom); (nan, nan) when either has no spread. Three runs in perfect order have
    p = 1/3, not 0: the approximation's t is infinite at |rho| = 1 whatever n."""
    a, b = ranks(np.asarray(x, dtype=float))[0], ranks(np.asarray(y, dtype=float))[0]
    n = len(a)
    if n < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return math.nan, math.nan
    rho = float(np.corrcoef(a, b)[0, 1])
    if n <= EXACT_UP_TO:
        orders = np.array(list(itertools.permutations(b)), dtype=float)
        ca, cb = a - a.mean(), orders - orders.mean(axis=1, keepdims=True)
        each = (cb @ ca) / (np.sqrt((cb * cb).sum(axis=1)) * math.sqrt(float(ca @ ca)))
        return rho, float(np.mean(np.abs(each) >= abs(rho) - 1e-12))
    if abs(rho) >= 1.0:
        return rho, min(1.0, 2.0 / math.factorial(n))
    t = rho * math.sqrt((n - 2) / ((1.0 - rho) * (1.0 + rho)))
    return rho, min(1.0, 2.0 * student_sf(abs(t), n - 2))


def _repeats(values: NDArray[np.float64]) -> NDArray[np.int64]:
    counts = np.unique(values, return_counts=True)[1]
    return counts[counts > 1]


def theil_sen(y: Values, x: Values, confidence: float = 0.95) -> tuple[float, float, float]:
    """The Theil-Sen slope of y on x and Sen's interval at `confidence`
    (Sen 1968, eq. 2.6): (slope, low, high). Pairs with equal x are left
    out; nan when no pair is left."""
    ya, xa = np.asarray(y, dtype=float), np.asarray(x, dtype=float)
    dx = xa[:, None] - xa
    dy = ya[:, None] - ya
    slopes = np.sort(dy[dx > 0] / dx[dx > 0])
    if not len(slopes):
        return math.nan, math.nan, math.nan
    slope = float(np.median(slopes))
    alpha = 1.0 - confidence if confidence > 0.5 else confidence
    z = NormalDist().inv_cdf(alpha / 2.0)
    n, count = len(ya), len(slopes)
    sigsq = (n * (n - 1) * (2 * n + 5)
             - sum(int(k) * (int(k) - 1) * (2 * int(k) + 5) for k in _repeats(xa))
             - sum(int(k) * (int(k) - 1) * (2 * int(k) + 5) for k in _repeats(ya))) / 18.0  # fmt: skip
    if sigsq < 0:
        return slope, math.nan, math.nan
    sigma = math.sqrt(sigsq)
    upper = min(int(np.round((count - z * sigma) / 2.0)), count - 1)
    lower = max(int(np.round((count + z * sigma) / 2.0)) - 1, 0)
    return slope, float(slopes[lower]), float(slopes[upper])
