"""Synthetic noise traces with known periodic sources, for the analysis
benchmark: the scheduler tick at 250 Hz (17 µs gaps, one phase change
mid-run), a 100 Hz host timer (25 µs), a 1 s timer (60 µs) and random gaps
(exponential, mean 3 µs) making up the rest."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

PLANTED_HZ = (250.0, 100.0)


def trace(events: int, seed: int = 1) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
    """(starts, durations, span) with about `events` events, sorted by start.
    The span grows with the count so the rates stay those of a real node
    (about 1,700 events per second)."""
    rng = np.random.default_rng(seed)
    span = events / 1700.0 * 1e9
    tick = np.arange(1.3e6, span, 4e6)
    tick[len(tick) // 2 :] += 0.9e6  # the tick re-armed at another phase
    host = np.arange(0.4e6, span, 10e6)
    second = np.arange(0.25e9, span, 1e9)
    periodic = np.concatenate([tick, host, second])
    rest = max(events - len(periodic), 0)
    starts = np.concatenate([periodic + rng.normal(0, 300, len(periodic)), rng.uniform(0, span, rest)])
    durations = np.concatenate([np.full(len(tick), 17e3), np.full(len(host), 25e3), np.full(len(second), 60e3),
                                rng.exponential(3e3, rest) + 600])  # fmt: skip
    order = np.argsort(starts)
    starts, durations = starts[order], durations[order]
    keep = (starts >= 0) & (starts < span)
    return starts[keep], durations[keep], span
