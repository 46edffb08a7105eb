"""Periodic noise sources from event start times.

The events (gaps over the threshold) are binned into a spike train, each
weighted by its duration, whose power spectrum shows a periodic source as a
comb of peaks at its frequency and harmonics. Each bin is judged against
its neighbourhood where that stands above white noise (the slow swell of a
host's bursts). The strongest peak is taken with the fundamentals whose
harmonics, summed, stand highest (a narrow pulse train has power at every
harmonic, and its strongest may be its 48th), and the candidate that lines
up most events over most of its periods wins, after a check that it is not
several sources in step (its events part by length). Its period is refined
by least squares on the events that line up with it; those events are
removed and the search repeats. This is the periodogram of a point process
(Bartlett 1963) with the incoherent harmonic sums of pulsar searches; the
threshold on peak power guards against the many frequencies searched."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

from quietcore.stats import fold
from quietcore.stats.windows import next_fast_len

MAX_BINS = 1 << 22  # spectrum size bound: long runs get coarser bins
# The spike train's finest bin. Its Nyquist frequency, 20 kHz, is four times
# MAX_FREQ_HZ, where binning keeps 97 % of a peak's amplitude; 10 µs bins
# made a 60 s run's FFTs 2.5 times longer for frequencies never searched.
MIN_BIN_NS = 25_000.0
# The bins of the spectrum of a CPU searched with known rates (analyze's CPUs past the scouts, which search only
# peaks above the node's background): twice as wide, half the FFT, the power restored for what binning takes
# (at 5 kHz it keeps 81 %, where the finest bins keep 95 %). The aliases it lets into the searched band come
# from 15-20 kHz and keep at most 9 % of their power. The FFT was half of such a CPU's analysis.
COARSE = 2
# Every CPU's spectrum takes those bins past this many fine bins (a 13 s run): numpy's FFT of a 30 s run's 1.2
# million took 28 ms here, of its 600,000 coarse ones 7 ms (timed one after the other: four times as long for twice
# the bins), and a scout's four passes spent two fifths of its time in _spectrum.
COARSE_FROM_BINS = 1 << 19
MIN_FREQ_HZ = 0.2
MAX_FREQ_HZ = 5000.0  # ticks run at 100-1000 Hz; faster "periods" are bursts
MAX_CANDIDATES = 8  # spectral peaks tried per source
MAX_DIVISOR = 16  # a known rate's dense comb is counted as its own up to this harmonic (see _harmonic_of)
WINDOW_PERIODS = 50  # phase is found afresh in each window of this many periods
# Which fundamental of a spectral peak is the source is decided on the run's
# first stretch holding this many events (all of a short run), and only the
# winner is fitted over the whole run: the search then costs a fixed amount
# per peak, and the whole analysis stays linear in the events.
SAMPLE_EVENTS = 20_000
# And at least this many periods of the slower fundamental a peak's search
# fits, in a longer stretch where it needs one (_unmerge's multiples are
# judged on the same stretch): 20,000 gaps at the
# GPU node's 2,400 a second are 8 s, 80 periods of a 10 Hz candidate where
# 50,000 held 200. With both,
# where SAMPLE_EVENTS was 50,000 alone, the GPU node's 16-CPU replay took
# 0.89 of the time, and every CPU of the 16-, 64- and 384-CPU replays of
# eight templates and of the GPU node's nine sessions kept its sources and
# every floor, bit for bit but for a 250 Hz train's rate in its 7th digit and
# a busier template's drifting second 100 Hz train (5 % more or fewer
# members). 10,000 alone lost a 20 Hz train of this VM (65 % of its periods)
# on two CPUs of sixteen.
SAMPLE_PERIODS = 200
PHASE_STEPS = 4  # phase resolution: tol / PHASE_STEPS (see _window_phases)
MAX_MERGED = 4  # sources in step that one train may hold (see _unmerge)
FULL_COVERAGE = 0.9  # a train this full may be every k-th period of a faster one (see _faster)
PREFILTER = 512  # a hint's members _hinted looks past first, for a faster train
PREFILTER_MARGIN = 0.1  # under its bar by this much on them, not looked for on all
UNMERGE_FACTOR = 2.0  # median lengths this far apart are two sources (see _unmerge)
MERGED_FACTOR = 4.0  # a member this many times the median length holds another source


#: A spectral peak tried in vain: its power and its frequency (Hz).
Tried = tuple[float, float]


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
    starts: NDArray[np.float64], weights: NDArray[np.float64], span_ns: float, bin_ns: float, restore: bool = False
) -> tuple[NDArray[np.float64], float]:
    """Power of the spike train weighted by each event's duration: a source
    matters by the time it takes, not by how often it fires. Normalised by
    the sum of squared weights, random events give a power of about 1 at
    every frequency, whatever their durations. `restore`: each bin's power
    is divided by what binning keeps of a train's there (sinc squared of the
    frequency times the bin), for bins coarser than MIN_BIN_NS (COARSE)."""
    # The bin is widened a little so that the bin count is a length the FFT
    # does fast (few small prime factors): 4,000,001 bins took 1.4 s, a
    # 5-smooth length near it 0.1 s. Zero-padding instead would sample the
    # spectrum more finely, and move the peaks the search steps between.
    nbins = next_fast_len(int(span_ns // bin_ns) + 1)
    bin_ns = span_ns / (nbins - 1)
    # np.floor of a quotient, not //: numpy's floor division of floats is exact by fmod, and 19 times slower
    # (0.5 ms for 41,000 starts here, where a CPU past the scouts spends 30 ms in all)
    train = np.bincount(np.minimum(np.floor(starts / bin_ns), nbins - 1).astype(np.int64), weights=weights,
                        minlength=nbins)  # fmt: skip
    train -= train.mean()
    norm = float(np.sum(weights**2)) or 1.0
    power = np.abs(np.fft.rfft(train)) ** 2 / norm  # numpy 2's FFT: scipy's speed here (4M bins: 70 ms)
    df = 1e9 / (nbins * bin_ns)
    if restore:
        top = min(int(MAX_FREQ_HZ / df) + 1, len(power))
        power[:top] *= _restoring(top, nbins)
    return power, df  # power per frequency bin, and the bin width in Hz


@lru_cache(maxsize=4)
def _restoring(top: int, nbins: int) -> NDArray[np.float64]:
    """1 / sinc(k / nbins)^2 for the first `top` frequency bins k: what binning
    takes of a train at bin k, restored. The node's CPUs share their span, so
    it is computed once (a sine of 150,000 bins was a tenth of such a CPU's
    spectrum)."""
    factor: NDArray[np.float64] = 1.0 / np.sinc(np.arange(top) / nbins) ** 2
    factor.flags.writeable = False
    return factor


#: A bin's background is the median of its block of this many bins (over ln 2, white noise's median power): 2 Hz in
#: a 30 s run, where this VM's background fell from 180 times white noise's at 0.2-0.5 Hz to 2 at 50 Hz.
WHITEN_BLOCK = 64
#: Bins whose background stands over this many times white noise's are divided down to it: the slow swell of a
#: host's bursts of gaps, not a source. Dividing down to white noise itself (1) also dimmed the combs of the sources
#: that stand on a lesser swell: a 16-CPU replay of this VM found 40 sources where it found 58.
RED_NOISE = 2.0


def _whitened(power: NDArray[np.float64], hi: int) -> NDArray[np.float64]:
    """The spectrum's first hi + 1 bins, each divided by how far its neighbourhood's background stands over
    RED_NOISE times white noise's (by nothing where it does not), the background interpolated between
    WHITEN_BLOCK-bin blocks. A host's bursts of gaps swell the spectrum of this VM's runs to 50-230 times white
    noise's under 2 Hz, where its peaks (0.4 Hz at 892, where none over 50 Hz stood past 136) were every
    candidate a scout tried once its strong trains were taken, in vain, and set the node's floor at 662: the
    host's second 100 Hz train was found or lost by how the autocorrelation those searches also tried
    happened to bin, on most CPUs of a replay."""
    out = power[: hi + 1].copy()
    blocks = (hi + 1) // WHITEN_BLOCK
    if blocks < 1:
        return out
    middle = WHITEN_BLOCK // 2
    background = np.partition(out[: blocks * WHITEN_BLOCK].reshape(blocks, WHITEN_BLOCK), middle, axis=1)[:, middle]
    background /= np.log(2)
    red = np.flatnonzero(background > RED_NOISE)
    if not len(red):
        return out
    end = min((int(red[-1]) + 2) * WHITEN_BLOCK, hi + 1)  # past the last red block, the background is white
    level = np.interp(np.arange(end), (np.arange(blocks) + 0.5) * WHITEN_BLOCK, background)
    out[:end] /= np.maximum(level / RED_NOISE, 1.0)
    return out


def _densest_phase(starts: NDArray[np.float64], strength: NDArray[np.float64], period: float, tol: float) -> float:
    """The fold offset, in tol-wide bins, with the most events weighted by
    the square root of their length: of two trains of one period (this VM's
    host has one at 100 Hz) the costlier wins, while one long random gap
    cannot outweigh a whole train of short ones (the tick)."""
    return float(_window_phases(starts, strength, period, tol, None)[0])


def _window_phases(
    starts: NDArray[np.float64], strength: NDArray[np.float64], period: float, tol: float, w: NDArray[np.int64] | None
) -> NDArray[np.float64]:
    """_densest_phase for every window of the run at once (`w`: each event's
    window, in time order; None: one window): one 2-D histogram (window x phase bin), summed over
    tol-wide stretches of PHASE_STEPS bins each, and the argmax per row.
    Returns the phase of each window. The stretches slide by a quarter of tol:
    in tol-wide bins, a source on a bin edge was placed half a bin off, where
    a random event in a busy run (this VM: 30 per 10 ms) lay closer than it."""
    bins = max(int(period * PHASE_STEPS // tol), PHASE_STEPS)
    width = period / bins
    rows = int(w[-1]) + 1 if w is not None and len(w) else 1  # the windows ascend with the starts
    native = fold.phase_counts(starts, strength, w, period, bins, rows)
    counts = native if native is not None else _phase_counts(starts, strength, w, period, bins, rows)
    # in C where the library is: numpy's shifted adds and argmax were half of this function on a 1 kHz train's
    # 600 windows of 80 bins (0.17 of 0.35 ms on the GPU node's replay; 0.11 in C)
    best = fold.densest(counts, PHASE_STEPS)
    if best is None:
        best = _densest_bins(counts)
    phases: NDArray[np.float64] = ((best + PHASE_STEPS / 2) * width % period).astype(np.float64, copy=False)
    return phases


def _densest_bins(counts: NDArray[np.float64]) -> NDArray[np.int64]:
    """fold.densest in numpy: each row's sums of PHASE_STEPS neighbouring bins (circular: a stretch may wrap
    past the period's end), and the first bin of the largest."""
    bins = counts.shape[1]
    stretch = counts.copy()
    for k in range(1, PHASE_STEPS):
        # np.roll(counts, -k, axis=1) added in two slices, the same sums without a copy
        stretch[:, : bins - k] += counts[:, k:]
        stretch[:, bins - k :] += counts[:, :k]
    best: NDArray[np.int64] = stretch.argmax(axis=1)
    return best


def _phase_counts(starts: NDArray[np.float64], strength: NDArray[np.float64], w: NDArray[np.int64] | None,
                  period: float, bins: int, rows: int) -> NDArray[np.float64]:  # fmt: skip
    """fold.phase_counts in numpy's passes (no C library): the period count and the phase from one division."""
    q = starts / period
    b = np.minimum(((q - np.floor(q)) * bins).astype(np.int64), bins - 1)
    at = b if w is None else w * bins + b
    # weighted, bincount's counts are float64 already: no copy
    counts = np.bincount(at, weights=strength, minlength=rows * bins).astype(np.float64, copy=False)
    return counts.reshape(rows, bins)


def _offsets(
    starts: NDArray[np.float64], center: NDArray[np.float64] | float, period: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Each start's period count n = round((start - center) / period) and its residual
    start - (center + n * period), both computed in place where the arithmetic allows:
    the same operations on the same values, so the same bits, in two arrays of the run's
    length where the expressions made seven (a tenth of a _members call here)."""
    n = starts - center
    np.divide(n, period, out=n)
    np.round(n, out=n)
    residual = n * period
    residual += center
    np.subtract(starts, residual, out=residual)
    return n, residual


def _members(
    starts: NDArray[np.float64], period: float, local: NDArray[np.float64], tol: float, w: NDArray[np.int64]
) -> tuple[NDArray[np.intp], NDArray[np.float64]]:
    """Events within tol of their window's train t = local[w] + n * period,
    one per period and window (the closest, the earlier of two as close:
    others are other sources), their indices ascending, and their residuals
    from the train. Indices, not a mask: a fit takes the members' starts and
    windows, and a mask's every gather read the whole run. The starts are
    in time order (periodic_members sees to it), and so are the events'
    (window, period) pairs, since each window keeps one phase: the events of
    one pair are neighbours, and the closest of each is found without a sort
    (a lexsort here was a third of a 65,000-event run's analysis)."""
    native = fold.members(starts, w, local, period, tol)
    if native is not None:
        return native
    # Each window's phase repeated over its events: a stretch each, as the starts are in time order (a gather of
    # the run's length, local[w], took three times as long)
    n, residual = _offsets(starts, np.repeat(local, np.bincount(w, minlength=len(local))), period)
    a = np.abs(residual)
    near = np.flatnonzero(a <= tol)
    if not len(near):
        return near, residual[near]
    nn, wn, an = n[near], w[near], a[near]
    new = np.ones(len(near), dtype=bool)
    new[1:] = (nn[1:] != nn[:-1]) | (wn[1:] != wn[:-1])
    group = np.cumsum(new) - 1
    closest = np.minimum.reduceat(an, np.flatnonzero(new))
    at_min = np.flatnonzero(an == closest[group])
    first = np.ones(len(at_min), dtype=bool)
    first[1:] = group[at_min][1:] != group[at_min][:-1]
    members = near[at_min[first]]
    return members, residual[members]


def _group_medians(values: NDArray[np.float64], groups: NDArray[np.int64], size: int) -> NDArray[np.float64]:
    """np.median of values per group (0 for an empty group). A fit's groups
    are its windows, of at most a member a period: each group a row of a
    grid padded with +inf, every row sorted at once (a third of the time of
    two argsorts, the values' then the groups', on the GPU node's 1 kHz
    train's 30,000 members in 600 windows); where the rows would be unlike
    in length, by those two sorts."""
    counts = np.bincount(groups, minlength=size)
    offsets = np.cumsum(counts) - counts
    width = max(int(counts.max(initial=0)), 1)
    out = np.zeros(size)
    has = counts > 0
    if size * width <= 4 * len(values) + 1024:
        grid = np.full((size, width), np.inf)
        grid[groups, np.arange(len(values)) - offsets[groups]] = values
        grid.sort(axis=1)
        rows, c = np.flatnonzero(has), counts[has]
        out[has] = (grid[rows, (c - 1) // 2] + grid[rows, c // 2]) / 2
        return out
    order = np.argsort(values)
    by = groups[order]
    order = order[np.argsort(by.astype(np.int16) if size <= 1 << 15 else by, kind="stable")]  # radix where it fits
    v = values[order]
    out[has] = (v[offsets[has] + (counts[has] - 1) // 2] + v[offsets[has] + counts[has] // 2]) / 2
    return out


def _fit(
    starts: NDArray[np.float64], strength: NDArray[np.float64], period: float, tol: float, span: float, refined: bool
) -> tuple[NDArray[np.intp], float, float, float]:
    """Events on a periodic train (their indices, ascending), the refined
    period, its phase and the residual jitter. The period is fitted over the
    whole run; the phase is found again in each window of about WINDOW_PERIODS periods, because a
    source may change phase mid-run (a tick re-armed, a timer restarted)
    without changing its period. The windows split the span evenly: a last
    window of a sliver would take its one stray event as its phase, and so
    as a member (seen: 401 of 400 periods). Every window is done at once, in
    array operations: the cost grows linearly with the events. `refined`:
    the period is a fit's already (another CPU's train, the rate the node's
    scouts found), so the whole run's line is not fitted again: the windows'
    phases and their least squares (_refit) follow it as they follow a
    source's drift, and its phase is the first window's. `strength`: each
    event's weight in a fold, the square root of its length (see
    _densest_phase)."""
    center = 0.0 if refined else _densest_phase(starts, strength, period, tol)
    before: NDArray[np.intp] | None = None
    # refine: fit t = t0 + n * P on the members (a fitted period skips it: the fold and the line were 40 % of a
    # hinted fit on the GPU node's CPUs past the scouts, 2.1 of 5.3 ms)
    for _ in range(0 if refined else 3):
        on, n_on = _near_line(starts, center, period, tol)
        if before is not None and np.array_equal(on, before):
            break  # the same members give the same line: the fit has settled
        before = on
        if len(on) < 3 or np.ptp(n_on) == 0:
            break  # too few periods to fit a line through
        period, center = _line(n_on, starts[on])
    windows = max(1, round(span / (WINDOW_PERIODS * period)))
    w = _windows(starts, span, windows)
    local = _window_phases(starts, strength, period, tol, w)  # a phase a window up to the last with events
    members, residual = _members(starts, period, local, tol, w)  # the members' residuals
    if len(members):  # centre each window's phase on its members, then take them again
        local = local + _group_medians(residual, w[members], len(local))
        members, residual = _members(starts, period, local, tol, w)
    if len(members) >= 3:  # the period once more, on the members alone, each window its own phase
        period, local = _refit(starts[members], w[members], period, local)
        members, residual = _members(starts, period, local, tol, w)
    jitter = float(residual.std()) if len(members) else float("nan")
    return members, period, float(local[0]) if refined else center, jitter


def _windows(starts: NDArray[np.float64], span: float, windows: int) -> NDArray[np.int64]:
    """Each start's window of `windows` splitting [0, span) evenly (fold.windows where the library is)."""
    native = fold.windows(starts, span, windows)
    if native is not None:
        return native
    # an event on the span's end (rounding) is the last window's; np.floor of a quotient, not //: see _spectrum
    w: NDArray[np.int64] = np.minimum(np.floor(starts / (span / windows)), windows - 1).astype(np.int64)
    return w


def _near_line(
    starts: NDArray[np.float64], center: float, period: float, tol: float
) -> tuple[NDArray[np.intp], NDArray[np.float64]]:
    """The events within tol of the line center + n * period: their indices and their n."""
    native = fold.near_line(starts, center, period, tol)
    if native is not None:
        return native
    n, off = _offsets(starts, center, period)
    on = np.flatnonzero(np.abs(off, out=off) <= tol)
    return on, n[on]


def _line(x: NDArray[np.float64], y: NDArray[np.float64]) -> tuple[float, float]:
    """Least squares of y = a * x + b, (a, b), about the means: np.polyfit's
    line without its SVD, which was a fifth of a fit's time. Sums of products,
    not np.dot: numpy's OpenBLAS runs a dot of many thousands in its threads,
    which then spin for more (on the GPU node's 64-CPU replay they doubled the
    analysis's CPU time, 51 ms a CPU past the scouts became 104), and on a
    node being measured."""
    xm, ym = float(x.mean()), float(y.mean())
    dx = x - xm
    slope = float((dx * (y - ym)).sum()) / float((dx * dx).sum())
    return slope, ym - slope * xm


def _refit(
    t: NDArray[np.float64], w: NDArray[np.int64], period: float, centers: NDArray[np.float64]
) -> tuple[float, NDArray[np.float64]]:
    """Least squares of t = c_w + n * P with one P and a phase c_w per window:
    the first fit's line runs through every event near it, random ones too,
    and a period 2 µs off drifts 100 µs across a window (seen on 25 µs bins)."""
    n = np.round((t - centers[w]) / period)
    count = np.bincount(w, minlength=len(centers)).astype(np.float64)
    safe = np.maximum(count, 1)
    n_mean = np.bincount(w, weights=n, minlength=len(centers)) / safe
    t_mean = np.bincount(w, weights=t, minlength=len(centers)) / safe
    dn, dt = n - n_mean[w], t - t_mean[w]
    spread = float((dn * dn).sum())  # not np.dot: see _line
    if spread == 0:
        return period, centers
    slope = float((dn * dt).sum()) / spread
    if not 0.99 * period < slope < 1.01 * period:  # not this source any more: keep the first fit
        return period, centers
    return slope, np.where(count > 0, np.mod(t_mean - slope * n_mean, slope), centers)


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
    cap: float = float("inf")  # the longest an event weighs in the spectrum (see _cap)
    #: the remaining events' indices, starts and durations, kept until a source takes some: a scout tries some
    #: ninety candidate periods over the same events, each once gathered them anew (a tenth of a scout's time)
    _live: tuple[NDArray[np.intp], NDArray[np.float64], NDArray[np.float64]] | None = field(default=None, repr=False)
    _strength: NDArray[np.float64] | None = field(default=None, repr=False)  # the same, of strength()

    def live(self) -> tuple[NDArray[np.intp], NDArray[np.float64], NDArray[np.float64]]:
        """The remaining events: their indices, starts and durations."""
        if self._live is None:
            left = np.flatnonzero(self.remaining)
            self._live = left, self.starts[left], self.durations[left]
        return self._live

    def strength(self) -> NDArray[np.float64]:
        """The remaining events' weights in a fold, the square root of their lengths (see _densest_phase)."""
        if self._strength is None:
            self._strength = np.sqrt(self.live()[2])
        return self._strength

    def accepts(self, found: tuple[PeriodicSource, NDArray[np.intp]] | None) -> bool:
        return found is not None and found[0].events >= self.min_events and found[0].coverage >= self.min_coverage

    def take(self, found: tuple[PeriodicSource, NDArray[np.intp]] | None, into: list[PeriodicSource],
             members: list[NDArray[np.intp]]) -> None:  # fmt: skip
        """Keep an accepted source and its members, and take its events out of the search."""
        if found is not None and self.accepts(found):
            into.append(found[0])
            members.append(found[1])
            self.remaining[found[1]] = False
            self._live = self._strength = None

    @property
    def enough_left(self) -> bool:
        return len(self.live()[0]) >= self.min_events

    def head(self, events: int) -> _Events:
        """The remaining events of the run's first stretch holding `events`
        of them, as a search of its own (the whole search when it has fewer)."""
        left = self.live()[0]
        if len(left) <= events:
            return self
        end = float(self.starts[left[events]])
        starts, durations = self.starts[left[:events]], self.durations[left[:events]]
        return _Events(starts, durations, end, self.bin_ns, np.ones(events, dtype=bool), self.min_events,
                       self.min_coverage, self.cap)  # fmt: skip


#: The fits of a spectral pass, by frequency bin and the events of the stretch fitted (_sample): peaks share their
#: fundamentals, but only on the same stretch.
_Fits = dict[tuple[int, int], tuple[PeriodicSource, NDArray[np.intp]] | None]


def _sample(ev: _Events, slowest_hz: float) -> _Events:
    """The run's first stretch of remaining events on which a candidate as slow as slowest_hz is judged
    (SAMPLE_EVENTS, SAMPLE_PERIODS): the whole search where that is all of it."""
    _, starts, _ = ev.live()
    events = SAMPLE_EVENTS
    if len(starts) > events and slowest_hz > 0:
        events = max(events, int(np.searchsorted(starts, SAMPLE_PERIODS * 1e9 / slowest_hz)))
    return ev.head(events)


def _cap(durations: NDArray[np.float64], min_events: int) -> float:
    """The longest an event weighs in the spectrum: the run's min_events-th
    longest. Fewer events than that cannot be a source, and a few of them can
    drown every source: in a CI check of 0.5 s, two stalls of the host (2.5
    and 4.9 ms) were 93 % of the weights' squares, and a planted 100 Hz x
    212 µs train, 49 events in 50 periods, stood at 6 in a spectrum whose
    threshold is 25. Taken once over the whole run, so a search after the
    first is not made keener on what the first left. A source's events are
    alike, so none of them is weighed less than another; each event keeps
    its length in what is found."""
    if len(durations) < min_events or min_events < 1:
        return float("inf")
    return float(np.partition(durations, len(durations) - min_events)[len(durations) - min_events])


def _next_source(ev: _Events, threshold: float, known_hz: tuple[float, ...] = (),
                 failed: tuple[list[Tried], list[Tried]] | None = None, light_threshold: float | None = None,
                 coarse: bool = False, futile: tuple[tuple[Tried, ...], tuple[Tried, ...]] = ((), ()),
                 candidates: int = MAX_CANDIDATES, searches: int = MAX_CANDIDATES, look: float | None = None
                 ) -> tuple[PeriodicSource, NDArray[np.intp]] | None:  # fmt: skip
    """The strongest periodic source among the remaining events, trying the
    spectrum's peaks in turn until one lines up enough events; peaks at the
    harmonics of known_hz are tried as themselves alone (see periodic_members).
    `failed`: each peak tried in vain, (power, Hz), is added to its first
    list, or its second when the spectrum was the second kind below;
    `futile`: such peaks of other CPUs, in the same two kinds (see
    periodic_members).

    When a few long events are nearly all of the weights' squares, a source
    among the rest stands a fraction of its height in that spectrum, so the
    events are weighed by the square root of their length instead, as a fold
    weighs them (seen: a host's burst of fifty 4 ms stalls in 2.5 s put a
    100 Hz x 200 µs train, 2 % of the CPU, at 3.8 against a threshold of 25;
    it stood at 84 so). Long events still weigh most there, so a train of
    them still stands. Such a spectrum's peaks stand higher (the scouts'
    strongest in vain on the GPU node's 64-CPU replay: a median of 365, where
    the other kind's was 109), so it has its own bar, light_threshold
    (threshold when None)."""
    _, starts, durations = ev.live()
    weights = np.minimum(durations, ev.cap)
    tail = _tail(weights)
    heavy = _tail_heavy(weights, tail)
    light = light_threshold if light_threshold is not None else threshold
    tried: list[Tried] = failed[heavy] if failed is not None else []
    before = len(tried)
    found = _spectral_pass(ev, starts, _light(weights, tail, ev.min_events) if heavy else weights,
                           light if heavy else threshold, known_hz, tried, coarse, futile[heavy], candidates,
                           searches, look)  # fmt: skip
    if found is not None or heavy or known_hz or len(tried) > before or not EMPTY_SECOND_LOOK:
        if found is None and look is not None and not heavy:
            # The last look in the other kind of spectrum too: where a host's stalls and a task's turns of
            # milliseconds weigh most, a train of short gaps stands in the square roots' (this VM's replays: a
            # 37 Hz x 54 µs train's comb at 35 weighed by length, past 200 so)
            return _spectral_pass(ev, starts, _light(weights, tail, ev.min_events), float("inf"), known_hz, None,
                                  coarse, futile[True], candidates, searches, look)  # fmt: skip
        return found
    # A search with no rate known from elsewhere (a first scout, a run of a few CPUs) and nothing over the bar
    # to try, weighed by length: the long events may still drown a train short of the tail's test (seen: a CI
    # run's template, 40 host stalls of 1.3-8.8 ms in 2.5 s, the longest 5 % of the gaps 96.5 % of the squares,
    # put the tick's 610 gaps of 17 µs at 3.2; weighed by the square root it stood at 68, and no CPU of its
    # 64-CPU replay but a planted one found any source). The other kind, then. Not where rates are known: what
    # the first scouts find, every other CPU tries as a hint (on every CPU, the GPU node's 64-CPU replay took
    # 1.38 ms a CPU-second where it took 0.82, a second FFT on most CPUs past the scouts, for no source).
    return _spectral_pass(ev, starts, _light(weights, tail, ev.min_events), light, known_hz,
                          None if failed is None else failed[True], coarse, futile[True], candidates,
                          searches)  # fmt: skip


#: A search with no rate known that found nothing over the bar weighed by length looks again weighed by the
#: square root (see _next_source).
EMPTY_SECOND_LOOK = True
#: The longest this share of the events carrying this share of the weights' squares: the rest's sources
#: stand at a fiftieth of their height or less (on this VM's CPUs the longest 5 % carry 56-95 %; in a
#: host's burst of stalls, 99.9 %).
TAIL_EVENTS, TAIL_SHARE = 0.05, 0.98


def _tail(weights: NDArray[np.float64]) -> NDArray[np.float64] | None:
    """The longest TAIL_EVENTS of the weights, in no order (None when that is all of them): one partition for
    both the tail's test (_tail_heavy) and the light weights' cap (_light)."""
    n = len(weights)
    k = max(int(n * TAIL_EVENTS), 1)
    return None if n <= k else np.partition(weights, n - k)[n - k :]


def _light(weights: NDArray[np.float64], tail: NDArray[np.float64] | None, min_events: int) -> NDArray[np.float64]:
    """The weights of the second kind of spectrum: the square root of each, no gap weighing more than the
    length at which the longest TAIL_EVENTS of them weigh, all together, as much as all the others (their
    squares, the lengths, summed). Weighed by the square root alone, forty host stalls of 2 ms in 2.5 s of
    this VM, the tick taken, were still 98 % of the squares, and the host's two 100 Hz trains (at their
    400 Hz harmonic) stood at 22 against the bar of 25; the first was lost in half of such cuts of a
    recording. The long gaps still weigh most, one by one, and a train of them, alike, stands as high.
    Only where that tail is longer than min_events: the run's longest min_events already weigh alike (_cap),
    and the cap was measured on runs of 800 gaps and more; a 0.5 s check's searches of 11-193 gaps (a tail
    of 1-9) are left as they were (a CI run's check, so capped, once gave its planted 100 Hz x 200 µs at
    125 µs)."""
    if not LIGHT_TAIL_CAP or tail is None or len(tail) <= min_events:
        return np.sqrt(weights)
    tail = np.sort(tail)
    k = len(tail)
    body = float(weights.sum()) - float(tail.sum())
    if float(tail.sum()) <= body:
        return np.sqrt(weights)
    # The tail capped at c sums to those under c, plus c for each of the rest: between the tail's j-1-th and j-th
    # it is under[j] + (k - j) c, so c = (body - under[j]) / (k - j). Before the stretch the cap falls in, that c
    # lies past its stretch's end; from it on, at or under it: the cap is the first such (the last stretch's
    # always is, the tail's sum being over the body's). Asking c to clear its stretch's start too could find
    # none: where the cap falls on a stretch's end, rounding can put both stretches' c past their bounds.
    under = np.concatenate([[0.0], np.cumsum(tail)[:-1]])
    c = (body - under) / (k - np.arange(k))
    j = int(np.argmax(c <= tail))
    return np.sqrt(np.minimum(weights, max(float(c[j]), 0.0)))


#: Whether _light caps the longest events' weights (off: the square root alone, as before).
LIGHT_TAIL_CAP = True


def _tail_heavy(weights: NDArray[np.float64], tail: NDArray[np.float64] | None) -> bool:
    """Whether the longest TAIL_EVENTS (`tail`: _tail's) carry TAIL_SHARE of the weights' squares."""
    if tail is None:
        return False
    total = float((weights**2).sum())
    return total > 0 and float((tail**2).sum()) >= TAIL_SHARE * total


def _spectral_pass(ev: _Events, starts: NDArray[np.float64], weights: NDArray[np.float64],
                   threshold: float, known_hz: tuple[float, ...],
                   failed: list[Tried] | None, coarse: bool,
                   futile: tuple[Tried, ...] = (), candidates: int = MAX_CANDIDATES,
                   searches: int = MAX_CANDIDATES, look: float | None = None
                   ) -> tuple[PeriodicSource, NDArray[np.intp]] | None:  # fmt: skip
    """_next_source's search in the spectrum of the remaining events (`starts`)
    weighed by `weights`, in bins COARSE times as wide when `coarse`, and
    whitened (_whitened). It tries `candidates` peaks at most, of which
    `searches` at most through their fundamentals (a peak at a harmonic of a
    known rate is one or two fits). `look`: where `threshold` is the node's
    floor, the search's own threshold, from which a last look (_comb_look)
    weighs the peaks under the floor."""
    coarse = coarse and COARSE > 1
    power, df = _spectrum(starts, weights, ev.span_ns, ev.bin_ns * (COARSE if coarse else 1), restore=coarse)
    # No slower than a train holding min_events periods in the run: a peak there (the GPU node's replay stood at
    # 0.17-0.27 Hz, 5-8 periods in 30 s, over the floor on a sixth of its CPUs) can be no source, nor can its
    # subharmonics, and was tried with a fit.
    slowest = int(np.ceil((ev.min_events - 1) * 1e9 / ev.span_ns / df))
    lo, hi = max(int(MIN_FREQ_HZ / df), slowest, 1), min(int(MAX_FREQ_HZ / df), len(power) - 1)
    if lo >= hi:
        return None
    power = _whitened(power, hi)
    fits: _Fits = {}
    if power[lo:].max() < threshold:  # no peak to try
        return _comb_look(ev, power, lo, df, look, known_hz, futile, fits) if look is not None else None
    spent: set[float] = set()  # known rates one of whose harmonics was tried in vain
    tried = searched = 0
    while tried < candidates and searched < searches:
        peak = lo + int(np.argmax(power[lo:]))
        if power[peak] < threshold:
            return _comb_look(ev, power, lo, df, look, known_hz, futile, fits) if look is not None else None
        width = 2
        if _futile(futile, peak, df, float(power[peak])):
            # The node's background at this frequency: other CPUs searched a peak here, as high or nearly, in vain
            # (seen: the 19th harmonic of the tick's leftovers, 4.75 kHz, over the floor on half the CPUs of this
            # VM's 64-CPU replay, each searched through its subharmonics in vain).
            power[max(peak - _reach(peak), 0) : peak + _reach(peak) + 1] = 0
            continue
        if known := _harmonic_of(known_hz, peak, df):
            width, rate = known
            if rate and rate in spent:
                # What the hints left of that rate's trains stands at each of its harmonics (seen: seven fits in
                # vain on one CPU of the GPU node's replay, 250 Hz to 4 kHz); once its strongest held nothing, the
                # weaker are taken as more of the same.
                power[max(peak - width, 0) : peak + width + 1] = 0
                continue
            spent.add(rate)
            # A harmonic of a rate settled elsewhere: the hints took as many trains at it as the node's other CPUs
            # have, so the peak is tried as itself (a source of its own rate is found) and, where the rate is
            # resolved, the rate once more (a train more at it here: a replay's planted 100 Hz train beside the
            # host's, where the node's scouts had the one), both on a stretch holding the slower's periods.
            sample = _sample(ev, rate or peak * df)
            key = (peak, len(sample.live()[0]))
            if key not in fits:
                fits[key] = _source(sample, 1e9 / (peak * df))
            found = [f for f in (fits[key], _source(sample, 1e9 / rate) if rate else None) if f is not None]
            best = max(found, key=lambda f: _score(f[0])) if found else None
            if best is not None and sample is not ev:
                best = _source(ev, best[0].period_ns)
        else:
            best = _best_harmonic(ev, power, peak, lo, df, fits)
            searched += 1
        if ev.accepts(best):
            return best
        tried += 1
        if failed is not None:
            failed.append((float(power[peak]), peak * df))
        power[max(peak - width, 0) : peak + width + 1] = 0  # not this one: try the next peak
    return None


#: A peak at a frequency other CPUs searched in vain is searched again only from this many times the power it
#: stood at there: a source of its own would stand apart from that background.
FUTILE_FACTOR = 2.0


def _futile(futile: tuple[Tried, ...], peak: int, df: float, power: float) -> bool:
    """Whether the peak is one another CPU searched in vain: within its _reach
    of it (a frequency from a spectrum of the same span, found to its bin),
    and under FUTILE_FACTOR times the strongest such peak there."""
    near = [p for p, hz in futile if abs(hz / df - peak) <= _reach(peak)]
    return bool(near) and power < FUTILE_FACTOR * max(near)


def _reach(peak: int) -> int:
    """How many bins either side of a spectral peak a frequency found elsewhere
    may lie and still be the peak's: three, and one more per 20,000 bins of
    its frequency, as a rate known to 1e-4 (1000.0 against 1000.1 Hz) puts its
    5th harmonic half a bin off in a 10 s run."""
    return 3 + int(peak // 20_000)


def _harmonic_of(known_hz: tuple[float, ...], peak: int, df: float) -> tuple[int, float] | None:
    """When the peak is a harmonic of a known rate, how many bins either side
    of it the harmonic reaches (_reach), and the rate (None when not). The
    rate is 0.0 for a rate so slow that its harmonics' reaches cover more
    than a quarter of the spectrum (a 0.4 Hz train's, 12 bins apart in 30 s,
    make every other peak one): such a peak is tried as itself, but it says
    nothing of the rate's other harmonics. Where a rate's harmonics
    lie close (their reaches over a SPARSE-th of the spectrum), a peak is one
    only up to the MAX_DIVISOR-th: the GPU node's replay settled 1 Hz and 0.7 Hz,
    which made the 400 Hz peak of one CPU's own 100 Hz x 200 µs train a
    "harmonic", tried as itself alone, and the train was never found. A
    sparse comb's match says something at any harmonic: the tick's leftovers
    at 4.25-4.75 kHz (its 17th-19th) stood over the threshold on this VM's
    scouts, and each was searched through sixteen subharmonics in vain."""
    width = _reach(peak)
    resolved = [hz for hz in known_hz if hz / df >= 4 * (2 * width + 1)]
    for hz in resolved + [hz for hz in known_hz if hz > 0 and hz not in resolved]:
        m = round(peak * df / hz)
        sparse = hz / df >= SPARSE * (2 * width + 1)
        if m >= 1 and abs(peak - m * hz / df) <= width and (m <= MAX_DIVISOR or sparse):
            return width, (hz if hz in resolved else 0.0)
    return None


#: A known rate whose harmonics' reaches cover at most this fraction's inverse of the spectrum (a 250 Hz rate's:
#: 7 bins in 7,500 over 30 s) has every harmonic counted, not only the first MAX_DIVISOR: a peak lands on one by
#: chance once in a hundred at most (a 1 Hz rate's, 7 bins in 30: one in four).
SPARSE = 100


#: A peak's candidate fundamentals: the peak over 1 to this many (a narrow pulse train's strongest harmonic can be
#: its 48th: a 100 Hz timer was found as 150 Hz when the search reached the 16th).
HARMONIC_DIVISORS = 48
#: Harmonics summed for a candidate, at most (a 20 Hz train's up to 1.28 kHz).
HARMONICS = 64
#: Candidates fitted a peak, the highest by their harmonics' sum. A ladder that fitted every one of 16 subharmonics
#: (and the autocorrelation's period, two FFTs) made a scout's search after its last source some 120 fits in vain.
HARMONIC_FITS = 2
#: The mean and variance of the largest of three bins of white noise (exponential powers): a harmonic is read as
#: the highest bin of three about it, as a rate known to a bin drifts by one at its higher harmonics.
_MEAN3, _VAR3 = 1 + 1 / 2 + 1 / 3, 1 + 1 / 4 + 1 / 9
#: Sums within this fraction of the highest are one: the slowest of them is the fundamental (see _fundamentals).
TIED = 0.05
#: A harmonic's line is seen, and its place refines the fundamental, from this power (white noise's highest of
#: three bins passes it once in a thousand).
HARMONIC_SEEN = 8.0


def _fundamentals(power: NDArray[np.float64], peak: int, lo: int) -> NDArray[np.float64]:
    """The peak's candidate fundamentals (bins, fractional), peak / d for d up to HARMONIC_DIVISORS and no lower
    than lo, the likeliest first: by how far the sum of each one's first HARMONICS harmonics (to the spectrum's
    end) stands over what white noise would sum to there, in its standard deviations. The fundamental wins
    over its subharmonics, which add as many bins of noise as of its comb. Its harmonics, where its first 64
    are all in the comb (a slow train whose gaps are narrow and on time: its lines stand alike to 5 kHz), sum
    as full a comb, as high: of candidates within TIED of the highest, the slowest comes first."""
    f, z = _combs(power, peak, lo)
    tied = z >= z.max() - TIED * abs(z.max())
    # the tied first, slowest first (f descends with d), then the rest by their sums
    order = np.concatenate([np.flatnonzero(tied)[::-1], np.flatnonzero(~tied)[np.argsort(-z[~tied], kind="stable")]])
    ranked: NDArray[np.float64] = f[order]
    return ranked


def _combs(power: NDArray[np.float64], peak: int, lo: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The peak's candidate fundamentals (bins, fractional: peak / d for d up to HARMONIC_DIVISORS, no lower than
    lo), and how far the sum of each one's first HARMONICS harmonics stands over white noise's, in its standard
    deviations (see _fundamentals)."""
    hi = len(power) - 1
    f = peak / np.arange(1, HARMONIC_DIVISORS + 1, dtype=np.float64)
    f = f[f >= lo]
    at = np.rint(f[:, None] * np.arange(1, HARMONICS + 1, dtype=np.float64)[None, :]).astype(np.int64)
    inside = at + 1 <= hi
    at = np.minimum(at, hi - 1)
    highest = np.maximum(np.maximum(power[at - 1], power[at]), power[at + 1])
    n = inside.sum(axis=1)
    z = (np.where(inside, highest, 0.0).sum(axis=1) - n * _MEAN3) / np.sqrt(np.maximum(n, 1) * _VAR3)
    return f, z


def _comb_look(ev: _Events, power: NDArray[np.float64], lo: int, df: float, bar: float,
               known_hz: tuple[float, ...], futile: tuple[Tried, ...], fits: _Fits
               ) -> tuple[PeriodicSource, NDArray[np.intp]] | None:  # fmt: skip
    """A last look, where the node's floor stopped a CPU's search: of its COMB_PEAKS strongest peaks left
    over `bar` (the search's own threshold), the one whose fundamental's comb of harmonics stands highest,
    COMB_Z at least, is searched (_best_harmonic), the known rates' harmonics taken out of the combs first.
    A weak train's single lines stand no higher than the node's background (this VM's replays: a 37 Hz x
    27 µs train's strongest at 68-122 against a floor of 52-70 and the background's 40-140), where its comb
    stands apart (z of 260-330, the background's, the known rates' taken out, under 75): on 384 CPUs such a
    train was found on a third of the CPUs that had it (issue 62)."""
    whole, comb = power.copy(), power.copy()
    top = len(power) - 1
    for hz in known_hz:  # what the known rates' trains left: their lines, not this CPU's own train
        at = np.rint(np.arange(1, int(MAX_FREQ_HZ / hz) + 1) * hz / df).astype(np.int64)
        for k in at[at <= top].tolist():
            comb[max(k - _reach(k), 0) : k + _reach(k) + 1] = 0.0
    slowest = lo  # a fundamental with COMB_LINES harmonics at least in the spectrum
    fastest = top / COMB_LINES
    combs: list[tuple[float, float, int]] = []  # (z, fundamental, the peak it is a fundamental of)
    for _ in range(COMB_PEAKS):
        peak = lo + int(np.argmax(power[lo:]))
        height = float(power[peak])
        if height < bar:
            break
        power[max(peak - _reach(peak), 0) : peak + _reach(peak) + 1] = 0.0
        if _futile(futile, peak, df, height) or comb[peak] == 0.0:
            continue  # the node's background, or a known rate's line
        f, z = _combs(comb, peak, slowest)
        combs += [(zi, fi, peak) for zi, fi in zip(z.tolist(), f.tolist(), strict=True) if fi <= fastest]
    if not combs or (highest := max(c[0] for c in combs)) < COMB_Z:
        return None
    # Of the combs within TIED of the highest, the slowest fundamental's peak (a peak's candidates reach its
    # 48th subharmonic: a 23 Hz train's line at 1426 Hz, its 62nd, gave 46 Hz at best, whose fit held half the
    # train's periods, where its line at 161 Hz gave 23 Hz as high), fitted as the search fits a peak, from the
    # whole spectrum.
    _, _, peak = min((c for c in combs if c[0] >= highest - TIED * abs(highest)), key=lambda c: c[1])
    found = _best_harmonic(ev, whole, peak, lo, df, fits)
    return found if ev.accepts(found) else None


#: Peaks a last look (_comb_look) weighs, the strongest left.
COMB_PEAKS = 6
#: A last look's comb must stand this many standard deviations over white noise's: this VM's replays' background,
#: the known rates' lines taken out, stood under 75 at fundamentals under 625 Hz; a train of 0.05 % of a CPU at
#: 37 Hz at 170-240.
COMB_Z = 100.0
#: A last look's fundamentals have this many harmonics in the spectrum at least: a faster one's "comb" is a line or
#: two, as high as a single peak (2479 Hz: z 73 from its one line on this VM's replay).
COMB_LINES = 8


def _refined(power: NDArray[np.float64], f: float) -> float:
    """The fundamental f (in bins) to a fraction of a bin: the least squares of the places of its harmonics'
    lines (m f), weighed by their power, over the first 2, 4, 8, ... harmonics, each stage looking for the
    lines where the last put them. A bin is too coarse a period: a 100 Hz train fitted at its bin in a 4 s
    run (99.93 Hz) drifted 3 ms and gave each 50-period window a phase of its own, a slightly wrong period
    whose members held one stray gap."""
    hi = len(power) - 1
    top = 1
    while 2 * top <= HARMONICS and 2 * top * f + 2 <= hi:
        top *= 2
        m = np.arange(1, top + 1, dtype=np.float64)
        at = np.rint(m * f).astype(np.int64)
        near = power[at[:, None] + np.array([-1, 0, 1])]
        line = at + near.argmax(axis=1) - 1
        weight = near.max(axis=1)
        seen = weight >= HARMONIC_SEEN
        if not seen.any():
            break
        m, line, weight = m[seen], line[seen], weight[seen]
        f = float((weight * m * line).sum() / (weight * m * m).sum())
    return f


def _best_harmonic(
    ev: _Events, power: NDArray[np.float64], peak: int, lo: int, df: float, fits: _Fits
) -> tuple[PeriodicSource, NDArray[np.intp]] | None:
    """A spectral peak may be a harmonic of the source: fit the HARMONIC_FITS likeliest fundamentals
    (_fundamentals), and keep the one that explains most, members x coverage. (The fundamental lines up every
    event at full coverage; a harmonic halves the coverage; a subharmonic halves the members.) The choice is made
    on the run's first stretch (_sample) that holds SAMPLE_PERIODS periods of the slower candidate, and only the
    winner is fitted over the whole run."""
    candidates = _fundamentals(power, peak, lo)[:HARMONIC_FITS]
    sample = _sample(ev, float(candidates.min()) * df)
    n = len(sample.live()[0])
    tried: list[tuple[float, tuple[PeriodicSource, NDArray[np.intp]]]] = []
    for f in candidates.tolist():
        f = _refined(power, f)
        index = round(f)
        if (index, n) not in fits:  # else fitted for an earlier peak: peaks share their fundamentals
            if sample.span_ns * f * df / 1e9 < ev.min_events:
                continue  # fewer periods in the sample than a source needs
            fits[index, n] = _source(sample, 1e9 / (f * df))
        if candidate := fits[index, n]:
            tried.append((1e9 / (f * df), candidate))
    if not tried:
        return None
    best_period, best = _faster(sample, *max(tried, key=lambda t: _score(t[1][0])))
    best_period, best = _unmerge(sample, best_period, best)
    if sample is ev:
        return best
    return _source(ev, best_period)


def _faster(
    ev: _Events, period: float, best: tuple[PeriodicSource, NDArray[np.intp]]
) -> tuple[float, tuple[PeriodicSource, NDArray[np.intp]]]:
    """A full train may be every 2nd or 3rd period of a faster one (a fit takes one gap a period, the closest):
    the train at 2 or 3 times its rate, when it explains more (members x coverage), and so on. The sums of
    harmonics can rank a common divisor of two sources' rates over either: the GPU node's 1 kHz timer beside
    its 250 Hz tick stood first at 500 Hz on a scout of its 384-CPU replay, every other gap of the timer,
    where a search of every subharmonic had fitted the 1 kHz too."""
    while best[0].coverage >= FULL_COVERAGE:
        faster = [(period / k, f) for k in (2, 3) if 1e9 * k / period <= MAX_FREQ_HZ
                  if (f := _source(ev, period / k)) is not None]  # fmt: skip
        top = max(faster, key=lambda t: _score(t[1][0]), default=None)
        if top is None or _score(top[1][0]) <= _score(best[0]):
            break
        period, best = top
    return period, best


def _hinted(ev: _Events, period: float) -> tuple[PeriodicSource, NDArray[np.intp]] | None:
    """The source at a hint's period, unless it is every k-th gap of a faster
    source here: a train at k times the rate (k up to MAX_MERGED) that holds
    most of its members, k times as many in all, and gaps alike in length
    throughout, is that source. Seen: the node's 50 Hz hint took every other
    gap of one CPU's 100 Hz x 200 µs train, which was then told as two
    sources, "50 Hz" and "100 Hz", each of half its gaps. Two sources of the
    hint's rate in step (a tick and a host's timer half a period apart) part
    by length, and stay the hint's (as in _unmerge)."""
    hinted = _source(ev, period, refined=True)
    if hinted is None or not ev.accepts(hinted):
        return hinted
    members = hinted[1]
    left, times, _ = ev.live()  # in time order (periodic_members sees to it)
    m50 = hinted[0].median_duration_ns  # the hinted train's typical length
    tol = _tolerance(ev, hinted[0].period_ns)
    at = ev.starts[members]
    for k in range(MAX_MERGED, 1, -1):  # the fastest first: a 100 Hz train is also every other of a 200 Hz one's
        # First, without a fit: a gap near a k-th of the period after most members, alike in length to them
        # (one searchsorted; without it, this VM's two 100 Hz trains, of 29 and 3 µs, cost each CPU of its 64-CPU
        # replay a fit more: 39 ms a CPU where it is 32).
        after = at + hinted[0].period_ns / k
        # Every step-th member first: a fraction well under 0.8 there (by PREFILTER_MARGIN, some 4.5 standard
        # errors of PREFILTER members) will not reach it over all. The searches of all 7,500 members of a 250 Hz
        # train among 70,000 gaps were a sixth of a GPU-node CPU's analysis past the scouts, nearly all in vain.
        step = max(len(after) // PREFILTER, 1)
        if step > 1 and len(_near(times, after[::step], tol)) < (0.8 - PREFILTER_MARGIN) * len(after[::step]):
            continue
        near = _near(times, after, tol)
        if len(near) < 0.8 * len(members):
            continue
        n50 = float(np.median(ev.durations[left[near]]))
        if max(n50, m50) >= UNMERGE_FACTOR * min(n50, m50):
            continue
        faster = _source(ev, hinted[0].period_ns / k, refined=True)
        if faster is None or not ev.accepts(faster):
            continue
        idx = faster[1]
        shared, others = _overlap(idx, members, len(ev.starts))
        if shared < 0.8 * len(members) or len(idx) < 0.8 * k * len(members):
            continue
        o50 = float(np.median(ev.durations[others]))
        if max(m50, o50) < UNMERGE_FACTOR * min(m50, o50):
            return faster
    return hinted


def _overlap(a: NDArray[np.intp], b: NDArray[np.intp], size: int) -> tuple[int, NDArray[np.intp]]:
    """How many of the event indices `a` are also in `b`, and those of `a` that
    are not, in a's order (np.isin's count and np.setdiff1d's, for the sorted,
    distinct indices of `size` events a source's members are): by a mask of the
    events, where numpy's set operations hash or sort both (1 ms a call on a
    CPU of the GPU node's 16-CPU replay, 75,000 gaps: 55 ms of its first wave's
    two scouts, 480 ms, under cProfile)."""
    mask = np.zeros(size, dtype=bool)
    mask[b] = True
    inside = mask[a]
    return int(inside.sum()), a[~inside]


def _near(times: NDArray[np.float64], at: NDArray[np.float64], tol: float) -> NDArray[np.intp]:
    """For each moment in `at` (in time order), the closest of `times` (sorted) if within tol of it."""
    right = np.clip(np.searchsorted(times, at), 0, len(times) - 1)
    left = np.clip(right - 1, 0, len(times) - 1)
    closest = np.where(np.abs(times[right] - at) < np.abs(times[left] - at), right, left)
    found: NDArray[np.intp] = closest[np.abs(times[closest] - at) <= tol]
    return found


def _unmerge(
    ev: _Events, period: float, best: tuple[PeriodicSource, NDArray[np.intp]]
) -> tuple[float, tuple[PeriodicSource, NDArray[np.intp]]]:
    """Sources of one period out of phase by a fraction of it line up as one
    source at a multiple of its frequency: on this VM a 100 Hz timer and the
    host's own 100 Hz source 5 ms apart make a full "200 Hz" train that
    outscores either. One source's events are alike, so when the train at
    2, 3 or 4 (k) times the period holds its share of the winner's events
    (k-th) and their lengths part from the rest of the winner's
    (interquartile ranges apart), that train is the source; the other events
    are left for the next search."""
    members = best[1]
    split: list[tuple[float, tuple[PeriodicSource, NDArray[np.intp]]]] = []
    for k in range(2, MAX_MERGED + 1):
        if 1e9 / (k * period) < MIN_FREQ_HZ:
            break
        sub = _source(ev, k * period)
        if sub is None or not ev.accepts(sub):
            continue
        idx = sub[1]
        shared, rest = _overlap(members, idx, len(ev.starts))
        # Its share of the winner's events: its own tolerance, k times wider,
        # also takes events the winner's missed.
        if shared < 0.8 * len(members) / k or len(rest) < ev.min_events:
            continue
        m25, m50, m75 = np.percentile(ev.durations[idx], [25, 50, 75])
        o25, o50, o75 = np.percentile(ev.durations[rest], [25, 50, 75])
        # Apart, and by a factor: a timer whose every other gap also holds a
        # tick is one source whose lengths differ by the tick's (285 against
        # 332 µs here), where two sources differ severalfold (270 against 50).
        if (m25 > o75 or m75 < o25) and max(m50, o50) >= UNMERGE_FACTOR * min(m50, o50):
            split.append((k * period, sub))
    if not split:
        return period, best
    return max(split, key=lambda t: _score(t[1][0]))


def _score(source: PeriodicSource) -> float:
    return source.events * min(source.coverage, 1.0)


def _tolerance(ev: _Events, period: float) -> float:
    """How far from its line a train's member may lie: 2 % of the period, and at least two spectrum bins."""
    return max(2 * ev.bin_ns, 0.02 * period)


def _source(ev: _Events, period: float, refined: bool = False) -> tuple[PeriodicSource, NDArray[np.intp]] | None:
    """The source of this period among the remaining events, if one is there (`refined`: see _fit)."""
    tol = _tolerance(ev, period)
    left, starts, _ = ev.live()
    members, period, center, jitter = _fit(starts, ev.strength(), period, tol, ev.span_ns, refined)
    idx = left[members]
    lengths = ev.durations[idx]
    typical = 0.0  # the members' median length, taken again only where the filter drops some (30,000: 0.3 ms)
    if len(idx):
        # A gap many times this source's typical one is another source's that
        # began on this one's moment (a 10 ms timer every other tick, a host
        # stall during a tick): the longer part is not this source's, and the
        # gap is left for the next search.
        typical = float(np.median(lengths))
        keep = lengths <= MERGED_FACTOR * typical
        if not keep.all():
            idx, lengths = idx[keep], lengths[keep]
            typical = float(np.median(lengths)) if len(idx) else 0.0
    # Periods whose moment falls inside the span, counted from the phase: a
    # train starting near 0 fits one more than span // period.
    expected = int((ev.span_ns - center % period) // period) + 1
    # Chance alignments: random events at rate r put one within about
    # 1/(2r) of any grid point, and evenly across the window (std
    # tol/sqrt(3)); a real source sits far tighter on its line than either.
    # Or it fills far more of its periods than chance would (a fraction
    # 1 - exp(-2 r tol) of them), when the host makes even the tick sloppy
    # (seen: 25 µs of jitter in a full 250 Hz train at 1,600 events/s).
    rate = len(left) / ev.span_ns
    chance = min(tol, 1 / (2 * rate)) if rate else tol
    if not len(idx) or not expected:
        return None
    by_chance = 1 - np.exp(-2 * rate * tol)
    spread = np.sqrt(expected * by_chance * (1 - by_chance))  # binomial
    tight = jitter <= chance / 4
    full = (
        len(idx) >= max(expected * (1 + by_chance) / 2, expected * by_chance + 5 * spread)
        and jitter <= 0.75 * tol / np.sqrt(3)  # and not spread evenly over the window
        # Where chance fills every period (a slow train's window holds many events: at 0.67 Hz and 1,200
        # events/s, 72 on average), a full train says nothing, and the binomial's spread is 0. Seen: a fresh
        # 30 s run here gave "0.67 Hz, 21 of 20 periods" of 2 µs gaps, 2.9 ms of jitter; its 64-CPU replay's
        # scouts each gave one or two such trains at 0.4-0.7 Hz, which every other CPU then tried as hints.
        and expected * (1 - by_chance) >= 1
    )
    if not (tight or full):
        return None
    source = PeriodicSource(
        frequency_hz=1e9 / period,
        period_ns=period,
        events=len(idx),
        expected=expected,
        jitter_ns=jitter,
        median_duration_ns=typical,
        lost_ns=float(lengths.sum()),
    )
    return source, idx


def periodic_members(
    starts_ns: NDArray[np.float64] | list[float],
    durations_ns: NDArray[np.float64] | list[float],
    span_ns: float,
    *,
    max_sources: int = 4,
    min_events: int = 10,
    min_coverage: float = 0.5,
    threshold: float = 25.0,
    light_threshold: float | None = None,
    hints_hz: tuple[float, ...] = (),
    rates_hz: tuple[float, ...] = (),
    known_hz: tuple[float, ...] = (),
    failed: tuple[list[Tried], list[Tried]] | None = None,
    futile: tuple[tuple[Tried, ...], tuple[Tried, ...]] = ((), ()),
    candidates: int = MAX_CANDIDATES,
    searches: int = MAX_CANDIDATES,
    look: float | None = None,
) -> list[tuple[PeriodicSource, NDArray[np.intp]]]:
    """Periodic sources among events, strongest first, each with the
    indices of its member events in the arrays given. A source must line up
    at least min_events events covering min_coverage of its periods.
    hints_hz are frequencies the evidence predicts (the tick at CONFIG_HZ):
    each is tested directly first, as a matched filter, since a source can
    hide in a spectrum dominated by long random gaps. rates_hz (the rates
    other CPUs' sources run at, as fitted there: see _fit's `refined`) are tried
    next in the same way, save that a
    train that is every k-th gap of a faster one alike in length here is
    taken as that faster one (_hinted): the tick at CONFIG_HZ is not so
    checked, as a guest's tick can fall on every 4th period of its host's
    1 kHz timer, gaps alike (the GPU node's CPU 4). known_hz are rates a
    full search elsewhere settled (other CPUs of the node: as many trains at
    each as it found are among the hints): the spectral search after the
    hints passes over their harmonics, where what the hints left of their
    trains (members jittered past the tolerance) stands as peaks that cost
    some twenty fits each and line up nothing new (on the GPU node's CPU 4,
    the 1 kHz train's 1-4 kHz at 38-48, above the threshold of 25).
    `failed`: every spectral peak the search tried in vain, (power, Hz), is
    added to it, to its second list when the events were weighed by the
    square root of their length (see _next_source, whose bar there is
    light_threshold): analyze's scouts, what of the node's spectrum holds no
    source. `futile`: such peaks of other CPUs, in the same two kinds; a
    peak here at one of their frequencies, under FUTILE_FACTOR times as
    high, is passed over as that background. Each search after the hints
    tries `candidates` spectral peaks at most, `searches` of them through
    their fundamentals. `look`: where the thresholds are the node's floor,
    the search's own, from which a last look weighs the peaks under the
    floor by their combs (_comb_look)."""
    starts = np.asarray(starts_ns, dtype=np.float64)
    durations = np.asarray(durations_ns, dtype=np.float64)
    if starts.shape != durations.shape:
        raise ValueError("starts and durations differ in length")
    if span_ns <= 0:
        raise ValueError("span must be positive")
    inside = (starts >= 0) & (starts < span_ns)  # events outside the span are not this run's
    where = np.flatnonzero(inside)  # back to the caller's indices
    if len(where) > 1 and np.any(np.diff(starts[where]) < 0):  # in time order, as _members needs
        where = where[np.argsort(starts[where], kind="stable")]
    ev = _Events(starts[where], durations[where], span_ns, max(MIN_BIN_NS, span_ns / MAX_BINS),
                 np.ones(len(where), dtype=bool), min_events, min_coverage,
                 _cap(durations[where], min_events))  # fmt: skip
    found: list[PeriodicSource] = []
    taken: list[NDArray[np.intp]] = []
    for hz, checked in [(hz, False) for hz in hints_hz] + [(hz, True) for hz in rates_hz]:
        if ev.enough_left:
            ev.take(_hinted(ev, 1e9 / hz) if checked else _source(ev, 1e9 / hz), found, taken)
    while len(found) < max_sources and ev.enough_left:
        coarse = bool(known_hz) or span_ns / ev.bin_ns > COARSE_FROM_BINS
        source = _next_source(ev, threshold, known_hz, failed, light_threshold, coarse=coarse, futile=futile,
                              candidates=candidates, searches=searches, look=look)  # fmt: skip
        if source is None:
            break
        ev.take(source, found, taken)
    return [(f, where[idx]) for f, idx in zip(found, taken, strict=True)]


def find_periodic(
    starts_ns: NDArray[np.float64] | list[float],
    durations_ns: NDArray[np.float64] | list[float],
    span_ns: float,
    **options: Any,
) -> list[PeriodicSource]:
    """Periodic sources among events, strongest first (periodic_members,
    without the members); the same options."""
    return [source for source, _ in periodic_members(starts_ns, durations_ns, span_ns, **options)]
