"""Naming a periodic source from what the node's own counters saw. A source
is called a guest interrupt (the tick, a device) only when that CPU counted
that interrupt at least that often; a source faster than every interrupt
the CPU counted cannot be one of them, and is named as coming from outside
the kernel's view: the host on a VM, firmware or SMIs on bare metal."""

from __future__ import annotations

from dataclasses import dataclass

from quietcore.attribution.busy import BUSY_SHARE, SLICE_NS
from quietcore.attribution.counters import CounterSnapshot
from quietcore.facts.cpulist import ordinal
from quietcore.runs.analysis import (
    AT_TICK_RATE,
    DEVICE,
    OPEN,
    OUTSIDE,
    SECOND,
    SLICES,
    TICK,
    TICK_MULTIPLE,
    TICK_TIMER,
    TURNS,
    Named,
    same_frequency,
)
from quietcore.stats.periodicity import PeriodicSource

TOLERANCE = 0.2  # rates from counters, against frequencies fitted to gaps
MIN_COUNT = 10  # a device matches a source's rate only on this many interrupts, as a source needs as many events


@dataclass(frozen=True)
class Rates:
    """Interrupts per second on one CPU over the measured span."""

    per_s: dict[str, float]  # row name (LOC, 45...) -> count per second
    names: dict[str, str]  # row name -> device or description
    span_s: float = 1.0

    @staticmethod
    def of(cpu: int, before: CounterSnapshot, after: CounterSnapshot, span_s: float) -> Rates:
        per_s = {}
        for name, counts in after.interrupts.items():
            delta = counts.get(cpu, 0) - before.interrupts.get(name, {}).get(cpu, 0)
            if delta > 0 and span_s > 0:
                per_s[name] = delta / span_s
        return Rates(per_s, after.names, span_s)

    def label(self, name: str) -> str:
        return f"{name} ({self.names[name]})" if self.names.get(name) else name

    def fastest(self) -> tuple[str, float] | None:
        return max(self.per_s.items(), key=lambda item: item[1], default=None)

    def saw(self, name: str, hz: float) -> bool:
        """The CPU counted `name` at least at `hz` (within the tolerance)."""
        return self.per_s.get(name, 0.0) >= hz * (1 - TOLERANCE)


def name_source(source: PeriodicSource, config_hz: int | None, rates: Rates, virtualized: bool,
                preempted: int = 0) -> Named:  # fmt: skip
    """What a periodic source is, where the counters allow saying it. `preempted`: the probe's
    involuntary context switches on the CPU over the same run."""
    f = source.frequency_hz
    # Gaps of a time slice, as many as the times the probe was preempted, and a co-runner's share of the CPU
    # (busy's): a task sharing the CPU, taking its turns at the tick (the GPU node's CPU 0 in a check: 250 Hz x
    # 4 ms, named the tick since LOC ran at 250/s, and 125 Hz "every 2nd tick" in the next run, where the account
    # gave "preempted by another task" 99 %). A task that takes less, 1 ms in 10, is noise, named as any source.
    spanned = source.expected * source.period_ns
    taken = source.events * source.median_duration_ns / spanned if spanned > 0 else 0.0
    loc = rates.per_s.get("LOC", 0.0)
    counted = {"by": "counters", "counter": "LOC", "rate": loc, "config_hz": config_hz}
    if source.median_duration_ns >= SLICE_NS and preempted >= source.events * (1 - TOLERANCE) and taken >= BUSY_SHARE:
        return Named(TURNS, SLICES, "counters", held=preempted)  # held: the probe's preemptions
    if config_hz and rates.saw("LOC", f):
        if same_frequency(f, config_hz):
            return Named.from_json({**counted, "kind": TICK, "label": "the tick"})
        if any(same_frequency(f, config_hz / k) for k in (2, 4)):
            nth = ordinal(round(config_hz / f))
            return Named.from_json({**counted, "kind": TICK_TIMER, "label": f"a timer on every {nth} tick"})
        if any(same_frequency(f, k * config_hz) for k in (2, 3, 4)):
            label = f"timers at {round(f / config_hz)}x the tick's rate"
            return Named.from_json({**counted, "kind": TICK_MULTIPLE, "label": label})
    matching = [n for n, hz in rates.per_s.items() if n.isdigit() and abs(hz - f) <= TOLERANCE * f]
    device = next((n for n in matching if rates.per_s[n] * rates.span_s >= MIN_COUNT), None)
    if device is not None:
        return Named(DEVICE, f"IRQ {rates.label(device)}", "counters", counter=f"IRQ {device}",
                     rate=rates.per_s[device])  # fmt: skip
    outside = {**counted, "kind": OUTSIDE, "label": "the host" if virtualized else "firmware or SMIs",
               "host": virtualized}  # fmt: skip
    fastest = rates.fastest()
    if fastest is None or fastest[1] < f * (1 - TOLERANCE):
        most = {"counter": rates.label(fastest[0]), "rate": fastest[1]} if fastest else {"counter": "", "rate": 0.0}
        return Named.from_json({**outside, **most, "why": "faster"})
    if same_frequency(f, 1.0):
        return Named.from_json({**counted, "kind": SECOND, "label": "a 1 s timer (vmstat and the like)"})
    # A guest timer at f would have added f/s to LOC beyond the tick, and an IPI or device as many to its row:
    # where no row has room for it, it is not the guest kernel's (this guest's 100 Hz train: LOC 259/s beside
    # a 250 Hz tick, nothing else near 100/s; it was left unnamed)
    room = _room(rates, config_hz)
    others = [n for n, hz in rates.per_s.items() if n != "LOC" and hz >= f * (1 - TOLERANCE)]
    if room < f * (1 - TOLERANCE) and not others:
        return Named.from_json({**outside, "why": "no-room"})
    # Named by what cannot be ruled out, and on what: a source of every rate gets a name and its basis
    could = [f"LOC's {room:,.0f}/s beyond the tick"] if room >= f * (1 - TOLERANCE) else []
    could += [f"{rates.label(n)} at {rates.per_s[n]:,.0f}/s" for n in others]
    return Named.from_json({**counted, "kind": OPEN, "label": "not named", "why": "could", "could": could})


def _room(rates: Rates, config_hz: int | None) -> float:
    """LOC's count a second beyond the tick's own (all of it when the tick did not run at its rate)."""
    loc = rates.per_s.get("LOC", 0.0)
    return loc - config_hz if config_hz and loc >= config_hz * (1 - TOLERANCE) else loc


def second_at_tick(config_hz: int, rates: Rates, virtualized: bool) -> Named:
    """A CPU has one tick: the second 250 Hz train on the GPU node's CPUs was named the
    tick too. It is at the tick's rate, not the tick; where LOC has no room for it (one
    interrupt a tick), not a guest timer either."""
    room = _room(rates, config_hz)
    counted = {"by": "counters", "counter": "LOC", "rate": rates.per_s.get("LOC", 0.0), "config_hz": config_hz}
    if room < config_hz * (1 - TOLERANCE):
        return Named.from_json({**counted, "kind": OUTSIDE, "label": "the host" if virtualized else "firmware or SMIs",
                                "why": "tick-rate", "host": virtualized})  # fmt: skip
    return Named.from_json({**counted, "kind": AT_TICK_RATE, "label": "a guest timer at the tick's rate"})
