"""The periodicity search of quietcore 0.1 (commit abe4661), kept verbatim as
the reference the analysis benchmark checks the vectorised one against.

Periodic noise sources from event start times.

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

MAX_BINS = 1 << 22  # spectrum size bound: long runs get coarser bins
MIN_FREQ_HZ = 0.2
MAX_FREQ_HZ = 5000.0  # ticks run at 100-1000 Hz; faster "periods" are bursts
MAX_CANDIDATES = 12
MAX_DIVISOR = 16  # the strongest peak can be a high harmonic of a narrow pulse train (seen: the 10th)
WINDOW_PERIODS = 50  # phase is found afresh in each window of this many periods


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
    nbins = int(span_ns // bin_ns) + 1
    train = np.bincount((starts // bin_ns).astype(np.int64), weights=weights, minlength=nbins)
    train -= train.mean()
    norm = float(np.sum(weights**2)) or 1.0
    power = np.abs(np.fft.rfft(train)) ** 2 / norm
    return power, 1e9 / (nbins * bin_ns)  # power per frequency bin, and the bin width in Hz


def _densest_phase(starts: NDArray[np.float64], weights: NDArray[np.float64], period: float, tol: float) -> float:
    """The fold offset, in tol-wide bins, with the most events weighted by
    the square root of their length: of two trains of one period (this VM's
    host has one at 100 Hz) the costlier wins, while one long random gap
    cannot outweigh a whole train of short ones (the tick)."""
    phase = np.mod(starts, period)
    bins = max(int(period // tol), 1)
    counts, edges = np.histogram(phase, bins=bins, range=(0, period), weights=np.sqrt(weights))
    k = int(np.argmax(counts))
    return float((edges[k] + edges[k + 1]) / 2)


def _members(
    starts: NDArray[np.float64], period: float, center: float, tol: float
) -> tuple[NDArray[np.bool_], NDArray[np.float64]]:
    """Events within tol of the train t = center + n * period, one per
    period (the closest: others are other sources); and the residuals."""
    n = np.round((starts - center) / period)
    residual = starts - (center + n * period)
    members = np.abs(residual) <= tol
    order = np.lexsort((np.abs(residual), n))
    first = np.ones(len(order), dtype=bool)
    first[1:] = n[order][1:] != n[order][:-1]
    keep = np.zeros(len(starts), dtype=bool)
    keep[order[first]] = True
    return members & keep, residual


def _fit(
    starts: NDArray[np.float64], weights: NDArray[np.float64], period: float, tol: float
) -> tuple[NDArray[np.bool_], float, float, float]:
    """Events on a periodic train, the refined period, its phase and the
    residual jitter. The period is fitted over the whole run; the phase is
    found again in each window of WINDOW_PERIODS periods, because a source
    may change phase mid-run (a tick re-armed, a timer restarted) without
    changing its period."""
    center = _densest_phase(starts, weights, period, tol)
    for _ in range(3):  # refine: fit t = t0 + n * P on the members
        n = np.round((starts - center) / period)
        members = np.abs(starts - (center + n * period)) <= tol
        if members.sum() < 3 or np.ptp(n[members]) == 0:
            break  # too few periods to fit a line through
        slope, intercept = np.polyfit(n[members], starts[members], 1)
        period, center = float(slope), float(intercept)
    window = WINDOW_PERIODS * period
    members = np.zeros(len(starts), dtype=bool)
    residual = np.zeros(len(starts))
    edges = np.arange(0.0, float(starts.max(initial=0.0)) + window, window)
    for lo in edges:
        inside = (starts >= lo) & (starts < lo + window)
        if inside.sum() == 0:
            continue
        local = _densest_phase(starts[inside], weights[inside], period, tol)
        m, r = _members(starts[inside], period, local, tol)
        if m.any():  # centre the window's phase on its members, then take them again
            m, r = _members(starts[inside], period, local + float(np.median(r[m])), tol)
        members[inside] = m
        residual[inside] = r
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
    best: tuple[PeriodicSource, NDArray[np.intp]] | None = None
    for div in range(1, MAX_DIVISOR + 1):
        index = round(peak / div)
        if index < lo:
            break
        # A subharmonic is tried even when weak in the spectrum: two pulse
        # trains of one period but different phases cancel there.
        index = max(range(max(index - 1, lo), min(index + 2, len(power))), key=lambda i: power[i])
        candidate = _source(ev, 1e9 / (index * df))
        if candidate and (best is None or _score(candidate[0]) > _score(best[0])):
            best = candidate
    return best


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


def name_source(source: PeriodicSource, config_hz: int | None) -> str | None:
    """What a periodic source most likely is, where the evidence allows."""
    f = source.frequency_hz
    if config_hz and abs(f - config_hz) <= 0.02 * config_hz:
        return f"the scheduler tick, CONFIG_HZ={config_hz}"
    if config_hz and any(abs(f - config_hz / k) <= 0.02 * config_hz / k for k in (2, 4)):
        return f"every {round(config_hz / f)}th tick (CONFIG_HZ={config_hz}): a tick-driven timer"
    if config_hz and any(abs(f - k * config_hz) <= 0.02 * k * config_hz for k in (2, 3, 4)):
        k = round(f / config_hz)
        return f"{k} x the tick rate (CONFIG_HZ={config_hz}): the tick changing phase, or with another source in step"
    if abs(f - 1.0) <= 0.02:
        return "once a second: vmstat/stat updates (vm.stat_interval) or another 1 s timer"
    return None
