"""Attribution with a tracer: irq, softirq, vector and sched_switch
tracepoints, recorded during the run and matched to each gap by time.

quietcore traces in a tracefs instance of its own (instances/quietcore-PID,
Documentation/trace/ftrace.rst "Instances"), so the node's own tracing is
left as it was; the instance is removed when the run ends, and tracefs is
unmounted again if quietcore mounted it. Tracing costs each traced event a
little time, which the gaps then include."""

from __future__ import annotations

import bisect
import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

MOUNTS = (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing"))
PREFIX = "quietcore-"
#: (event, the part of its name the interval is called by)
EVENTS = (
    "irq/irq_handler_entry", "irq/irq_handler_exit", "irq/softirq_entry", "irq/softirq_exit",
    "irq_vectors/local_timer_entry", "irq_vectors/local_timer_exit",
    "irq_vectors/reschedule_entry", "irq_vectors/reschedule_exit",
    "irq_vectors/call_function_entry", "irq_vectors/call_function_exit",
    "irq_vectors/call_function_single_entry", "irq_vectors/call_function_single_exit",
    "irq_vectors/irq_work_entry", "irq_vectors/irq_work_exit",
    "sched/sched_switch",
)  # fmt: skip
_LINE = re.compile(r"^\s*(?P<comm>.*?)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+(?:\S+\s+)?(?P<ts>\d+(?:\.\d+)?):\s+"
                   r"(?P<event>\w+):\s*(?P<rest>.*)$")  # fmt: skip


def _mounted() -> Path | None:
    return next((m for m in MOUNTS if (m / "instances").is_dir()), None)


def usable() -> tuple[bool, str]:
    """Whether tracepoints can be used here, and if not, why."""
    if os.geteuid() != 0:
        return False, "tracefs needs root: run as root for traced attribution"
    if "tracefs" not in Path("/proc/filesystems").read_text():
        return False, "this kernel has no tracefs (CONFIG_TRACING off)"
    base = _mounted() or MOUNTS[0]
    if not (base / "instances").is_dir() and not base.is_dir():
        return False, f"{base} does not exist to mount tracefs on"
    return True, "irq, softirq, irq_vectors and sched_switch tracepoints"


def osnoise_state() -> str:
    """Whether the osnoise tracer is built in; quietcore matches its own
    probe's gaps to tracepoints in either case, since the osnoise tracer
    runs a workload of its own."""
    base = _mounted()
    if base is None:
        return "unknown (tracefs not mounted)"
    tracers = (base / "available_tracers").read_text().split()
    return "built in" if "osnoise" in tracers else "not built (CONFIG_OSNOISE_TRACER)"


@dataclass
class TraceSession:
    cpus: frozenset[int]
    clock: str = ""
    mounted_here: bool = False
    instance: Path | None = None
    errors: list[str] = field(default_factory=list)

    def __enter__(self) -> TraceSession:
        base = _mounted()
        if base is None:
            base = MOUNTS[0]
            subprocess.run(["mount", "-t", "tracefs", "nodev", str(base)], check=True, capture_output=True)
            self.mounted_here = True
        _remove_stale(base)
        self.instance = base / "instances" / f"{PREFIX}{os.getpid()}"
        self.instance.mkdir()
        clocks = (self.instance / "trace_clock").read_text().replace("[", "").replace("]", "").split()
        self.clock = "x86-tsc" if "x86-tsc" in clocks else "mono_raw"
        self._write("trace_clock", self.clock)
        self._write("tracing_cpumask", f"{sum(1 << c for c in self.cpus):x}")
        self._write("buffer_size_kb", "8192")
        for event in EVENTS:
            path = self.instance / "events" / event / "enable"
            if path.exists():
                path.write_text("1")
            else:
                self.errors.append(f"no tracepoint {event}")
        self._write("tracing_on", "1")
        return self

    def _write(self, name: str, value: str) -> None:
        assert self.instance is not None
        (self.instance / name).write_text(value)

    def read(self) -> str:
        assert self.instance is not None
        self._write("tracing_on", "0")
        return (self.instance / "trace").read_text(errors="replace")

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        # Undo in reverse, whatever happened: events off, instance gone, unmount.
        if self.instance is not None and self.instance.exists():
            (self.instance / "tracing_on").write_text("0")
            for event in EVENTS:
                path = self.instance / "events" / event / "enable"
                if path.exists():
                    path.write_text("0")
            self.instance.rmdir()
        if self.mounted_here:
            subprocess.run(["umount", str(MOUNTS[0])], check=False, capture_output=True)


def _remove_stale(base: Path) -> None:
    """Instances left by a quietcore that was killed mid-run."""
    for entry in (base / "instances").glob(f"{PREFIX}*"):
        pid = entry.name[len(PREFIX) :]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            entry.rmdir()


@dataclass(frozen=True)
class Interval:
    cpu: int
    start: float  # ns from the probe's origin
    end: float
    name: str


def _name(event: str, rest: str) -> str:
    if event.startswith("irq_handler"):
        match = re.search(r"name=(\S+)", rest)
        irq = re.search(r"irq=(\d+)", rest)
        return f"irq {irq.group(1) if irq else '?'} ({match.group(1) if match else '?'})"
    if event.startswith("softirq"):
        match = re.search(r"action=(\w+)", rest)
        return f"softirq {match.group(1) if match else '?'}"
    return event.rsplit("_", 1)[0]  # local_timer, reschedule, call_function...


def intervals(text: str, to_ns: Callable[[str], float], probe_comm: str = "quietcore-probe") -> list[Interval]:
    """Entry/exit pairs per CPU, and the spans in which another task ran in
    place of the probe (from its sched_switch out to the one back in)."""
    started: dict[tuple[int, str], tuple[float, str]] = {}
    out: list[Interval] = []
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        cpu, ts, event, rest = int(m["cpu"]), to_ns(m["ts"]), m["event"], m["rest"]
        if event == "sched_switch":
            prev = re.search(r"prev_comm=(.*?) prev_pid=", rest)
            nxt = re.search(r"next_comm=(.*?) next_pid=", rest)
            if prev and prev.group(1) == probe_comm:
                started[(cpu, "switch")] = (ts, f"task {nxt.group(1) if nxt else '?'}")
            elif nxt and nxt.group(1) == probe_comm and (cpu, "switch") in started:
                begin, name = started.pop((cpu, "switch"))
                out.append(Interval(cpu, begin, ts, name))
            continue
        kind = event.rsplit("_", 1)[0]
        if event.endswith("_entry"):
            started[(cpu, kind)] = (ts, _name(event, rest))
        elif event.endswith("_exit") and (cpu, kind) in started:
            begin, name = started.pop((cpu, kind))
            out.append(Interval(cpu, begin, ts, name))
    return out


def match_gaps(cpu: int, gaps: list[tuple[float, float]], spans: list[Interval]) -> dict[str, Any]:
    """Each traced span explains the part of a gap it overlaps; a gap counts
    once, for the span that overlaps it most. What no span covers (a whole
    gap, or the rest of one) is untraced time: in a VM, the host, which the
    guest cannot trace."""
    mine = sorted((s for s in spans if s.cpu == cpu), key=lambda s: s.start)
    starts = [s.start for s in mine]
    by_name: dict[str, list[float]] = {}
    untraced_gaps, untraced_ns = 0, 0.0
    for g_start, g_len in gaps:
        g_end = g_start + g_len
        k = bisect.bisect_left(starts, g_start - 1e7)  # spans start at most 10 ms before a gap they explain
        hits = [(s, min(s.end, g_end) - max(s.start, g_start)) for s in mine[k:] if s.start < g_end]
        hits = [(s, o) for s, o in hits if o > 0]
        if not hits:
            untraced_gaps += 1
            untraced_ns += g_len
            continue
        covered = min(sum(o for _, o in hits), g_len)
        untraced_ns += g_len - covered
        for s, o in hits:
            by_name.setdefault(s.name, [0.0, 0.0])[1] += o * covered / sum(o for _, o in hits)
        by_name[max(hits, key=lambda h: h[1])[0].name][0] += 1
    ranked = sorted(by_name.items(), key=lambda item: -item[1][1])
    sources = [{"name": n, "gaps": int(v[0]), "ns": v[1]} for n, v in ranked]
    return {"cpu": cpu, "sources": sources, "unmatched": {"gaps": untraced_gaps, "ns": untraced_ns}}


def converter(clock: str, origin: dict[str, Any], hz: float) -> Callable[[str], float]:
    """Trace timestamps to ns from the probe's origin: raw TSC counts with the
    x86-tsc clock, seconds with mono_raw (the probe gives its origin in both)."""
    if clock == "x86-tsc":
        ticks, scale = float(origin["ticks"]), 1e9 / hz
        return lambda ts: (float(ts) - ticks) * scale
    raw = float(origin["monotonic_raw_ns"])
    return lambda ts: float(ts) * 1e9 - raw
