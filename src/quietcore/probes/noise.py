"""The noise probe: arguments in, per-CPU summary rows out."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from quietcore.facts.cpulist import format_cpulist
from quietcore.probes.runner import ProbeResult, run_probe
from quietcore.store.sessions import NOISE_COLUMNS

#: Setup around the measured time: calibration, preheat, thread start.
OVERHEAD_S = 0.2
#: Peak memory per recorded event, from the probe's buffer to the stored
#: run: its JSON text, the parsed lists, the arrays, and the tracer's text
#: for the same span (a traced 60 s run on 2 CPUs: 243 MB for 84k events,
#: about 1.7 kB each over the process's 100 MB).
BYTES_PER_EVENT = 2000
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


def run_noise(options: NoiseOptions, on_tick: Callable[[float], None] | None = None) -> ProbeResult:
    """quietcore waits off the measured CPUs (probes.runner)."""
    return run_probe("noise", options.args(), expected_s=options.duration + OVERHEAD_S, on_tick=on_tick,
                     away=options.cpus)  # fmt: skip


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
