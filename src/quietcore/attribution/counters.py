"""Attribution without a tracer: what the kernel counted on each measured CPU
during the run (/proc/interrupts, /proc/softirqs, /proc/stat, the probe
threads' context switches), turned into an estimate of the time each source
took, against the time the probe lost.

An estimate is a count times a cost. Where the run measured the cost (a
periodic source that matches a counter, such as the tick and LOC), that cost
is used; otherwise a typical cost on current x86 and arm64 servers, said as
such. Steal time is measured by the hypervisor itself. What no counter
explains is left unexplained; on a VM, gaps longer than anything the guest
counted are the host preempting the vCPU."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from quietcore.facts.interrupts import parse_interrupts
from quietcore.facts.procstat import CpuTimes, parse_proc_stat, steal_delta_ns
from quietcore.facts.root import Root
from quietcore.runs.analysis import LONG_GAP_NS, Source

#: Typical cost per event, ns, where the run does not measure one. Orders of
#: magnitude from published measurements (interrupt entry/exit and handler
#: on bare metal); a VM's exits cost several times more, hence "typical".
TYPICAL_NS = {
    "LOC": 2000, "RES": 1500, "CAL": 2500, "TLB": 2000, "IWI": 1500, "NMI": 2000, "PMI": 1500,
    "IPI0": 1500, "IPI1": 2500, "IPI5": 1500, "IPI6": 1500,
    "TIMER": 1500, "RCU": 3000, "SCHED": 3000, "NET_RX": 8000, "NET_TX": 3000, "BLOCK": 5000,
    "TASKLET": 2000, "HRTIMER": 1500, "HI": 1000, "IRQ_POLL": 3000,
}  # fmt: skip
DEVICE_NS = 4000


@dataclass(frozen=True)
class CounterSnapshot:
    interrupts: dict[str, dict[int, int]]  # row name -> per-CPU count
    names: dict[str, str]  # row name -> device or description
    softirqs: dict[str, dict[int, int]]
    cpu_times: dict[int, CpuTimes]  # /proc/stat, for steal
    taken_ns: int = 0  # CLOCK_MONOTONIC when read: two of them bound the counts' window


def snapshot(root: Root) -> CounterSnapshot:
    interrupts: dict[str, dict[int, int]] = {}
    names: dict[str, str] = {}
    softirqs: dict[str, dict[int, int]] = {}
    try:
        _, rows = parse_interrupts(root.read_text("proc/interrupts") or "")
        for row in rows:
            interrupts[row.name] = row.counts
            names[row.name] = row.device
    except ValueError:
        pass
    try:
        _, rows = parse_interrupts(root.read_text("proc/softirqs") or "")
        softirqs = {row.name: row.counts for row in rows}
    except ValueError:
        pass
    stat = parse_proc_stat(root.read_text("proc/stat") or "")
    return CounterSnapshot(interrupts, names, softirqs, stat, time.monotonic_ns())


def from_stored(
    cpus: list[dict[str, Any]], steal_ns: dict[str, float], user_hz: int
) -> tuple[CounterSnapshot, CounterSnapshot]:
    """The counters a stored noise run's analysis read, as two snapshots again, for
    `results analyse` to name and attribute with today's code: each CPU's sources
    (their counts: "LOC (Local timer interrupts)", "36 (nvme0q1)", "softirq TIMER"),
    its counters' window (counted_ns) and its steal. What was never kept (a counter
    that rose by none) is none again."""
    interrupts: dict[str, dict[int, int]] = {}
    names: dict[str, str] = {}
    softirqs: dict[str, dict[int, int]] = {}
    window = 0.0
    for c in cpus:
        a = c.get("attribution") or {}
        cpu = int(c["cpu"])
        window = max(window, float(a.get("counted_ns") or 0.0))
        for s in a.get("sources") or ():
            label, count = str(s.get("name", "")), int(s.get("count") or 0)
            if s.get("kind") == "softirq":
                softirqs.setdefault(label.removeprefix("softirq "), {})[cpu] = count
            elif s.get("kind") in ("irq", "ipi"):
                name, _, device = label.partition(" (")
                interrupts.setdefault(name, {})[cpu] = count
                if device:
                    names[name] = device.removesuffix(")")
    zero_irq = {n: dict.fromkeys(v, 0) for n, v in interrupts.items()}
    zero_soft = {n: dict.fromkeys(v, 0) for n, v in softirqs.items()}
    steal = {
        int(k): CpuTimes(int(k), {"steal": round(v * user_hz / 1e9)}) for k, v in steal_ns.items() if v is not None
    }
    none = {k: CpuTimes(k, {"steal": 0}) for k in steal}
    taken = 1  # a window only where one was kept: an old run's rates are then over its measured time
    return (
        CounterSnapshot(zero_irq, names, zero_soft, none, taken if window else 0),
        CounterSnapshot(interrupts, names, softirqs, steal, taken + round(window) if window else 0),
    )


def window_ns(before: CounterSnapshot, after: CounterSnapshot) -> float | None:
    """How long the counts between two snapshots were counted (None when either has no time).
    The probe's start-up and end lie inside it: a rate over the measured time alone is too
    high (LOC 342/s in a 0.5 s check counted over 0.63 s, 260/s in a 5 s reference)."""
    if before.taken_ns and after.taken_ns > before.taken_ns:
        return float(after.taken_ns - before.taken_ns)
    return None


@dataclass
class Attribution:
    cpu: int
    lost_ns: float
    sources: list[Source] = field(default_factory=list)
    explained_ns: float = 0.0
    long_gaps: int = 0
    long_gap_ns: float = 0.0
    verdict: str = ""
    counted_ns: float | None = None  # how long the counts were counted (window_ns)

    def to_json(self) -> dict[str, Any]:
        return {
            "cpu": self.cpu,
            "counted_ns": self.counted_ns,
            "lost_ns": self.lost_ns,
            "explained_ns": self.explained_ns,
            "unexplained_ns": max(self.lost_ns - self.explained_ns, 0.0),
            "long_gaps": self.long_gaps,
            "long_gap_ns": self.long_gap_ns,
            "verdict": self.verdict,
            "sources": [dataclasses.asdict(s) for s in self.sources],
        }


def _delta(before: dict[str, dict[int, int]], after: dict[str, dict[int, int]], cpu: int) -> dict[str, int]:
    out = {}
    for name, counts in after.items():
        if cpu in counts and cpu in before.get(name, {}):
            d = counts[cpu] - before[name][cpu]
            if d > 0:
                out[name] = d
    return out


def attribute(
    cpu: int,
    before: CounterSnapshot,
    after: CounterSnapshot,
    *,
    lost_ns: float,
    durations_ns: NDArray[np.float64],
    involuntary: int,
    user_hz: int,
    measured_costs: dict[str, tuple[float, str]],
    virtualized: bool,
    measured_ns: float | None = None,
) -> Attribution:
    """Sources on one CPU, biggest estimate first. measured_costs maps a
    counter name to (ns per event, how it was measured). The counts were
    counted over the counters' window, the probe's start-up and end in it:
    an estimate of the measured time (`measured_ns`) takes its share of them
    (a 0.5 s check's counts came over 0.63 s)."""
    a = Attribution(cpu, lost_ns, counted_ns=window_ns(before, after))
    inside = min(measured_ns / a.counted_ns, 1.0) if measured_ns and a.counted_ns else 1.0
    for name, count in _delta(before.interrupts, after.interrupts, cpu).items():
        kind = "irq" if name.isdigit() else "ipi"
        label = f"{name} ({after.names.get(name, '')})".replace(" ()", "")
        cost, basis = measured_costs.get(name) or (TYPICAL_NS.get(name, DEVICE_NS), "typical")
        a.sources.append(Source(label, kind, count, cost, basis, count * inside * cost))
    for name, count in _delta(before.softirqs, after.softirqs, cpu).items():
        cost, basis = measured_costs.get(name) or (TYPICAL_NS.get(name, 2000), "typical")
        a.sources.append(Source(f"softirq {name}", "softirq", count, cost, basis, count * inside * cost))
    steal = steal_delta_ns(before.cpu_times, after.cpu_times, user_hz).get(cpu, 0.0)
    if steal > 0:
        tick_ms = 1000 / user_hz
        a.sources.append(Source("steal", "steal", 0, None, f"counted by the hypervisor in {tick_ms:g} ms ticks", steal))
    long = np.sort(durations_ns[durations_ns >= LONG_GAP_NS])[::-1]
    a.long_gaps, a.long_gap_ns = int(long.size), float(long.sum())
    if involuntary:
        # Each involuntary switch is a long gap: another task ran meanwhile.
        switched = long[:involuntary]
        basis = "the probe's involuntary context switches, longest gaps"
        a.sources.append(Source("preempted by another task", "switch", involuntary, None, basis, float(sum(switched))))
    a.sources.sort(key=lambda s: s.estimate_ns, reverse=True)
    a.explained_ns = min(sum(s.estimate_ns for s in a.sources), lost_ns)
    a.verdict = _verdict(a, involuntary, virtualized)
    return a


def _verdict(a: Attribution, involuntary: int, virtualized: bool) -> str:
    if a.counted_ns is None and not a.sources:
        return "no counters were read with these gaps (imported traces): nothing names where the time went."
    unexplained = max(a.lost_ns - a.explained_ns, 0.0)
    share = unexplained / a.lost_ns if a.lost_ns else 0.0
    host_gaps = max(a.long_gaps - involuntary, 0)
    if virtualized and host_gaps:
        gaps = f"{a.long_gaps} gap{'s' if a.long_gaps > 1 else ''} over {LONG_GAP_NS // 1000} µs"
        if involuntary:
            tasks = (f"a guest task preempted the probe {involuntary} time{'s' if involuntary > 1 else ''}, which "
                     f"leaves {host_gaps} to the host preempting this vCPU")  # fmt: skip
        else:
            tasks = "no guest task preempted the probe: the host preempted this vCPU"
        return (
            f"{gaps} ({a.long_gap_ns / 1e6:.1f} ms in all), longer than any interrupt the guest handles; {tasks}. "
            f"{share:.0%} of the lost time is not explained by guest counters."
        )
    if virtualized:
        return f"{share:.0%} of the lost time is not explained by guest counters: host noise, unseen from inside a VM."
    if share > 0.5:
        return f"{share:.0%} of the lost time is not explained by counters: try a tracer (osnoise) or SMIs."
    return f"counters explain {1 - share:.0%} of the lost time."
