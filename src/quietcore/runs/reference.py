"""A CPU's noise as a health check compares it: the lost time in fixed
windows (the distribution the check tests), the run's totals and its
periodic sources. A reference keeps one per CPU, taken from a noise, lab or
survey session; `quietcore check` makes one from its own short measurement.
Stored as JSON in the references table and decoded here, once."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from quietcore.inputs import stored
from quietcore.runs.analysis import legacy_name, of_outside_guest, same_source

#: The window the lost time is counted in: 100 ms holds 25 ticks at 250 Hz and
#: 10 periods of a 100 Hz source, and the default 0.5 s check still has 5 windows.
WINDOW_S = 0.1


@dataclass(frozen=True)
class Periodic:
    """A periodic source as the check matches it: how often, how long, how much."""

    frequency_hz: float
    median_duration_s: float
    lost_ratio: float  # of the CPU's measured time
    name: str | None  # what it is, in a few words ("the tick", "the host")
    outside_guest: bool = False  # named by the analysis as no interrupt of the guest's: the host's

    def alike(self, other: Periodic) -> bool:
        """One source in two places (two CPUs, two sessions): runs.analysis.same_source (a planted
        100 Hz x 200 µs is not a host's 100 Hz x 17 µs)."""
        return same_source(self.frequency_hz, self.median_duration_s, other.frequency_hz, other.median_duration_s)

    def label(self) -> str:
        """`100 Hz x 200 µs`, as the check's line says it."""
        f = self.frequency_hz
        return (
            f"{f / 1e3:.3g} kHz x {_short_s(self.median_duration_s)}"
            if f >= 999.5
            else f"{f:.3g} Hz x {_short_s(self.median_duration_s)}"
        )


@dataclass(frozen=True)
class GuestCount:
    """One of the guest kernel's own counters on a CPU (an interrupt, a softirq,
    the probe's preemptions by other tasks): how often, and what one event cost."""

    name: str
    kind: str  # irq, ipi, softirq, switch
    per_s: float
    cost_s: float  # per event: measured, typical, or (a switch) the mean of the gaps it took

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "per_s": self.per_s, "cost_s": self.cost_s}

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> GuestCount:
        return GuestCount(str(d["name"]), str(d["kind"]), float(d["per_s"]), float(d["cost_s"]))


@dataclass(frozen=True)
class CpuNoise:
    cpu: int
    measured_s: float
    lost_ratio: float  # 0-1
    events_per_s: float
    max_gap_s: float
    windows: tuple[float, ...]  # lost ratio of each whole WINDOW_S window, in time order
    periodic: tuple[Periodic, ...] = ()
    dropped: int = 0  # gaps the probe counted but did not record (the windows undercount them)
    gaps_s: tuple[float, ...] = field(default=(), compare=False)  # every recorded gap (only in a check's own)
    # the guest's own counters one by one (not steal: the hypervisor's), by which the check tells
    # the host's noise on a VM; None in a reference stored before they were kept
    guest: tuple[GuestCount, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"cpu": self.cpu, "measured_s": self.measured_s, "lost_ratio": self.lost_ratio,
                "events_per_s": self.events_per_s, "max_gap_s": self.max_gap_s, "window_s": WINDOW_S,
                "windows": list(self.windows), "dropped": self.dropped,
                "guest": None if self.guest is None else [g.to_json() for g in self.guest],
                "periodic": [{"frequency_hz": p.frequency_hz, "median_duration_s": p.median_duration_s,
                              "lost_ratio": p.lost_ratio, "name": p.name, "outside": p.outside_guest}
                             for p in self.periodic]}  # fmt: skip

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> CpuNoise:
        periodic = tuple(
            Periodic(
                float(p["frequency_hz"]),
                float(p["median_duration_s"]),
                float(p["lost_ratio"]),
                *_name(p),
            )
            for p in d.get("periodic") or []
        )
        guest = d.get("guest")
        return CpuNoise(int(d["cpu"]), float(d["measured_s"]), float(d["lost_ratio"]), float(d["events_per_s"]),
                        float(d["max_gap_s"]), tuple(float(w) for w in d["windows"]), periodic,
                        int(d.get("dropped") or 0),
                        guest=None if guest is None else tuple(GuestCount.from_json(g) for g in guest))  # fmt: skip


@dataclass(frozen=True)
class Reference:
    """A node's reference noise for one configuration, per CPU."""

    id: int
    name: str
    host: str
    fingerprint: str
    session_id: int
    created_at: str
    facts: dict[str, Any]
    cpus: dict[int, CpuNoise]

    @staticmethod
    def from_row(row: Mapping[str, Any]) -> Reference:
        data = stored(row["data"], "reference")
        cpus = {int(c["cpu"]): CpuNoise.from_json(c) for c in data["cpus"]}
        return Reference(int(row["id"]), str(row["name"]), str(row["host"]), str(row["fingerprint"]),
                         int(row["session_id"]), str(row["created_at"]), dict(data.get("facts") or {}),
                         cpus)  # fmt: skip


def _name(p: Mapping[str, Any]) -> tuple[str | None, bool]:
    """A stored source's few words, and whether it is the host's; in a reference stored before names were data,
    read from its sentence (runs.analysis.legacy_name)."""
    name = str(p["name"]) if p.get("name") else None
    if "outside" in p or name is None:
        return name, bool(p.get("outside"))
    named = legacy_name(name)
    return named.label, of_outside_guest(named)


def _short_s(seconds: float) -> str:
    """A duration in the unit that keeps it short: 200 µs, 1.3 ms, 2 s."""
    if not math.isfinite(seconds):
        return "?"
    if seconds >= 1:
        return f"{seconds:.3g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} µs"
