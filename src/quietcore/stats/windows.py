"""An array helper the periodicity search needs, on numpy alone (scipy's
fft took 0.2 s to import, more than a short noise run's analysis; numpy 2's
FFT is as fast as scipy's here). tests/unit/test_windows.py holds it to
scipy.fft.next_fast_len."""

from __future__ import annotations


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
