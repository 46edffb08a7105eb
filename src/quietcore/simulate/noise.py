"""What the simulated ranks suffer: timelines of gaps, each gap labelled
with the source it came from, so that a source can be taken out (what the
job would gain without it) and the rest transformed.

Two inputs:
- a measured trace (`--trace SESSION[:CPU]`): every spin-mode noise run of
  a stored session (a `noise`, `lab` or `survey` session), one timeline per
  CPU, each the CPU's measured span with its gaps, repeating. Its sources
  are the periodic ones the analysis finds (named as the stored run named
  them), and the aperiodic gaps in two classes by length;
- a synthetic pattern (`--pattern FREQ_HZ:DURATION_US[,...]`): each source
  a gap of that length every period."""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from quietcore.errors import UsageError
from quietcore.runs.analysis import TICK, Periodic, same_frequency
from quietcore.simulate.engine import Timeline, union
from quietcore.store import sessions

LONG_NS = 100_000.0  # an aperiodic gap this long is a preemption (on a VM: the host's), as attribution says
MAX_PATTERN_SPAN_NS = 10e9  # a pattern's timeline repeats after the periods' common multiple, or this
PHASES = 8  # timelines of a several-source pattern, each with its own phases between the sources


@dataclass(frozen=True)
class Trace:
    """One timeline's gaps, each with the index of its source."""

    name: str
    starts: NDArray[np.float64]
    lengths: NDArray[np.float64]
    labels: NDArray[np.int64]
    period: float


@dataclass(frozen=True)
class Noise:
    traces: tuple[Trace, ...]
    sources: tuple[str, ...]
    described: str
    notes: tuple[str, ...] = ()
    #: the sources that are the kernel's tick, by index: what nohz_full takes away
    ticks: frozenset[int] = frozenset()

    def timelines(self, without: int | None = None, scale: float = 1.0) -> list[Timeline]:
        """The timelines the kernel replays: gaps of `without` taken out,
        the rest `scale` times as long, overlapping gaps made one."""
        out = []
        for t in self.traces:
            keep = t.labels != without if without is not None else np.ones(t.labels.size, dtype=bool)
            out.append(union(t.starts[keep], t.lengths[keep] * scale, t.period))
        return out

    def fraction(self) -> float:
        """The share of time lost to noise, over every timeline."""
        lost = sum(float(tl.lengths.sum()) for tl in self.timelines())
        return lost / sum(t.period for t in self.traces)

    def lost_by_source(self) -> list[float]:
        """Each source's share of the lost time."""
        total = sum(float(t.lengths.sum()) for t in self.traces) or 1.0
        return [sum(float(t.lengths[t.labels == i].sum()) for t in self.traces) / total
                for i in range(len(self.sources))]  # fmt: skip

    def scaled_ok(self, scale: float) -> bool:
        return all(tl.total < tl.period for tl in self.timelines(scale=scale))


def parse_pattern(text: str) -> list[tuple[float, float]]:
    """'250:17,100:200' -> [(250 Hz, 17 µs), (100 Hz, 200 µs)]."""
    out = []
    for item in text.split(","):
        freq, _, dur = item.partition(":")
        try:
            hz, us = float(freq), float(dur)
        except ValueError:
            hz = us = math.nan
        if not (0 < hz <= 1e6 and 0 < us <= 1e7):
            raise UsageError(f"invalid --pattern {text!r}: {item!r} (valid: FREQ_HZ:DURATION_US[,...], a frequency "
                             "of 0-1000000 Hz and a duration of 0-10000000 µs, both above 0)")  # fmt: skip
        if us * 1e3 >= 1e9 / hz:
            raise UsageError(f"invalid --pattern {text!r}: {item!r} lasts {us:g} µs, not less than its period "
                             f"({1e6 / hz:g} µs): the CPU would never run")  # fmt: skip
        out.append((hz, us))
    return out


def from_pattern(text: str, seed: int) -> Noise:
    """Each source a gap every period. The timeline repeats after the
    periods' least common multiple (in whole ns), up to 10 s. A pattern of
    several sources gets PHASES timelines, the sources at random phases to
    each other in each (real sources are not in step)."""
    pattern = parse_pattern(text)
    periods = [round(1e9 / hz) for hz, _ in pattern]
    span = float(min(math.lcm(*periods), MAX_PATTERN_SPAN_NS))
    rng = np.random.default_rng(seed)
    traces = []
    for k in range(PHASES if len(pattern) > 1 else 1):
        starts, lengths, labels = [], [], []
        for i, ((_, us), period) in enumerate(zip(pattern, periods, strict=True)):
            phase = rng.uniform(0, period) if k or i else 0.0
            s = np.arange(phase, span, period)
            starts.append(s)
            lengths.append(np.full(s.size, us * 1e3))
            labels.append(np.full(s.size, i, dtype=np.int64))
        traces.append(Trace(f"pattern, phases {k}", np.concatenate(starts), np.concatenate(lengths),
                            np.concatenate(labels), span))  # fmt: skip
    plain = [f"{hz:g} Hz x {us:g} µs" for hz, us in pattern]
    names = tuple(f"{n} (#{i + 1})" if plain.count(n) > 1 else n for i, n in enumerate(plain))
    noise = Noise(tuple(traces), names, f"pattern {text}")
    if not noise.scaled_ok(1.0):
        raise UsageError(f"invalid --pattern {text!r}: together its sources take the whole CPU")
    return noise


def parse_trace(text: str) -> tuple[str, int | None]:
    """'SESSION[:CPU]'."""
    session, _, cpu = text.partition(":")
    if not session or (cpu and not cpu.isdigit()):
        raise UsageError(f"invalid --trace {text!r} (valid: SESSION or SESSION:CPU, a session of `quietcore "
                         "noise`, `lab` or `survey`)")  # fmt: skip
    return session, int(cpu) if cpu else None


def from_session(conn: sqlite3.Connection, text: str) -> Noise:
    """Every spin-mode noise run of the session (or its CPU's trace)."""

    spec, cpu = parse_trace(text)
    row = sessions.find_session(conn, spec)
    facts = row.facts
    # an imported trace (`results import --from trace`) has no fact of its node: no tick to hint, no VM known
    hz = ((facts.get("kernel") or {}).get("config") or {}).get("CONFIG_HZ")
    hints = (float(hz),) if hz and str(hz).isdigit() else ()
    virtual = bool((facts.get("virtualization") or {}).get("virtualized"))
    labeller = _Labeller(virtual)
    traces, dropped, seen = [], 0, set()
    for run in sessions.runs_of(conn, row.id):
        trace = run.trace
        if trace is None:
            continue
        where = (run.params.get("survey") or {}).get("host")
        for c in trace.cpus:
            seen.add(c.cpu)
            if cpu is not None and c.cpu != cpu:
                continue
            stored = run.noise.of(c.cpu)
            name = f"run {run.seq}{f' ({where})' if where else ''} CPU {c.cpu}"
            traces.append(labeller.trace(name, c.start_ns - c.span_start_ns, c.duration_ns, c.measured_ns,
                                         stored.periodic if stored else (), hints))  # fmt: skip
            dropped += c.dropped
    valid = f"valid CPUs: {', '.join(map(str, sorted(seen)))}" if seen else "a session of `noise`, `lab` or `survey`"
    if not traces:
        what = f"no noise trace of CPU {cpu}" if seen else "no spin-mode noise run"
        raise UsageError(f"invalid --trace {text!r}: session {row.id} has {what} ({valid})")
    if not any(t.starts.size for t in traces):
        raise UsageError(f"invalid --trace {text!r}: session {row.id}'s noise trace is empty (no gap over its "
                         "threshold): nothing to simulate")  # fmt: skip
    notes = (f"{dropped:,} gaps over the probe's --max-events were counted but not recorded; the simulation replays "
             "the recorded ones",) if dropped else ()  # fmt: skip
    cpus = f"CPU {cpu}" if cpu is not None else f"{len(traces)} CPU trace{'s' * (len(traces) > 1)}"
    return Noise(tuple(traces), tuple(labeller.names), f"session {row.id} ({row.command}), {cpus}", notes,
                 frozenset(labeller.ticks))  # fmt: skip


class _Labeller:
    """Gives each gap of a trace a source, with one index per source across
    traces: the tick of CPU 0 and of CPU 1 are one source, though one CPU's
    analysis may find it at 250 Hz and the other's at 249 (taking the tick
    away takes it from every CPU)."""

    def __init__(self, virtual: bool) -> None:
        self.virtual = virtual
        self.names: list[str] = []
        self.periodic: list[tuple[tuple[str, str] | None, float, int]] = []  # stored kind, frequency, index
        self.ticks: set[int] = set()

    def periodic_index(self, hz: float, stored: Sequence[Periodic]) -> int:
        """A periodic source at `hz`: the one already seen as the same kind of
        source within 2 % of that frequency, or a new one (named as the CPU
        that showed it first named it)."""
        named = self._stored(hz, stored)
        kind = named.named.key if named is not None and named.named is not None else None
        for seen_kind, seen_hz, i in self.periodic:
            if seen_kind == kind and same_frequency(hz, seen_hz):
                return i
        i = self.index(self._periodic_name(hz, named))
        self.periodic.append((kind, hz, i))
        if named is not None and named.named is not None and named.named.kind == TICK:
            self.ticks.add(i)
        return i

    def index(self, name: str) -> int:
        if name not in self.names:
            self.names.append(name)
        return self.names.index(name)

    def trace(self, name: str, starts: NDArray[np.float64], lengths: NDArray[np.float64], span: float,
              stored: Sequence[Periodic], hints: tuple[float, ...]) -> Trace:  # fmt: skip
        from quietcore.stats.periodicity import periodic_members

        inside = (starts >= 0) & (starts < span)
        starts, lengths = starts[inside], lengths[inside]
        labels = np.full(starts.size, -1, dtype=np.int64)
        if starts.size:
            for source, members in periodic_members(starts, lengths, span, hints_hz=hints):
                labels[members] = self.periodic_index(source.frequency_hz, stored)
        long = lengths >= LONG_NS
        if self.virtual:
            names = ("the host's stalls of 100 µs or more", "other gaps under 100 µs")
        else:
            names = ("stalls of 100 µs or more", "other gaps under 100 µs")
        for mask, label in ((long, names[0]), (~long, names[1])):
            pick = (labels < 0) & mask
            if pick.any():
                labels[pick] = self.index(label)
        return Trace(name, starts, lengths, labels, span)

    @staticmethod
    def _stored(hz: float, stored: Sequence[Periodic]) -> Periodic | None:
        """The stored analysis's named source of this frequency, if it named one."""
        return next((p for p in stored if same_frequency(p.frequency_hz, hz) and p.named), None)

    @staticmethod
    def _periodic_name(hz: float, named: Periodic | None) -> str:
        if named is not None and named.named is not None:
            return f"{named.named.label} at {hz:,.0f} Hz"
        return f"a periodic source at {hz:,.0f} Hz"


def network_of(conn: sqlite3.Connection, text: str) -> dict[str, Any]:
    """L, o and G as a survey session measured them (`--network SESSION`)."""
    row = sessions.find_session(conn, text)
    if row.command != "survey":
        raise UsageError(f"invalid --network {text!r}: session {row.id} is a {row.command} session (valid: a "
                         "`survey` session of 2 ranks or more)")  # fmt: skip
    for run in sessions.runs_of(conn, row.id):
        net = run.analysis.get("network") if run.kind == "survey" else None
        if net:
            return dict(net)
    raise UsageError(f"invalid --network {text!r}: survey session {row.id} measured no network (a survey of one "
                     "rank, or one stored before quietcore measured it)")  # fmt: skip
