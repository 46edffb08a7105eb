"""The mean of a few values with its Student t interval (Student 1908):
for a handful of seeded repeats, where a bootstrap has too few values to
resample."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from quietcore.stats.rank import student_ppf


def mean_ci(values: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high); one value has no spread, and its interval is itself."""
    if not values:
        raise ValueError("a mean needs at least one value")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    mean = float(np.mean(values))
    if len(values) < 2:
        return mean, mean, mean
    half = student_ppf((1 + level) / 2, len(values) - 1) * float(np.std(values, ddof=1)) / math.sqrt(len(values))
    return mean, mean - half, mean + half
