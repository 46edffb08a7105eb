"""Two configurations compared with the session as the unit (issue 58).

A session's 100 ms windows are samples of that session, not of the node:
what moves between two sessions of an unchanged node (the host's
episodes, a daemon's phase, where the tick lands) is not in their spread.
Tested as if it were, two sessions of one unchanged 2-vCPU guest differed
"significantly" in 5 of 10 CPU comparisons (p down to 1e-7).

So each session gives one value (its median window, say), and the two
sides are compared by Student's t on those values, the variance pooled
within every group of sessions of one configuration: A's, B's, and any
earlier sessions of either's configuration, which carry the node's
run-to-run spread. One session a side is then judged against that spread
alone; with no repeated session anywhere there is no spread, and no
verdict. Pooling assumes one spread for every configuration, as a t test
does; a configuration that changes the spread (a source that comes and
goes) widens the interval, which errs toward "no difference shown"."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from quietcore.stats.compare import ALPHA
from quietcore.stats.rank import student_ppf, student_sf

#: Power of the test a shift would need sessions for (`needed`).
POWER = 0.8
#: The normal quantiles of 1 - ALPHA/2 and POWER, for the sessions a side a shift would need.
_Z_ALPHA, _Z_POWER = 1.959964, 0.841621
#: The most sessions a side ever said to be needed: past it, "more than" this.
MOST_NEEDED = 100


@dataclass(frozen=True)
class SessionShift:
    """B's mean session value less A's, judged against the spread of repeated sessions."""

    shift: float
    sessions_a: int
    sessions_b: int
    spread: float | None  # the pooled standard deviation of one session's value; None: no repeated session
    df: int  # its degrees of freedom: sessions less groups, over every group
    low: float | None  # the shift's 95 % interval (Student t); None with no spread
    high: float | None
    p: float | None  # two-sided, before any correction over CPUs
    needed: int | None  # sessions a side for a shift this size to be shown at ALPHA with POWER; None: no spread

    @property
    def known(self) -> bool:
        return self.spread is not None


def needed_sessions(shift: float, spread: float) -> int | None:
    """Sessions a side a two-sample t test needs to show `shift` at ALPHA with POWER, by the normal
    approximation (at least 2); None when there is no shift to show."""
    if shift == 0 or not math.isfinite(shift):
        return None
    n = 2 * ((_Z_ALPHA + _Z_POWER) * spread / shift) ** 2
    return max(2, min(MOST_NEEDED + 1, math.ceil(n)))


def session_shift(a: Sequence[float], b: Sequence[float], others: Sequence[Sequence[float]] = (),
                  level: float = 0.95) -> SessionShift:  # fmt: skip
    """A's and B's session values, and `others`: groups of sessions of one configuration each, whose
    spread is the node's run-to-run spread too (not their means: they are neither side)."""
    if not a or not b:
        raise ValueError("each side needs a session")
    groups = [np.asarray(g, dtype=float) for g in (a, b, *others) if len(g)]
    df = sum(g.size - 1 for g in groups)
    shift = float(np.mean(b) - np.mean(a))
    if df < 2:
        return SessionShift(shift, len(a), len(b), None, df, None, None, None, None)
    spread = math.sqrt(sum(float(((g - g.mean()) ** 2).sum()) for g in groups) / df)
    se = spread * math.sqrt(1 / len(a) + 1 / len(b))
    if se == 0:
        # sessions all alike to the last bit (a replay of one trace): no spread to weigh a shift against, where
        # a p of 0 called a shift of 1e-9 "B noisier" on CPU 13 of a 64-CPU replay
        return SessionShift(shift, len(a), len(b), spread, df, None, None, None, None)
    half = student_ppf((1 + level) / 2, df) * se
    p = min(1.0, 2 * student_sf(abs(shift) / se, df))
    return SessionShift(shift, len(a), len(b), spread, df, shift - half, shift + half, p,
                        needed_sessions(shift, spread))  # fmt: skip


def shown(s: SessionShift, p_adjusted: float | None, alpha: float = ALPHA) -> bool:
    """Whether the shift is outside the spread of repeated sessions: its (corrected) p under alpha and its
    interval clear of 0."""
    return p_adjusted is not None and p_adjusted < alpha and s.low is not None and s.high is not None and (
        s.low > 0 or s.high < 0)  # fmt: skip
