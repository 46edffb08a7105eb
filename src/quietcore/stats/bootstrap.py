"""Bootstrap confidence intervals (Efron & Tibshirani 1993, percentile
method), seeded so that a report shows the same interval every time."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

SEED = 20261121


def bootstrap_ci(
    values: Sequence[float],
    statistic: Callable[[NDArray[np.float64]], NDArray[np.float64]] = lambda a: np.median(a, axis=-1),
    *,
    level: float = 0.95,
    resamples: int = 10_000,
    seed: int = SEED,
) -> tuple[float, float]:
    """(low, high) of the statistic's percentile interval. `statistic` takes
    a 2-D array of resamples (one per row) and returns one value per row."""
    data = np.asarray(values, dtype=np.float64)
    if data.size < 2:
        raise ValueError("a bootstrap interval needs at least two values")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    rng = np.random.default_rng(seed)
    samples = data[rng.integers(0, data.size, size=(resamples, data.size))]
    stats = statistic(samples)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(stats, [tail, 100 - tail])
    return float(low), float(high)


def median_ci(values: Sequence[float], level: float = 0.95) -> dict[str, float | int]:
    """n, median and its bootstrap interval, as reports show them."""
    low, high = bootstrap_ci(values, level=level)
    return {"n": len(values), "median": float(np.median(values)), "ci_low": low, "ci_high": high, "level": level}
