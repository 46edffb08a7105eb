"""Two array helpers the periodicity search needs, on numpy alone (scipy's
fft and ndimage took 0.2 s to import, more than a short noise run's
analysis; numpy 2's FFT is as fast as scipy's here). tests/unit/test_windows.py
holds them to scipy.fft.next_fast_len and scipy.ndimage.minimum_filter1d."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


def next_fast_len(n: int) -> int:
    """The smallest 5-smooth number (2^a 3^b 5^c) >= n: a length the FFT
    does fast, as scipy.fft.next_fast_len(n, real=True)."""
    if n <= 6:
        return max(n, 1)
    best = 1 << (n - 1).bit_length()  # the next power of two bounds the search
    p5 = 1
    while p5 < best:
        p35 = p5
        while p35 < best:
            # the smallest power of two that takes p35 to n or more
            quotient = -(-n // p35)
            p2 = 1 << (quotient - 1).bit_length()
            best = min(best, p2 * p35)
            p35 *= 3
        p5 *= 5
    return best


def sliding_min(a: NDArray[np.float64], w: int) -> NDArray[np.float64]:
    """out[i] = min(a[i : i + w]) for every full window, in O(n) (van Herk,
    Gil and Werman: each window spans at most two blocks of w, so it is a
    block's suffix minimum beside the next block's prefix minimum)."""
    n = len(a)
    blocks = -(-n // w)
    padded = np.full(blocks * w, np.inf)
    padded[:n] = a
    b = padded.reshape(blocks, w)
    prefix = np.minimum.accumulate(b, axis=1).ravel()
    suffix = np.minimum.accumulate(b[:, ::-1], axis=1)[:, ::-1].ravel()
    i = np.arange(n - w + 1)
    return np.minimum(suffix[i], prefix[i + w - 1])


def minimum_filter1d(x: NDArray[np.float64], size: int) -> NDArray[np.float64]:
    """The minimum over a window of `size` centred on each value (left
    size // 2), the edges mirrored: scipy.ndimage.minimum_filter1d's
    defaults (mode "reflect", origin 0)."""
    padded = np.pad(np.asarray(x, dtype=float), (size // 2, (size - 1) // 2), mode="symmetric")
    return sliding_min(padded, size)
