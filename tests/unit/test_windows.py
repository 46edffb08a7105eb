"""The periodicity search's array helpers, written on numpy alone, give
scipy's results."""

from __future__ import annotations

import numpy as np
from scipy.fft import next_fast_len as scipy_next_fast_len
from scipy.ndimage import minimum_filter1d as scipy_minimum_filter1d

from quietcore.stats.windows import minimum_filter1d, next_fast_len


def test_next_fast_len_is_scipys() -> None:
    for n in [*range(1, 400), 1000, 4_000_001, 12_345_678, 2**20 + 1]:
        assert next_fast_len(n) == scipy_next_fast_len(n, real=True), n


def test_minimum_filter1d_is_scipys() -> None:
    rng = np.random.default_rng(4)
    for n in (1, 2, 5, 17, 100, 1001):
        x = rng.normal(size=n)
        for size in (1, 2, 3, 4, 7, 10, 33, 150):
            assert np.array_equal(minimum_filter1d(x, size), scipy_minimum_filter1d(x, size=size)), (n, size)
