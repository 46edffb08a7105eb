"""The analysis stored with a spin-mode noise run, as typed views decoded
once: per CPU the event percentiles, the periodic sources found (named where
the evidence allowed) and the counter attribution of the lost time.
attribution.noise writes it as JSON; everything that reads it (the terminal,
the report, the survey's odd-node rule, simulate's source names, tune prove)
reads these views, never the JSON's keys."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

FREQ_MATCH = 0.02  # two periodic sources within 2 % of each other's frequency are at one rate


def same_frequency(f: float, target: float) -> bool:
    """Whether `f` is `target`'s rate, within FREQ_MATCH: the one rule by which
    naming, the fleet's check and simulate say two periodic sources' rates agree."""
    return abs(f - target) <= FREQ_MATCH * target


#: How the analysis names a periodic source faster than any interrupt the guest counted.
OUTSIDE_GUEST = "outside the guest kernel"
#: How it names a train of a task's turns on the CPU (attribution.naming): not noise, a co-runner.
SLICES = "another task's time slices"


def of_outside_guest(name: object) -> bool:
    """Whether a periodic source's stored name says no interrupt of the guest's (OUTSIDE_GUEST): the host's."""
    return isinstance(name, str) and name.startswith(OUTSIDE_GUEST)


def of_slices(name: object) -> bool:
    """Whether a periodic source's stored name (any JSON value) says a co-runner's time slices (SLICES)."""
    return isinstance(name, str) and name.startswith(SLICES)


#: Lengths of one source on CPUs side by side: a VM's tick ran 5.3-16.2 µs across the GPU node's CPUs (the
#: host's timer landing in it), one source; a planted 200 µs beside a host's 17 µs at 100 Hz is another.
SAME_SOURCE = 4.0


def same_source(freq_a: float, length_a: float, freq_b: float, length_b: float, factor: float = SAME_SOURCE) -> bool:
    """Whether two periodic sources (a rate and a median length each, in one unit) are one source in two
    places, two CPUs or two sessions: the same frequency, and lengths within `factor`. The one rule by which
    the screen groups a source over CPUs, `reference show` over a reference's, and `compare` tells a source
    dearer in B from one new in B."""
    return (same_frequency(freq_a, freq_b) and length_a > 0 and length_b > 0
            and 1 / factor <= length_a / length_b <= factor)  # fmt: skip


def source_kind(name: str) -> str:
    """A source's name without what its CPU counted (attribution.naming writes
    those counts in parentheses or after ", counted at"): "the scheduler tick,
    CONFIG_HZ=250 (LOC 255/s)" on one CPU and "... (LOC 256/s)" on another are
    one kind; "IRQ 24 (virtio0-input.0), counted at 100/s on this CPU" is "IRQ
    24". tests/unit/test_naming.py runs every name naming makes through it."""
    return re.split(r" \(|, counted at ", name, maxsplit=1)[0]


def _float(value: Any, default: float = 0.0) -> float:
    return float(value) if value is not None else default


@dataclass(frozen=True)
class Periodic:
    """A source that came back at a steady period."""

    frequency_hz: float
    period_ns: float
    events: int  # periods in which it was seen
    expected: int  # periods the run spanned
    coverage: float
    jitter_ns: float
    median_duration_ns: float
    lost_ns: float
    share_of_lost: float | None  # of the CPU's lost time
    name: str | None  # "the scheduler tick, CONFIG_HZ=250", or None when the counters cannot say

    @property
    def outside_guest(self) -> bool:
        """Named by the analysis as no interrupt of the guest's: the host's (as runs.reference.Periodic's)."""
        return of_outside_guest(self.name)

    @property
    def slices(self) -> bool:
        """Named by the analysis as a co-runner's turns on the CPU (SLICES), not noise."""
        return of_slices(self.name)

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> Periodic:
        share = d.get("share_of_lost")
        return Periodic(
            frequency_hz=_float(d.get("frequency_hz")),
            period_ns=_float(d.get("period_ns")),
            events=int(d.get("events") or 0),
            expected=int(d.get("expected") or 0),
            coverage=_float(d.get("coverage")),
            jitter_ns=_float(d.get("jitter_ns")),
            median_duration_ns=_float(d.get("median_duration_ns")),
            lost_ns=_float(d.get("lost_ns")),
            share_of_lost=None if share is None else float(share),
            name=d.get("name") or None,
        )


@dataclass(frozen=True)
class Source:
    """One source of lost time the kernel's counters name."""

    name: str
    kind: str  # irq, ipi, softirq, steal, switch
    count: int
    cost_ns: float | None  # per event; None when only the total is known
    basis: str  # how the cost was had: "measured ...", "typical", ...
    estimate_ns: float

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> Source:
        cost = d.get("cost_ns")
        return Source(str(d.get("name", "")), str(d.get("kind", "")), int(d.get("count") or 0),
                      None if cost is None else float(cost), str(d.get("basis", "")),
                      _float(d.get("estimate_ns")))  # fmt: skip


@dataclass(frozen=True)
class Attribution:
    """Where one CPU's lost time went, by the counters."""

    lost_ns: float
    explained_ns: float
    unexplained_ns: float
    long_gaps: int
    long_gap_ns: float
    verdict: str
    sources: tuple[Source, ...]
    counted_ns: float | None = None  # the counters' window (None in runs stored before it was kept)

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> Attribution:
        lost, explained = _float(d.get("lost_ns")), _float(d.get("explained_ns"))
        counted = d.get("counted_ns")
        return Attribution(
            lost_ns=lost,
            explained_ns=explained,
            unexplained_ns=_float(d.get("unexplained_ns"), max(lost - explained, 0.0)),
            long_gaps=int(d.get("long_gaps") or 0),
            long_gap_ns=_float(d.get("long_gap_ns")),
            verdict=str(d.get("verdict", "")),
            sources=tuple(Source.from_json(s) for s in d.get("sources") or ()),
            counted_ns=_float(counted) if counted is not None else None,
        )

    def count_of(self, kind: str) -> int:
        """Events of one kind (irq, ipi, softirq, switch) over every source of it."""
        return sum(s.count for s in self.sources if s.kind == kind)


@dataclass(frozen=True)
class CpuAnalysis:
    cpu: int
    event_ns: Mapping[str, float | None]  # percentiles of the gap lengths, None where too few
    periodic: tuple[Periodic, ...]
    attribution: Attribution | None  # None in a run stored before attribution existed

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> CpuAnalysis:
        attribution = d.get("attribution")
        return CpuAnalysis(
            cpu=int(d["cpu"]),
            event_ns=dict(d.get("event_ns") or {}),
            periodic=tuple(Periodic.from_json(p) for p in d.get("periodic") or ()),
            attribution=Attribution.from_json(attribution) if attribution else None,
        )


@dataclass(frozen=True)
class NoiseAnalysis:
    cpus: tuple[CpuAnalysis, ...]
    tracer: Mapping[str, Any]  # the traced attribution as stored (empty when none ran)

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> NoiseAnalysis:
        """The analysis of a noise run; empty for a run that has none (fwq, ftq)."""
        return NoiseAnalysis(
            cpus=tuple(CpuAnalysis.from_json(c) for c in d.get("cpus") or () if "cpu" in c),
            tracer=dict(d.get("tracer") or {}),
        )

    def of(self, cpu: int) -> CpuAnalysis | None:
        return next((c for c in self.cpus if c.cpu == cpu), None)
