"""Figures as every sentence and table says them, apart from the statistics that make them: a p-value,
a lost share. The screens that only read stored results need no numpy."""

from __future__ import annotations


def p_phrase(p: float) -> str:
    """A p-value as the text says it: "p = 0.02", or "p < 0.001" below that (a
    test's approximation can give 0 for a perfect order, which no data show)."""
    return "p < 0.001" if p < 0.001 else f"p = {p:.2g}"


def lost_pct(ratio: float | None) -> str:
    """A lost ratio as the check's line, its table in `results show`, `reference set` and `reference show`
    all say it: "1.4%", "12.3%"."""
    return "?" if ratio is None else f"{ratio * 100:.2g}%" if ratio < 0.1 else f"{ratio * 100:.1f}%"
