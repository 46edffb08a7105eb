"""Analysis of one noise run, per CPU: event percentiles, periodic sources
(named where the evidence allows), and counter attribution that uses the
costs the run measured itself."""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import statistics
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from quietcore.attribution.counters import CounterSnapshot, attribute, window_ns
from quietcore.attribution.naming import Rates, name_source, second_at_tick
from quietcore.runs.analysis import EVENT, OUTSIDE, TICK, Named, named_of, same_frequency
from quietcore.runs.trace import CpuTrace, NoiseTrace
from quietcore.stats.percentiles import duration_summary
from quietcore.stats.periodicity import MAX_CANDIDATES, PeriodicSource, Tried, periodic_members

#: Softirqs the tick raises and runs in the same gap, at irq exit.
TICK_SOFTIRQS = ("TIMER", "SCHED", "RCU")


def _periodic_json(source: PeriodicSource, named: Named | None, lost_ns: float) -> dict[str, Any]:
    return {
        "frequency_hz": source.frequency_hz,
        "period_ns": source.period_ns,
        "events": source.events,
        "expected": source.expected,
        "coverage": source.coverage,
        "jitter_ns": source.jitter_ns,
        "median_duration_ns": source.median_duration_ns,
        "lost_ns": source.lost_ns,
        "share_of_lost": source.lost_ns / lost_ns if lost_ns else None,
        "name": named.label if named is not None else None,
        "named": named.to_json() if named is not None else None,
    }


def _measured_costs(sources: list[PeriodicSource], loc_count: int) -> dict[str, tuple[float, str]]:
    """LOC's cost from the gaps of the periodic source that matches it in
    number (the tick), when one does."""
    tick = next((s for s in sources if loc_count and abs(s.events - loc_count) <= 0.2 * loc_count), None)
    if tick is None:
        return {}
    basis = f"measured: median of {tick.events} periodic gaps at {tick.frequency_hz:,.0f} Hz"
    costs = {"LOC": (tick.median_duration_ns, basis)}
    for name in TICK_SOFTIRQS:
        costs[name] = (0.0, "inside the tick's measured gaps")
    return costs


#: A periodic source is named by the traced event that led this share of its gaps, or as untraced (the
#: host's, on a VM) when no traced event touched this share of them.
TRACED_SHARE, UNTRACED_SHARE = 0.5, 0.8


def _traced_name(source: PeriodicSource, members: Any, leaders: list[str | None], config_hz: int | None,
                 virtualized: bool) -> Named | None:  # fmt: skip
    """What a source's gaps held, and in how many (the tick: local_timer in 2,489 of its
    2,500 gaps); None where the trace cannot say."""
    held = [leaders[i] for i in members.tolist() if i < len(leaders)]
    if not held:
        return None
    counts = Counter(h for h in held if h is not None)
    untraced = len(held) - sum(counts.values())
    if counts:
        top, n = counts.most_common(1)[0]
        if n >= TRACED_SHARE * len(held):
            if top == "local_timer" and config_hz and same_frequency(source.frequency_hz, config_hz):
                return Named(TICK, "the tick", "trace", top, n, len(held), config_hz=config_hz)
            return Named(EVENT, top, "trace", top, n, len(held))
    if untraced >= UNTRACED_SHARE * len(held):
        label = "the host" if virtualized else "firmware or SMIs"
        return Named(OUTSIDE, label, "trace", None, untraced, len(held), why="untraced", host=virtualized)
    return None


def traced_names(analysis: dict[str, Any], stored: Mapping[str, Any]) -> None:
    """Names a run's trace gave its periodic sources, kept when it is analysed
    again (`results analyse`: the trace's text is not stored, its names are):
    each source of the new analysis takes the traced name of a stored source at
    its rate, each name once, the closest lengths paired first (this VM's two
    100 Hz trains, of 15 and 2 µs: taken in order, the first could take the
    second's name and leave itself the counters')."""
    kept = {int(c["cpu"]): [p for p in c.get("periodic") or () if _from_trace(p)]
            for c in stored.get("cpus") or ()}  # fmt: skip
    for cpu in analysis.get("cpus") or ():
        new = cpu.get("periodic") or []
        old = kept.get(int(cpu["cpu"]), [])
        pairs = sorted(((abs(math.log(max(float(p["median_duration_ns"]), 1e-9) /
                                      max(float(o["median_duration_ns"]), 1e-9))), i, j)
                        for i, p in enumerate(new) for j, o in enumerate(old)
                        if same_frequency(float(p["frequency_hz"]), float(o["frequency_hz"]))))  # fmt: skip
        named, used = set(), set()
        for _, i, j in pairs:
            if i not in named and j not in used:
                was = named_of(old[j])
                assert was is not None  # _from_trace
                new[i]["name"], new[i]["named"] = was.label, {**was.to_json(), "train": 1}
                named.add(i)
                used.add(j)
        distinct(new)


def distinct(periodic: list[dict[str, Any]]) -> None:
    """Never one source twice on a CPU: two untraced trains at 100 Hz here (20 and
    2 µs each) are two sources, the later one the second train of its kind at that
    rate. (The host's 1 kHz timer and its train at the tick's rate are each the
    first at theirs.)"""
    seen: list[tuple[tuple[str, str], float]] = []
    for p in periodic:
        named = named_of(p)
        if named is None:
            continue
        hz = float(p.get("frequency_hz") or 0.0)
        train = 1 + sum(key == named.key and same_frequency(hz, f) for key, f in seen)
        seen.append((named.key, hz))
        p["named"] = {**named.to_json(), "train": train}


def _from_trace(p: Mapping[str, Any]) -> bool:
    """A stored source the trace named (_traced_name)."""
    named = named_of(p)
    return named is not None and named.by == "trace"


def analyze_cpu(
    trace: CpuTrace,
    before: CounterSnapshot,
    after: CounterSnapshot,
    *,
    config_hz: int | None,
    virtualized: bool,
    user_hz: int,
    shared_hz: tuple[float, ...] = (),
    leaders: list[str | None] | None = None,
    floor: tuple[float, float] | None = None,
    futile: tuple[tuple[Tried, ...], tuple[Tried, ...]] = ((), ()),
    scout: bool = False,
    candidates: int = MAX_CANDIDATES,
    searches: int = MAX_CANDIDATES,
) -> dict[str, Any]:
    """One CPU's analysis. `shared_hz`: rates the node's other CPUs' sources run
    at, tried first after the tick's (see analyze). `leaders`: each gap's traced
    leader (tracer.match_and_lead), None where nothing traced touched it: a periodic
    source is named by what its gaps held first, the counters second."""
    hints: tuple[float, ...] = (float(config_hz),) if config_hz else ()
    shared = list(shared_hz)
    for h in hints:  # the tick's rate is tried already: once less among the shared
        k = next((i for i, f in enumerate(shared) if same_frequency(f, h)), None)
        if k is not None:
            del shared[k]
    failed: tuple[list[Tried], list[Tried]] = ([], [])
    found = (
        periodic_members(trace.start_ns, trace.duration_ns, trace.span_end_ns, hints_hz=hints, rates_hz=tuple(shared),
                         known_hz=tuple(dict.fromkeys(shared_hz)), failed=failed if scout else None, futile=futile,
                         candidates=candidates, searches=searches, threshold=max(THRESHOLD, floor[0] if floor else 0.0),
                         light_threshold=max(THRESHOLD, floor[1] if floor else 0.0), max_sources=MAX_SOURCES,
                         look=THRESHOLD if floor and LAST_LOOK else None) if trace.events else []
    )  # fmt: skip
    sources = [s for s, _ in found]
    loc = after.interrupts.get("LOC", {}).get(trace.cpu, 0) - before.interrupts.get("LOC", {}).get(trace.cpu, 0)
    window = window_ns(before, after) or trace.measured_ns
    rates = Rates.of(trace.cpu, before, after, window / 1e9)
    # LOC counted over the window, against the tick's periods over the measured time: the same span
    # (a 0.5 s check's 173 LOC over 0.63 s against 125 ticks missed the match, and the tick took a
    # typical 2 µs where its gaps measured 15 µs)
    loc_measured = round(loc * min(trace.measured_ns / window, 1.0)) if window else loc
    # No counter read at all (imported traces): nothing to name a source by, which is not "faster than any
    # interrupt counted"
    counted = bool(before.interrupts or after.interrupts)
    by_trace = [_traced_name(s, idx, leaders, config_hz, virtualized) if leaders else None for s, idx in found]
    named = [(s, t or (name_source(s, config_hz, rates, virtualized, trace.involuntary) if counted else None))
             for s, t in zip(sources, by_trace, strict=True)]  # fmt: skip
    # one tick a CPU: a second train named the tick is at its rate, not the tick (the strongest keeps the name)
    ticks = [k for k, (_, n) in enumerate(named) if n is not None and n.kind == TICK]
    for k in ticks[1:]:
        assert config_hz is not None  # the tick is named from CONFIG_HZ
        named[k] = (named[k][0], second_at_tick(config_hz, rates, virtualized))
    attribution = attribute(
        trace.cpu,
        before,
        after,
        lost_ns=trace.lost_ns,
        durations_ns=trace.duration_ns,
        involuntary=trace.involuntary,
        user_hz=user_hz,
        measured_costs=_measured_costs(sources, loc_measured),
        virtualized=virtualized,
        measured_ns=trace.measured_ns,
    )
    periodic = [_periodic_json(s, n, trace.lost_ns) for s, n in named]
    distinct(periodic)
    return {
        "cpu": trace.cpu,
        "event_ns": duration_summary(trace.duration_ns),
        "periodic": periodic,
        "attribution": attribution.to_json(),
    } | ({FAILED: failed} if scout else {})


def analyze(
    trace: NoiseTrace,
    before: CounterSnapshot,
    after: CounterSnapshot,
    *,
    config_hz: int | None,
    virtualized: bool,
    user_hz: int,
    on_cpu: Callable[[int], None] | None = None,
    leaders: Mapping[int, list[str | None]] | None = None,
) -> dict[str, Any]:
    """The summary stored with a spin-mode noise run (`leaders`: each CPU's gaps'
    traced leaders, where the run was traced); on_cpu(number) as each
    CPU's analysis starts (or, spread over processes, ends), for a progress
    bar. Above SCOUTS CPUs, SCOUTS of them are searched first and the rates of
    their sources tried first on the others. The CPUs' analyses are spread over
    the CPUs here (_Pool), as the measurement is over and the node's CPUs are
    free; the result is the same, in the same order."""
    options = (before, after, config_hz, virtualized, user_hz, leaders or {})
    with _Pool(trace, options) as pool:
        return _analyze(trace, pool, on_cpu)


def _analyze(trace: NoiseTrace, pool: _Pool, on_cpu: Callable[[int], None] | None) -> dict[str, Any]:
    """analyze's scouts, then the CPUs past them, in `pool`."""
    if len(trace.cpus) <= SCOUTS:
        return {"cpus": pool.spread(list(range(len(trace.cpus))), (), on_cpu)}
    # Scouts first, spread over the CPU list, searched in full; the rates their sources run at are then
    # tried first on every other CPU, as the tick's is: a matched filter of one fit where the spectral
    # search tried some twenty (the node's CPUs share most of their sources: the tick, the host's timer).
    n = len(trace.cpus)
    scouts = sorted({round(i * (n - 1) / (SCOUTS - 1)) for i in range(SCOUTS)})
    # In two waves: the first FIRST_SCOUTS search with no rate known; the others try theirs first, and search
    # the peaks past them above the threshold (no floor), as the first did, but fewer of them in vain
    # (SECOND_WAVE_CANDIDATES). What the shared trains leave at their harmonics is then one fit a peak, not a
    # subharmonic search: a scout of the second wave cost 85 ms of this VM's 64-CPU replay and 175 ms of the GPU
    # node's, one of the first 266 and 278 (bench/manycpu.py; 50 and 106 ms with fewer peaks tried in vain).
    first = scouts[:: max(len(scouts) // FIRST_SCOUTS, 1)][:FIRST_SCOUTS]
    done = dict(zip(first, pool.spread(first, (), on_cpu, scout=True), strict=True))
    known = _shared_rates([done[k] for k in first])
    later = [k for k in scouts if k not in done]
    # (the searches are limited only where the first wave found rates: where it found none, this wave searches as
    # blind as it did)
    searches = SECOND_WAVE_SEARCHES if known else SECOND_WAVE_CANDIDATES
    done.update(zip(later, pool.spread(later, known, on_cpu, scout=True, candidates=SECOND_WAVE_CANDIDATES,
                                       searches=searches), strict=True))  # fmt: skip
    shared = _shared_rates([done[k] for k in scouts])
    # The node's own spectral background: on each scout the strongest peak its search tried in vain (a host's
    # comb of beats at multiples of 31.25 Hz on the GPU node, 30-50 over 30 s against the threshold of 25), the
    # scouts' median (one odd CPU's leftovers, a planted 100 Hz train's at 250, would set it for all). The other
    # CPUs search only peaks above it; a source the scouts have is tried first as a hint, whatever its peak.
    # One bar for each kind of spectrum (periodicity._next_source weighs a heavy-tailed CPU's gaps by the square
    # root of their length, where peaks stand higher), over the scouts that searched one of that kind: a scout
    # that never did says nothing of its background (counted as 0, the GPU node's light bar fell to the
    # threshold, and its CPUs past the scouts tried some thirty peaks each in vain).
    failed = [done[k].pop(FAILED) for k in scouts]
    floor = _floors([max((p for p, _ in f[0]), default=None) for f in failed],
                    [max((p for p, _ in f[1]), default=None) for f in failed])  # fmt: skip
    # And each peak the scouts tried in vain: where the background stands past the floor on some CPUs (a
    # leftover harmonic of a template's own), a CPU past the scouts passes over its peak there.
    futile = (tuple(t for f in failed for t in f[0]), tuple(t for f in failed for t in f[1]))
    rest = [k for k in range(n) if k not in done]
    done.update(zip(rest, pool.spread(rest, shared, on_cpu, floor=floor, futile=futile), strict=True))
    return {"cpus": [done[k] for k in range(n)], "search_floor": floor[0], "search_floor_light": floor[1]}


def _floors(weighted: list[float | None], light: list[float | None]) -> tuple[float, float]:
    """The scouts' median strongest peak tried in vain, in each kind of spectrum, among the scouts that
    searched one of that kind; a kind no scout searched takes the other's (0 when neither was)."""
    kinds = [float(statistics.median(v)) if (v := [x for x in kind if x is not None]) else None
             for kind in (weighted, light)]  # fmt: skip
    a, b = kinds
    return (a if a is not None else b or 0.0), (b if b is not None else a or 0.0)


#: CPUs searched in full before the rest are searched with their sources' rates as hints.
SCOUTS = 8
#: A CPU past the scouts, its search stopped by the node's floor, weighs its peaks under it by their combs
#: (periodicity._comb_look).
LAST_LOOK = True
#: Periodic sources a CPU's search finds at most: this VM's CPUs have four of their own (the tick, the host's
#: two 100 Hz trains and a second at the tick's rate), and a fifth planted beside them was never searched for
#: (bench/recall.py).
MAX_SOURCES = 5
#: Scouts searched with no rate known; the other scouts take theirs as hints.
FIRST_SCOUTS = 2
#: Spectral peaks a scout of the second wave tries per source, where the first tries periodicity's
#: MAX_CANDIDATES (8). Its search after its last source is the eight strongest peaks left, each with its
#: subharmonics, in vain: two thirds of the wave's fits on the GPU node's 16-CPU replay (317 fits, 1.0 s, of
#: the run's 473 and 1.7 s). Five leave every CPU's sources and the search floors as they were on the 16-, 32-
#: and 64-CPU replays of both templates and the GPU node's eight sessions, at 209 fits; three or four lost a
#: CPU's second 250 Hz and 500 Hz trains in one of the GPU node's half-second sessions. The first wave still
#: tries eight: the node's rates, which every other CPU tries, come from it (with one scout in it, not two,
#: sources changed on 14 of the 16 CPUs of this VM's replay).
SECOND_WAVE_CANDIDATES = 5
#: Of those, the peaks searched through their fundamentals (a peak at a harmonic of a rate the first wave found is
#: one or two fits). Measured with the search of sixteen subharmonics that harmonic sums replaced: every source
#: a scout of the second wave found after a peak in vain, on the 16- and 64-CPU replays of three templates and the
#: GPU node's eight sessions, came after peaks at such harmonics, or after at most two searches (the GPU node's
#: half-second session 2: a fourth train at 500 Hz, after two); its search after its last source spent the rest,
#: in vain. Three keep every source and floor on all of them, byte for byte, at 0.94 of
#: the time of the GPU node's and the busy template's 16-CPU replays and 0.99 at 64 CPUs (bench/ab.py, 3 rounds);
#: one saved a fifth at 16, but lost that session's weaker 500 Hz trains on four CPUs. Where the first wave found
#: no rate, every peak is a search, and none of those runs says what three would lose: the limit is not applied.
SECOND_WAVE_SEARCHES = 3
#: The spectral search's threshold on a peak's power (periodicity's default): random events give about 1.
THRESHOLD = 25.0
#: A scout's result carries, until analyze takes it, the peaks its search tried in vain in each kind of spectrum
#: (periodicity.periodic_members' `failed`).
FAILED = "_failed_power"


def _shared_rates(scouted: list[dict[str, Any]]) -> tuple[float, ...]:
    """The scouts' sources' rates, the fastest first, each as many times as most of the
    scouts that have it do (a VM's tick and its host's timer at the tick's rate are two
    trains at 250 Hz on every CPU of the GPU node). They are tried as hints in this
    order, and a slower rate's fit can take every k-th gap of a faster train, never the
    other way: the GPU node's 1 kHz timer, where half its fires showed (the others fall
    in its two 250 Hz trains' gaps), lost one of its slots to each 250 Hz hint tried
    before it, and read as two more 250 Hz trains on some CPUs of each session; tried
    first, it is the 1 kHz train on every CPU, and the 250 Hz hints take the rest."""
    rates: list[float] = []
    counts: list[list[int]] = []  # per rate, its count on each scout that has it
    for cpu in scouted:
        mine: dict[int, int] = {}
        for p in cpu["periodic"]:
            f = float(p["frequency_hz"])
            k = next((i for i, g in enumerate(rates) if same_frequency(f, g)), None)
            if k is None:
                rates.append(f)
                counts.append([])
                k = len(rates) - 1
            mine[k] = mine.get(k, 0) + 1
        for k, n in mine.items():
            counts[k].append(n)
    order = sorted(range(len(rates)), key=lambda k: -rates[k])
    return tuple(rates[k] for k in order for _ in range(sorted(counts[k])[(len(counts[k]) - 1) // 2]))


_Futile = tuple[tuple[Tried, ...], tuple[Tried, ...]]
_Options = tuple[CounterSnapshot, CounterSnapshot, int | None, bool, int, Mapping[int, list[str | None]]]


class _Pool:
    """The CPUs' analyses, in turn or spread over a process each CPU here (no
    more than the run has CPUs): one pool for a run's every wave (scouts, then
    the rest), forked once a wave has PARALLEL_FROM CPUs (SCOUTS_PARALLEL_FROM
    for scouts), so the trace is shared, not copied, and each worker's heap is
    faulted in once, not once a wave."""

    def __init__(self, trace: NoiseTrace, options: _Options) -> None:
        self.trace, self.options = trace, options
        # as many as the largest wave can use: 16 CPUs measured on a node of 384 fork 16, not 384
        self.workers = min(len(os.sched_getaffinity(0)), len(trace.cpus))
        self.pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> _Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        global _SHARED
        if self.pool is not None:
            self.pool.shutdown()
            self.pool = None
        _SHARED = None

    def spread(self, which: list[int], shared: tuple[float, ...], on_cpu: Callable[[int], None] | None,
               floor: tuple[float, float] | None = None, scout: bool = False,
               futile: _Futile = ((), ()), candidates: int = MAX_CANDIDATES,
               searches: int = MAX_CANDIDATES) -> list[dict[str, Any]]:  # fmt: skip
        """The analyses of trace.cpus[k] for k in `which`, in that order."""
        global _SHARED
        wave = (shared, floor, futile, scout, candidates, searches)
        enough = len(which) >= (SCOUTS_PARALLEL_FROM if scout else PARALLEL_FROM)
        if self.pool is None and (not enough or self.workers < 2 or "fork" not in mp.get_all_start_methods()):
            out = []
            for k in which:
                if on_cpu:
                    on_cpu(self.trace.cpus[k].cpu)
                out.append(_analyze_one(self.trace, self.options, k, wave))
            return out
        if self.pool is None:
            _SHARED = (self.trace, self.options)
            self.pool = ProcessPoolExecutor(self.workers, mp_context=mp.get_context("fork"))
        futures = [self.pool.submit(_analyze_nth, k, wave) for k in which]
        done = []
        for k, future in zip(which, futures, strict=True):
            done.append(future.result())
            if on_cpu:
                on_cpu(self.trace.cpus[k].cpu)
        return done


#: Spread a run's analysis over processes from this many CPUs on (fewer are done before a pool starts).
PARALLEL_FROM = 8
#: The same for a wave of scouts: each takes a few hundred ms, where a pool starts in a few.
SCOUTS_PARALLEL_FROM = 2
_Wave = tuple[tuple[float, ...], tuple[float, float] | None, _Futile, bool, int, int]
#: What a forked worker reads: the trace and its counters, set before the pool forks (a wave's own
#: parameters come with each CPU's task: they are known only once the scouts are done).
_SHARED: tuple[NoiseTrace, _Options] | None = None


def _analyze_one(trace: NoiseTrace, options: _Options, k: int, wave: _Wave) -> dict[str, Any]:
    before, after, config_hz, virtualized, user_hz, leaders = options
    shared, floor, futile, scout, candidates, searches = wave
    return analyze_cpu(trace.cpus[k], before, after, config_hz=config_hz, virtualized=virtualized, user_hz=user_hz,
                       shared_hz=shared, leaders=leaders.get(trace.cpus[k].cpu), floor=floor, futile=futile,
                       scout=scout, candidates=candidates, searches=searches)  # fmt: skip


def _analyze_nth(k: int, wave: _Wave) -> dict[str, Any]:
    assert _SHARED is not None
    return _analyze_one(*_SHARED, k, wave)
