"""What happened around one run of an experiment besides its workload: the
intrusions on the cell's CPUs (from one tracefs instance that the whole
experiment shares, emptied before each run), and the covariates that can
explain a slow run: context switches, migrations, page faults, the steal
time of its CPUs, their clock frequency where it can be read.

The workload of a run is every process the runner starts for it (the
probe or the user's command, with its children); the competing loads of
a `+load` cell started before it, so they are intruders, as they are."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quietcore.attribution import intruders, tracer
from quietcore.errors import CommandError
from quietcore.facts.devices import irq_owners
from quietcore.facts.procstat import parse_proc_stat
from quietcore.facts.root import Root
from quietcore.owner import own_threads, step_aside, step_back

BUFFER_KB = 1024  # per CPU: the trace is read every 50 ms while a run goes on
TOP = 8  # sources kept per run, the largest; the rest summed as "other"
STAT = Path("/proc/stat")


def steal_ticks(cpus: frozenset[int]) -> int | None:
    """The steal column of /proc/stat for these CPUs (every CPU, when none), in USER_HZ ticks
    (facts.procstat's parse)."""
    try:
        times = parse_proc_stat(STAT.read_text())
    except (OSError, ValueError):
        return None
    return sum(t.ticks.get("steal", 0) for cpu, t in times.items() if not cpus or cpu in cpus)


def _freq_khz(cpus: frozenset[int]) -> float | None:
    """The CPUs' current clock (cpufreq's scaling_cur_freq), averaged;
    None where the kernel has no cpufreq (this VM)."""
    values = []
    for cpu in cpus:
        try:
            values.append(int(Path(f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq").read_text()))
        except (OSError, ValueError):
            return None
    return sum(values) / len(values) if values else None


@dataclass
class Watch:
    """One experiment's tracing: `begin` before each run, `end` after it."""

    trace: tracer.TraceSession | None
    why_not: str = ""
    _cpus: frozenset[int] = frozenset()
    _steal: int | None = None
    _freq: list[float] = field(default_factory=list)
    _moved: dict[int, set[int]] = field(default_factory=dict)
    _stream: tracer.Stream | None = None

    def settle(self) -> None:
        """After a run, whatever happened: the trace's reader stopped, and
        quietcore's threads back where they were."""
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        step_back(self._moved)
        self._moved = {}

    def begin(self, cpus: frozenset[int], away: bool = False) -> None:
        """Before a run on `cpus`; `away`: the run is pinned there, so
        quietcore's other threads move off them until `settle`."""
        self._cpus = cpus
        if away:
            # The calling thread stays: it starts the workload, which inherits its mask (the probe
            # refuses a CPU outside the mask it was given); it steps aside once the workload runs.
            self._moved = step_aside(cpus, keep=frozenset({threading.get_native_id()}))
        self._steal = steal_ticks(cpus)
        freq = _freq_khz(cpus)
        self._freq = [freq] if freq is not None else []
        if self.trace is not None:
            self.trace.skip()  # what came between runs
            self._stream = tracer.Stream(self.trace, cpus).__enter__()  # its text spans its clock marks

    def end(self, result: dict[str, Any]) -> dict[str, Any]:
        """The run's context: its intrusions (or why there are none) and its
        covariates."""
        out: dict[str, Any] = {"cpus": sorted(self._cpus)}
        if self.trace is not None and self._stream is not None:
            self._stream.__exit__(None, None, None)
            raw = self._stream.text()
            intervals = [(float(a), float(b)) for a, b in result.get("intervals_ns", ())]
            out["intrusions"] = _intrusions(self.trace, raw, self._cpus, self._stream, intervals)
            self._stream = None
        else:
            out["intrusions"] = {"why_not": self.why_not}
        out["covariates"] = self._covariates(result, out["intrusions"])
        return out

    def _covariates(self, result: dict[str, Any], intrusions: dict[str, Any]) -> dict[str, Any]:
        measured = result.get("measured", {})
        counters = measured.get("counters", {})
        cov: dict[str, Any] = {}
        for key in ("ctxsw_voluntary", "ctxsw_involuntary", "minor_faults", "major_faults"):
            if isinstance(measured.get(key), int):
                cov[key] = measured[key]
        # The workload's own time in I/O where it counts one (the probe's mixed: its checkpoints' writes and
        # fdatasyncs), where a device's stalls show: on this guest's disk a run of mixed that takes 0.11 s
        # took 0.13-0.69 s in about one of six.
        if isinstance(result.get("io_ns"), int):
            cov["io_ns"] = result["io_ns"]
        if isinstance(counters.get("cpu_migrations"), int):
            cov["migrations"] = counters["cpu_migrations"]
        elif "migrations" in intrusions:
            cov["migrations"] = intrusions["migrations"]
        steal = steal_ticks(self._cpus)
        if steal is not None and self._steal is not None:
            cov["steal_ns"] = (steal - self._steal) * 1e9 / os.sysconf("SC_CLK_TCK")
        freq = _freq_khz(self._cpus)
        if freq is not None and self._freq:
            cov["freq_mhz"] = (freq + self._freq[0]) / 2000
        return cov


def _intrusions(
    trace: tracer.TraceSession,
    raw: str,
    cpus: frozenset[int],
    stream: tracer.Stream,
    intervals: list[tuple[float, float]] = [],  # noqa: B006  (read, never changed)
) -> dict[str, Any]:
    lost_by_cpu = stream.lost_by_cpu  # while the run's stream read: not what came while its text was told
    lost = sum(lost_by_cpu.values())
    try:
        to_ns, window = tracer.marked_clock(raw, trace.clock)
    except ValueError as exc:
        return {"why_not": str(exc)}
    found = intruders.account(raw.splitlines(), cpus, to_ns, window=window, own=own_threads() | {stream.tid},
                             spawners=(os.getpid(),), intervals=intervals)  # fmt: skip
    found.name_devices(irq_owners(Root("/")))
    merged: dict[tuple[str, str, int | None], float] = {}
    counts: dict[tuple[str, str, int | None], int] = {}
    for cpu in found.cpus.values():
        for use in cpu.uses.values():
            key = (use.kind, use.name, use.pid)
            merged[key] = merged.get(key, 0.0) + use.ns
            counts[key] = counts.get(key, 0) + use.count
    ranked = sorted(merged, key=lambda k: -merged[k])
    sources = [{"kind": k, "name": n, "pid": p, "ns": merged[(k, n, p)], "count": counts[(k, n, p)]}
               for k, n, p in ranked[:TOP]]  # fmt: skip
    rest = sum(merged[k] for k in ranked[TOP:])
    return {
        "ns": sum(merged.values()),
        "sources": sources,
        "other_ns": rest,
        "traced_ns": window[1] - window[0],
        "migrations": found.migrations,
        "lost_events": lost,
        **({"lost_by_cpu": {str(cpu): n for cpu, n in lost_by_cpu.items()}} if lost_by_cpu else {}),
        **({"slots": slots_json(found.slots)} if intervals else {}),
    }


def slots_json(slots: list[intruders.Slot], top: int = TOP) -> list[dict[str, Any]]:
    """Each interval's intruders and the workload's threads (ms), the largest `top` of each."""

    def ms(d: dict[str, float]) -> dict[str, float]:
        return {k: round(v / 1e6, 3) for k, v in sorted(d.items(), key=lambda kv: -kv[1])[:top]}

    return [{"intruders": ms(s.intruders), "threads": ms(s.threads),
             "cpus": {str(c): round(ns / 1e6, 3) for c, ns in sorted(s.cpus.items())}} for s in slots]  # fmt: skip


def open_watch(intrusions: str) -> tuple[Watch, tracer.TraceSession | None]:
    """`intrusions`: auto (trace when root can), on (must), off. Returns the
    watch and the trace session to enter (None: nothing to trace)."""
    if intrusions == "off":
        return Watch(None, "--intrusions off"), None
    ok, why = tracer.usable()
    if not ok:
        if intrusions == "on":
            raise CommandError(f"--intrusions on: {why}", exit_code=3)
        return Watch(None, why), None
    session = tracer.TraceSession(None, intruders.EVENTS, BUFFER_KB)
    return Watch(session), session
