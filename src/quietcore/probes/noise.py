"""The noise probe: arguments in, per-CPU summary rows out."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from quietcore.errors import CommandError
from quietcore.facts.cpulist import format_cpulist
from quietcore.probes.runner import ProbeResult, run_probe
from quietcore.store.sessions import NOISE_COLUMNS

#: Setup around the measured time: calibration, preheat, thread start.
OVERHEAD_S = 0.2
#: Peak memory per recorded event, from the probe's buffer to the stored
#: run, over every process: the probe's buffer and the memory file it hands
#: the events over in (16 bytes each), quietcore's arrays (16), the traced
#: leaders (8) and the stored blobs (10), and the analysis's temporaries,
#: some 150 bytes an event of the CPUs being analysed, which on a node of
#: many CPUs is all of them at once (a worker a CPU). About 220 in all,
#: twice that for margin. (As JSON pairs, with the node's whole trace text,
#: it was 2,000: a traced 60 s run on 2 CPUs took 243 MB for 84k events.)
BYTES_PER_EVENT = 500
MEMORY_SHARE = 0.25  # of MemAvailable, for the events of one run
EVENT_CAP = (10_000, 10_000_000)  # per CPU
#: More gaps a second than any node shows (this VM: under 2,000): the
#: probe's buffer, faulted in before the run, is no bigger than a run needs.
MAX_EVENT_RATE = 50_000


def event_cap(cpus: int, available: int | None, duration_s: float) -> tuple[int, str]:
    """Events kept per CPU, sized from the memory available, and why."""
    need = max(int(duration_s * MAX_EVENT_RATE), EVENT_CAP[0])
    if available is None:
        return min(need, 100_000), "MemAvailable unreadable: at most a fixed 100,000"
    room = int(available * MEMORY_SHARE / (max(cpus, 1) * BYTES_PER_EVENT))
    cap = min(max(room, EVENT_CAP[0]), EVENT_CAP[1], need)
    return cap, (f"{MEMORY_SHARE:.0%} of the {available / 2**30:.1f} GiB available at {BYTES_PER_EVENT} B an event, "
                 f"or {MAX_EVENT_RATE:,} a second of the run if fewer")  # fmt: skip


MODES = ("spin", "fwq", "ftq")


@dataclass(frozen=True)
class NoiseOptions:
    cpus: frozenset[int]
    duration: float
    threshold_ns: float | None = None
    max_events: int = 100_000
    max_events_basis: str = "--max-events"
    mode: str = "spin"
    policy: str = "other"
    priority: int = 0
    force: bool = False
    work: int | None = None
    quantum_us: int | None = None
    stop_above_ns: float | None = None  # every CPU stops at the first gap this long

    def args(self) -> list[str]:
        args = ["--cpus", format_cpulist(self.cpus), "--duration", repr(self.duration), "--mode", self.mode]
        if self.threshold_ns is not None:
            args += ["--threshold-ns", repr(self.threshold_ns)]
        if self.work is not None:
            args += ["--work", str(self.work)]
        if self.quantum_us is not None:
            args += ["--quantum-us", str(self.quantum_us)]
        args += ["--policy", self.policy, "--priority", str(self.priority)]
        if self.force:
            args.append("--force")
        if self.stop_above_ns is not None:
            args += ["--stop-above-ns", repr(self.stop_above_ns)]
        return [*args, "--max-events", str(self.max_events)]

    def params(self) -> dict[str, Any]:
        return {
            "cpus": format_cpulist(self.cpus),
            "duration_s": self.duration,
            "mode": self.mode,
            "policy": self.policy,
            "priority": self.priority,
            "threshold_ns": self.threshold_ns,
            "max_events": self.max_events,
            "max_events_basis": self.max_events_basis,
            "work": self.work,
            "quantum_us": self.quantum_us,
            "stop_above_ns": self.stop_above_ns,
        }


#: False: the events as the envelope's JSON pairs, as before --events-fd (bench/memory.py's peer).
EVENTS_APART = True


def run_noise(options: NoiseOptions, on_tick: Callable[[float], None] | None = None) -> ProbeResult:
    """quietcore waits off the measured CPUs (probes.runner). A spin run's
    events come as arrays (the result's `events`), through a memory file the
    probe writes them to (--events-fd), not as its envelope's JSON pairs:
    their text and the lists parsed from it took some 300 bytes an event of
    quietcore's memory, where the arrays take 16 (docs/many-cpus.md). The
    file has no name: nothing another user could reach or swap."""
    expected = options.duration + OVERHEAD_S
    if options.mode != "spin" or not EVENTS_APART or not hasattr(os, "memfd_create"):
        return run_probe("noise", options.args(), expected_s=expected, on_tick=on_tick, away=options.cpus)
    fd = os.memfd_create("quietcore-events", os.MFD_CLOEXEC)
    try:
        probe = run_probe("noise", [*options.args(), "--events-fd", str(fd)], expected_s=expected, on_tick=on_tick,
                          away=options.cpus, pass_fds=(fd,))  # fmt: skip
        return replace(probe, events=read_events(fd, probe.result))
    finally:
        os.close(fd)


def read_events(fd: int, result: Mapping[str, Any]) -> dict[int, Any]:
    """Each CPU's (starts, durations) from the file the probe wrote them to, as
    its result's `events_binary` describes it; {} where it wrote none there
    (its envelope holds them as pairs). CommandError where the file and the
    envelope disagree."""
    import numpy as np  # not for `noise --help`: see quietcore.lazy

    told = result.get("events_binary")
    if not isinstance(told, dict):
        return {}
    cpus = [c for c in result.get("cpus") or [] if isinstance(c, dict)]
    counts = [int(c.get("events_recorded", 0)) for c in cpus]
    size = os.fstat(fd).st_size
    if told.get("bytes") != size or size != 16 * sum(counts):
        raise CommandError(f"quietcore-probe wrote {size} bytes of events where its envelope says {told.get('bytes')} "
                           f"for {sum(counts)} events: reinstall quietcore")  # fmt: skip
    order = told.get("byte_order")
    if order not in ("little", "big"):
        raise CommandError(f"quietcore-probe wrote its events in byte order {order!r} (valid: little, big)")
    values = np.empty(size // 8, dtype="<f8" if order == "little" else ">f8")
    view, got = values.data.cast("B"), 0
    while got < size:
        n = os.preadv(fd, [view[got:]], got)
        if n <= 0:
            raise CommandError(f"quietcore-probe's events ended at byte {got} of {size}")
        got += n
    values = values.astype(np.float64, copy=False)  # native order (a copy only on a big-endian probe's file)
    events, at = {}, 0
    for c, n in zip(cpus, counts, strict=True):
        events[int(c["cpu"])] = (values[at : at + n], values[at + n : at + 2 * n])
        at += 2 * n
    return events


def summary_rows(result: dict[str, Any], steal_ns: Mapping[int, float]) -> list[dict[str, Any]]:
    """One flat row per CPU, the columns of the noise_cpu table."""
    if result.get("mode", "spin") != "spin":
        return []  # fwq/ftq have no gap summary; their series is in the envelope
    threshold = float(result["threshold"]["ns"])
    rows = []
    for cpu in result["cpus"]:
        row = {column: cpu[column] for column in NOISE_COLUMNS if column in cpu}
        row["threshold_ns"] = threshold
        row["ctxsw_voluntary"] = cpu["ctxsw"]["voluntary"]
        row["ctxsw_involuntary"] = cpu["ctxsw"]["involuntary"]
        row["steal_ns"] = steal_ns.get(int(cpu["cpu"]))
        rows.append(row)
    return rows
