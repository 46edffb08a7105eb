"""Analysis of one noise run, per CPU: event percentiles, periodic sources
(named where the evidence allows), and counter attribution that uses the
costs the run measured itself."""

from __future__ import annotations

from typing import Any

from quietcore.attribution.counters import CounterSnapshot, attribute
from quietcore.stats.percentiles import duration_summary
from quietcore.stats.periodicity import PeriodicSource, find_periodic, name_source

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
    cpu: dict[str, Any],
    before: CounterSnapshot,
    after: CounterSnapshot,
    *,
    config_hz: int | None,
    virtualized: bool,
    user_hz: int,
) -> dict[str, Any]:
    events = [(float(s), float(d)) for s, d in cpu["events"]]
    span = cpu["start_ns"] + cpu["measured_ns"]
    hints = (float(config_hz),) if config_hz else ()
    sources = find_periodic([s for s, _ in events], [d for _, d in events], span, hints_hz=hints) if events else []
    named = [(s, name_source(s, config_hz)) for s in sources]
    loc = after.interrupts.get("LOC", {}).get(cpu["cpu"], 0) - before.interrupts.get("LOC", {}).get(cpu["cpu"], 0)
    attribution = attribute(
        int(cpu["cpu"]),
        before,
        after,
        lost_ns=float(cpu["lost_ns"]),
        events=events,
        involuntary=int(cpu["ctxsw"]["involuntary"]),
        user_hz=user_hz,
        measured_costs=_measured_costs(sources, loc),
        virtualized=virtualized,
    )
    return {
        "cpu": cpu["cpu"],
        "event_ns": duration_summary([d for _, d in events]),
        "periodic": [_periodic_json(s, n, float(cpu["lost_ns"])) for s, n in named],
        "attribution": attribution.to_json(),
    }


def analyze(
    result: dict[str, Any],
    before: CounterSnapshot,
    after: CounterSnapshot,
    *,
    config_hz: int | None,
    virtualized: bool,
    user_hz: int,
) -> dict[str, Any]:
    """The summary stored with a spin-mode noise run."""
    cpus = [
        analyze_cpu(c, before, after, config_hz=config_hz, virtualized=virtualized, user_hz=user_hz)
        for c in result["cpus"]
    ]
    return {"cpus": cpus}
