"""A p-value as every sentence says it, apart from the tests that make one
(stats.compare): the screens that only read stored results need no numpy."""

from __future__ import annotations


def p_phrase(p: float) -> str:
    """A p-value as the text says it: "p = 0.02", or "p < 0.001" below that (a
    test's approximation can give 0 for a perfect order, which no data show)."""
    return "p < 0.001" if p < 0.001 else f"p = {p:.2g}"
