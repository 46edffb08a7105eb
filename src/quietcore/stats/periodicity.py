"""Periodic noise sources from event start times.

The events (gaps over the threshold) are binned into a spike train, each
weighted by its duration, whose power spectrum shows a periodic source as a comb of peaks at its frequency
and harmonics. The strongest peak is taken, moved down to its lowest
significant subharmonic (a narrow pulse train has power at every harmonic),
then refined by least squares on the events that line up with it. Those
events are removed and the search repeats. This is the periodogram of a
point process (Bartlett 1963); the threshold on peak power guards against
the many frequencies searched."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.fft import next_fast_len

MAX_BINS = 1 << 22  # spectrum size bound: long runs get coarser bins
MIN_FREQ_HZ = 0.2
MAX_FREQ_HZ = 5000.0  # ticks run at 100-1000 Hz; faster "periods" are bursts
MAX_CANDIDATES = 12
MAX_DIVISOR = 16  # the strongest peak can be a high harmonic of a narrow pulse train (seen: the 10th)
WINDOW_PERIODS = 50  # phase is found afresh in each window of this many periods
# Which subharmonic of a spectral peak is the source is decided on the run's
# first stretch holding this many events (all of a short run), and only the
# winner is fitted over the whole run: the search then costs a fixed amount
# per peak, and the whole analysis stays linear in the events.
SAMPLE_EVENTS = 50_000


@dataclass(frozen=True)
class PeriodicSource:
    frequency_hz: float
    period_ns: float
    events: int  # events that line up with the period
    expected: int  # periods in the measured time
    jitter_ns: float  # standard deviation of start times about the fitted line
    median_duration_ns: float
    lost_ns: float  # the members' total duration

    @property
    def coverage(self) -> float:
        return self.events / self.expected if self.expected else 0.0


def _spectrum(
    starts: NDArray[np.float64], weights: NDArray[np.float64], span_ns: float, bin_ns: float
) -> tuple[NDArray[np.float64], float]:
    """Power of the spike train weighted by each event's duration: a source
    matters by the time it takes, not by how often it fires. Normalised by
    the sum of squared weights, random events give a power of about 1 at
    every frequency, whatever their durations."""
    # The bin is widened a little so that the bin count is a length the FFT
    # does fast (few small prime factors): 4,000,001 bins took 1.4 s, a
    # 5-smooth length near it 0.1 s. Zero-padding instead would sample the
    # spectrum more finely, and move the peaks the search steps between.
    nbins = next_fast_len(int(span_ns // bin_ns) + 1, real=True)
    bin_ns = span_ns / (nbins - 1)
    train = np.bincount(np.minimum(starts // bin_ns, nbins - 1).astype(np.int64), weights=weights, minlength=nbins)
    train -= train.mean()
    norm = float(np.sum(weights**2)) or 1.0
    power = np.abs(np.fft.rfft(train)) ** 2 / norm
    return power, 1e9 / (nbins * bin_ns)  # power per frequency bin, and the bin width in Hz


def _densest_phase(starts: NDArray[np.float64], weights: NDArray[np.float64], period: float, tol: float) -> float:
    """The fold offset, in tol-wide bins, with the most events weighted by
    the square root of their length: of two trains of one period (this VM's
    host has one at 100 Hz) the costlier wins, while one long random gap
    cannot outweigh a whole train of short ones (the tick)."""
    centers, _ = _window_phases(starts, weights, period, tol, window=np.inf)
    return float(centers[0])


def _window_phases(
    starts: NDArray[np.float64], weights: NDArray[np.float64], period: float, tol: float, window: float
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """_densest_phase for every window of the run at once: one 2-D histogram
    (window x phase bin) by bincount, its argmax per row. Returns the phase
    of each window and each event's window."""
    bins = max(int(period // tol), 1)
    width = period / bins
    w = np.zeros(len(starts), dtype=np.int64) if np.isinf(window) else (starts // window).astype(np.int64)
    b = np.minimum((np.mod(starts, period) // width).astype(np.int64), bins - 1)
    rows = int(w.max(initial=0)) + 1
    counts = np.bincount(w * bins + b, weights=np.sqrt(weights), minlength=rows * bins).reshape(rows, bins)
    return (counts.argmax(axis=1) + 0.5) * width, w


def _members(
    starts: NDArray[np.float64], period: float, center: NDArray[np.float64], tol: float, w: NDArray[np.int64]
) -> tuple[NDArray[np.bool_], NDArray[np.float64]]:
    """Events within tol of their window's train t = center + n * period,
    one per period and window (the closest: others are other sources); and
    every event's residual. Only the events within tol are sorted."""
    n = np.round((starts - center) / period)
    residual = starts - (center + n * period)
    near = np.flatnonzero(np.abs(residual) <= tol)
    order = near[np.lexsort((np.abs(residual[near]), n[near], w[near]))]
    first = np.ones(len(order), dtype=bool)
    first[1:] = (n[order][1:] != n[order][:-1]) | (w[order][1:] != w[order][:-1])
    members = np.zeros(len(starts), dtype=bool)
    members[order[first]] = True
    return members, residual


def _group_medians(values: NDArray[np.float64], groups: NDArray[np.int64], size: int) -> NDArray[np.float64]:
    """np.median of values per group (0 for an empty group), by one sort."""
    order = np.lexsort((values, groups))
    v, g = values[order], groups[order]
    counts = np.bincount(g, minlength=size)
    offsets = np.cumsum(counts) - counts
    out = np.zeros(size)
    has = counts > 0
    out[has] = (v[offsets[has] + (counts[has] - 1) // 2] + v[offsets[has] + counts[has] // 2]) / 2
    return out


def _fit(
    starts: NDArray[np.float64], weights: NDArray[np.float64], period: float, tol: float
) -> tuple[NDArray[np.bool_], float, float, float]:
    """Events on a periodic train, the refined period, its phase and the
    residual jitter. The period is fitted over the whole run; the phase is
    found again in each window of WINDOW_PERIODS periods, because a source
    may change phase mid-run (a tick re-armed, a timer restarted) without
    changing its period. Every window is done at once, in array operations:
    the cost grows linearly with the events."""
    center = _densest_phase(starts, weights, period, tol)
    for _ in range(3):  # refine: fit t = t0 + n * P on the members
        n = np.round((starts - center) / period)
        members = np.abs(starts - (center + n * period)) <= tol
        if members.sum() < 3 or np.ptp(n[members]) == 0:
            break  # too few periods to fit a line through
        slope, intercept = np.polyfit(n[members], starts[members], 1)
        period, center = float(slope), float(intercept)
    local, w = _window_phases(starts, weights, period, tol, WINDOW_PERIODS * period)
    members, residual = _members(starts, period, local[w], tol, w)
    if members.any():  # centre each window's phase on its members, then take them again
        shift = _group_medians(residual[members], w[members], len(local))
        members, residual = _members(starts, period, (local + shift)[w], tol, w)
    jitter = float(residual[members].std()) if members.any() else float("nan")
    return members, period, center, jitter


@dataclass
class _Events:
    """The events being searched, and which of them no source has taken."""

    starts: NDArray[np.float64]
    durations: NDArray[np.float64]
    span_ns: float
    bin_ns: float
    remaining: NDArray[np.bool_]
    min_events: int
    min_coverage: float

    def accepts(self, found: tuple[PeriodicSource, NDArray[np.intp]] | None) -> bool:
        return found is not None and found[0].events >= self.min_events and found[0].coverage >= self.min_coverage

    def take(self, found: tuple[PeriodicSource, NDArray[np.intp]] | None, into: list[PeriodicSource]) -> None:
        """Keep an accepted source, and take its events out of the search."""
        if found is not None and self.accepts(found):
            into.append(found[0])
            self.remaining[found[1]] = False

    @property
    def enough_left(self) -> bool:
        return int(self.remaining.sum()) >= self.min_events

    def head(self, events: int) -> _Events:
        """The remaining events of the run's first stretch holding `events`
        of them, as a search of its own (the whole search when it has fewer)."""
        left = np.flatnonzero(self.remaining)
        if len(left) <= events:
            return self
        end = float(self.starts[left[events]])
        starts, durations = self.starts[left[:events]], self.durations[left[:events]]
        return _Events(starts, durations, end, self.bin_ns, np.ones(events, dtype=bool), self.min_events,
                       self.min_coverage)  # fmt: skip


def _next_source(ev: _Events, threshold: float) -> tuple[PeriodicSource, NDArray[np.intp]] | None:
    """The strongest periodic source among the remaining events, trying the
    spectrum's peaks in turn until one lines up enough events."""
    power, df = _spectrum(ev.starts[ev.remaining], ev.durations[ev.remaining], ev.span_ns, ev.bin_ns)
    lo, hi = max(int(MIN_FREQ_HZ / df), 1), min(int(MAX_FREQ_HZ / df), len(power) - 1)
    if lo >= hi:
        return None
    power = power[: hi + 1].copy()
    for _ in range(MAX_CANDIDATES):
        peak = lo + int(np.argmax(power[lo:]))
        if power[peak] < threshold:
            return None
        best = _best_harmonic(ev, power, peak, lo, df)
        if ev.accepts(best):
            return best
        power[max(peak - 2, 0) : peak + 3] = 0  # not this one: try the next peak
    return None


def _best_harmonic(
    ev: _Events, power: NDArray[np.float64], peak: int, lo: int, df: float
) -> tuple[PeriodicSource, NDArray[np.intp]] | None:
    """A spectral peak may be a harmonic of the source: try it and its
    subharmonics, and keep the one that explains most, members x coverage.
    (The fundamental lines up every event at full coverage; a harmonic halves
    the coverage; a subharmonic halves the members.)"""
    sample = ev.head(SAMPLE_EVENTS)
    best: tuple[PeriodicSource, NDArray[np.intp]] | None = None
    best_period = 0.0
    for div in range(1, MAX_DIVISOR + 1):
        index = round(peak / div)
        if index < lo:
            break
        # A subharmonic is tried even when weak in the spectrum: two pulse
        # trains of one period but different phases cancel there.
        index = max(range(max(index - 1, lo), min(index + 2, len(power))), key=lambda i: power[i])
        candidate = _source(sample, 1e9 / (index * df))
        if candidate and (best is None or _score(candidate[0]) > _score(best[0])):
            best, best_period = candidate, 1e9 / (index * df)
    if sample is ev or best is None:
        return best
    return _source(ev, best_period)


def _score(source: PeriodicSource) -> float:
    return source.events * min(source.coverage, 1.0)


def _source(ev: _Events, period: float) -> tuple[PeriodicSource, NDArray[np.intp]] | None:
    """The source of this period among the remaining events, if one is there."""
    tol = max(2 * ev.bin_ns, 0.02 * period)
    members, period, center, jitter = _fit(ev.starts[ev.remaining], ev.durations[ev.remaining], period, tol)
    idx = np.flatnonzero(ev.remaining)[members]
    # Periods whose moment falls inside the span, counted from the phase: a
    # train starting near 0 fits one more than span // period.
    expected = int((ev.span_ns - center % period) // period) + 1
    # Chance alignments: random events at rate r put one within about
    # 1/(2r) of any grid point, and evenly across the window (std
    # tol/sqrt(3)); a real source sits far tighter on its line than either.
    rate = ev.remaining.sum() / ev.span_ns
    chance = min(tol, 1 / (2 * rate)) if rate else tol
    if not len(idx) or not expected or not jitter <= chance / 4:
        return None
    source = PeriodicSource(
        frequency_hz=1e9 / period,
        period_ns=period,
        events=len(idx),
        expected=expected,
        jitter_ns=jitter,
        median_duration_ns=float(np.median(ev.durations[idx])),
        lost_ns=float(ev.durations[idx].sum()),
    )
    return source, idx


def find_periodic(
    starts_ns: NDArray[np.float64] | list[float],
    durations_ns: NDArray[np.float64] | list[float],
    span_ns: float,
    *,
    max_sources: int = 4,
    min_events: int = 10,
    min_coverage: float = 0.5,
    threshold: float = 25.0,
    hints_hz: tuple[float, ...] = (),
) -> list[PeriodicSource]:
    """Periodic sources among events, strongest first. A source must line up
    at least min_events events covering min_coverage of its periods.
    hints_hz are frequencies the evidence predicts (the tick at CONFIG_HZ):
    each is tested directly first, as a matched filter, since a source can
    hide in a spectrum dominated by long random gaps."""
    starts = np.asarray(starts_ns, dtype=np.float64)
    durations = np.asarray(durations_ns, dtype=np.float64)
    if starts.shape != durations.shape:
        raise ValueError("starts and durations differ in length")
    if span_ns <= 0:
        raise ValueError("span must be positive")
    inside = (starts >= 0) & (starts < span_ns)  # events outside the span are not this run's
    ev = _Events(starts[inside], durations[inside], span_ns, max(10_000.0, span_ns / MAX_BINS),
                 np.ones(int(inside.sum()), dtype=bool), min_events, min_coverage)  # fmt: skip
    found: list[PeriodicSource] = []
    for hz in hints_hz:
        if ev.enough_left:
            ev.take(_source(ev, 1e9 / hz), found)
    while len(found) < max_sources and ev.enough_left:
        source = _next_source(ev, threshold)
        if source is None:
            break
        ev.take(source, found)
    return found
