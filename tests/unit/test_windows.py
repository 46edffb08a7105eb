"""The periodicity search's array helper, written on numpy alone, gives
scipy's result."""

from __future__ import annotations

from scipy.fft import next_fast_len as scipy_next_fast_len

from quietcore.stats.windows import next_fast_len


def test_next_fast_len_is_scipys() -> None:
    for n in [*range(1, 400), 1000, 4_000_001, 12_345_678, 2**20 + 1]:
        assert next_fast_len(n) == scipy_next_fast_len(n, real=True), n
