"""Percentiles that refuse to make up a tail.

A "p95 of 5 values" is the maximum under another name (one of the mistakes
DESIGN.md lists). Quantile q is reported only from at least 1/(1-q) values,
so that one value or more lies above it: p50 needs 2, p90 10, p99 100,
p99.9 1000."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import numpy.typing as npt

#: The percentiles quietcore reports for durations.
REPORTED = (0.5, 0.9, 0.99, 0.999)


def min_samples(q: float) -> int:
    """Fewest samples for which quantile q is more than the maximum."""
    if not 0 < q < 1:
        raise ValueError(f"quantile must be in (0, 1), got {q}")
    return math.ceil(1 / (1 - q) - 1e-9)


def quantile(sorted_values: Sequence[float] | npt.NDArray[Any], q: float) -> float:
    """Linear interpolation between order statistics (Hyndman & Fan 1996,
    definition 7, the default of R and numpy)."""
    if len(sorted_values) == 0:
        raise ValueError("quantile of no values")
    if not 0 <= q <= 1:
        raise ValueError(f"quantile must be in [0, 1], got {q}")
    lo, hi = _ranks(len(sorted_values), q)
    low, high = float(sorted_values[lo]), float(sorted_values[hi])
    return low + ((len(sorted_values) - 1) * q - lo) * (high - low)


def duration_summary(values: Sequence[float] | npt.NDArray[Any]) -> dict[str, float | int | None]:
    """n, max and the reported percentiles; a percentile the sample is too
    small for is None, so no report can print it as a number. Only the order
    statistics the percentiles need are found (np.partition): sorting a CPU's
    80,000 gaps as a list took 9 ms of its 114 (cProfile, the GPU node's
    replay)."""
    a = np.asarray(values, dtype=np.float64)
    n = len(a)
    out: dict[str, float | int | None] = {"n": n, "max": float(a.max()) if n else None}
    wanted = [q for q in REPORTED if n >= min_samples(q)]
    ranks = sorted({r for q in wanted for r in _ranks(n, q)})
    part = np.partition(a, ranks) if ranks else a
    for q in REPORTED:
        # quantile() over the partitioned array: the order statistics it reads are in place
        out["p" + f"{q * 100:g}".replace(".", "")] = quantile(part, q) if q in wanted else None
    return out


def _ranks(n: int, q: float) -> tuple[int, int]:
    """The two order statistics quantile() interpolates between."""
    lo = math.floor((n - 1) * q)
    return lo, min(lo + 1, n - 1)


def tail(values: Sequence[float] | npt.NDArray[Any], q: float) -> float | None:
    """Quantile q of `values` (a sequence or an array, in any order), or
    None when there are fewer than min_samples(q): the one rule every p99.9
    of quietcore goes through. The same interpolation as quantile()."""
    if len(values) < min_samples(q):
        return None

    return float(np.quantile(np.asarray(values, dtype=np.float64), q))  # numpy's default is definition 7 too


def histogram_quantile(buckets: Sequence[Sequence[float]], q: float) -> float:
    """Quantile of a histogram given as [lower, upper, count] rows in
    ascending order, interpolating linearly inside the bucket."""
    total = sum(row[2] for row in buckets)
    if total <= 0:
        raise ValueError("quantile of an empty histogram")
    if not 0 <= q <= 1:
        raise ValueError(f"quantile must be in [0, 1], got {q}")
    target, seen = q * total, 0.0
    for lower, upper, count in buckets:
        if count and seen + count >= target:
            return float(lower + (upper - lower) * (target - seen) / count)
        seen += count
    return float(buckets[-1][1])


#: A normal distribution's standard deviation over its median absolute deviation.
MAD_TO_SIGMA = 1.4826


def scaled_mad(values: Any) -> float:
    """The median absolute deviation from the median, scaled to a normal
    distribution's standard deviation (x 1.4826): a spread an odd value
    cannot move."""
    v = np.asarray(values, dtype=np.float64)
    return float(np.median(np.abs(v - np.median(v)))) * MAD_TO_SIGMA


def lower_mad(values: Any) -> float:
    """scaled_mad of the values at or under their median, about it: a spread that
    values standing out above the median cannot widen however many they are. CPUs'
    losses: noise only adds loss, so the CPUs that stand out stand above, and where
    they are many they widen the whole MAD past them (the GPU node's 16-CPU replay:
    a doubled L3 group and a doubled CPU, 5 of 16, made it 94 ms where the others
    spread 35 ms). Of a symmetric spread the lower half's deviations have the same
    median, so the same scale holds."""
    v = np.asarray(values, dtype=np.float64)
    if not len(v):
        return 0.0
    m = float(np.median(v))
    return float(np.median(m - v[v <= m])) * MAD_TO_SIGMA
