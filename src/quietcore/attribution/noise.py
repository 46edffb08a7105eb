"""Analysis of one noise run, per CPU: event percentiles, periodic sources
(named where the evidence allows), and counter attribution that uses the
costs the run measured itself."""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from quietcore.attribution.counters import CounterSnapshot, attribute, window_ns
from quietcore.attribution.naming import Rates, name_source
from quietcore.runs.analysis import same_frequency
from quietcore.runs.trace import CpuTrace, NoiseTrace
from quietcore.stats.percentiles import duration_summary
from quietcore.stats.periodicity import PeriodicSource, find_periodic

#: Softirqs the tick raises and runs in the same gap, at irq exit.
TICK_SOFTIRQS = ("TIMER", "SCHED", "RCU")


def _periodic_json(source: PeriodicSource, name: str | None, lost_ns: float) -> dict[str, Any]:
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
        "name": name,
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


def analyze_cpu(
    trace: CpuTrace,
    before: CounterSnapshot,
    after: CounterSnapshot,
    *,
    config_hz: int | None,
    virtualized: bool,
    user_hz: int,
    shared_hz: tuple[float, ...] = (),
) -> dict[str, Any]:
    """One CPU's analysis. `shared_hz`: rates the node's other CPUs' sources run
    at, tried first after the tick's (see analyze)."""
    hints: tuple[float, ...] = (float(config_hz),) if config_hz else ()
    shared = list(shared_hz)
    for h in hints:  # the tick's rate is tried already: once less among the shared
        k = next((i for i, f in enumerate(shared) if same_frequency(f, h)), None)
        if k is not None:
            del shared[k]
    hints += tuple(shared)
    sources = (
        find_periodic(trace.start_ns, trace.duration_ns, trace.span_end_ns, hints_hz=hints) if trace.events else []
    )
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
    named = [(s, name_source(s, config_hz, rates, virtualized) if counted else None) for s in sources]
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
    return {
        "cpu": trace.cpu,
        "event_ns": duration_summary(trace.duration_ns.tolist()),
        "periodic": [_periodic_json(s, n, trace.lost_ns) for s, n in named],
        "attribution": attribution.to_json(),
    }


def analyze(
    trace: NoiseTrace,
    before: CounterSnapshot,
    after: CounterSnapshot,
    *,
    config_hz: int | None,
    virtualized: bool,
    user_hz: int,
    on_cpu: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """The summary stored with a spin-mode noise run; on_cpu(number) as each
    CPU's analysis starts (or, spread over processes, ends), for a progress
    bar. Above SCOUTS CPUs, SCOUTS of them are searched first and the rates of
    their sources tried first on the others. The CPUs' analyses are spread over
    the CPUs here (_spread), as the measurement is over and the node's CPUs are
    free; the result is the same, in the same order."""
    options = (before, after, config_hz, virtualized, user_hz)
    if len(trace.cpus) <= SCOUTS:
        return {"cpus": _spread(trace, list(range(len(trace.cpus))), options, (), on_cpu)}
    # Scouts first, spread over the CPU list, searched in full; the rates their sources run at are then
    # tried first on every other CPU, as the tick's is: a matched filter of one fit where the spectral
    # search tried some twenty (the node's CPUs share most of their sources: the tick, the host's timer).
    n = len(trace.cpus)
    scouts = sorted({round(i * (n - 1) / (SCOUTS - 1)) for i in range(SCOUTS)})
    done = dict(zip(scouts, _spread(trace, scouts, options, (), on_cpu), strict=True))
    shared = _shared_rates([done[k] for k in scouts])
    rest = [k for k in range(n) if k not in done]
    done.update(zip(rest, _spread(trace, rest, options, shared, on_cpu), strict=True))
    return {"cpus": [done[k] for k in range(n)]}


#: CPUs searched in full before the rest are searched with their sources' rates as hints.
SCOUTS = 8


def _shared_rates(scouted: list[dict[str, Any]]) -> tuple[float, ...]:
    """The scouts' sources' rates, the most widely found first, each as many times as
    most of the scouts that have it do (a VM's tick and its host's timer at the tick's
    rate are two trains at 250 Hz on every CPU of the GPU node)."""
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
    order = sorted(range(len(rates)), key=lambda k: -len(counts[k]))
    return tuple(rates[k] for k in order for _ in range(sorted(counts[k])[(len(counts[k]) - 1) // 2]))


_Options = tuple[CounterSnapshot, CounterSnapshot, int | None, bool, int]


def _spread(trace: NoiseTrace, which: list[int], options: _Options, shared: tuple[float, ...],
            on_cpu: Callable[[int], None] | None) -> list[dict[str, Any]]:  # fmt: skip
    """The analyses of trace.cpus[k] for k in `which`, in that order: with
    PARALLEL_FROM CPUs or more and more than one CPU to run on, spread over a
    process each CPU here (forked, so the trace is shared, not copied)."""
    before, after, config_hz, virtualized, user_hz = options
    workers = min(len(os.sched_getaffinity(0)), len(which))
    if len(which) < PARALLEL_FROM or workers < 2 or "fork" not in mp.get_all_start_methods():
        out = []
        for k in which:
            if on_cpu:
                on_cpu(trace.cpus[k].cpu)
            out.append(analyze_cpu(trace.cpus[k], before, after, config_hz=config_hz, virtualized=virtualized,
                                   user_hz=user_hz, shared_hz=shared))  # fmt: skip
        return out
    global _SHARED
    _SHARED = (trace, before, after, config_hz, virtualized, user_hz, shared)
    try:
        with ProcessPoolExecutor(workers, mp_context=mp.get_context("fork")) as pool:
            futures = [pool.submit(_analyze_nth, k) for k in which]
            done = []
            for k, future in zip(which, futures, strict=True):
                done.append(future.result())
                if on_cpu:
                    on_cpu(trace.cpus[k].cpu)
        return done
    finally:
        _SHARED = None


#: Spread a run's analysis over processes from this many CPUs on (fewer are done before a pool starts).
PARALLEL_FROM = 8
#: What a forked worker reads: the trace and its counters, set by analyze before the pool forks.
_SHARED: tuple[NoiseTrace, CounterSnapshot, CounterSnapshot, int | None, bool, int, tuple[float, ...]] | None = None


def _analyze_nth(k: int) -> dict[str, Any]:
    assert _SHARED is not None
    trace, before, after, config_hz, virtualized, user_hz, shared = _SHARED
    return analyze_cpu(trace.cpus[k], before, after, config_hz=config_hz, virtualized=virtualized, user_hz=user_hz,
                       shared_hz=shared)  # fmt: skip
