"""Intruders without a tracer (a user without root, a kernel without
tracefs): every task's CPU time (/proc/PID/task/TID/schedstat, in ns) and
the CPU it last ran on (/proc/PID/task/TID/stat), sampled; IRQ and softirq
counts from /proc/interrupts and /proc/softirqs; idle from /proc/stat.

Sampling misses what tracing sees, and says so: a task is counted on the
CPU it was last seen on, so one that ran on several CPUs between two
samples is counted on one; a process that began and ended between two
samples is not seen; IRQs and softirqs have counts, not times, and their
time is inside the tasks'; wakers, IPI senders and work items need the
tracer."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from quietcore.attribution.intruders import SAMPLED, SELF, Came, CpuIntruders, Trace
from quietcore.facts.interrupts import parse_interrupts

PROC = Path("/proc")
EVERY_S = 0.05  # a sample of every task costs about 5 ms of one CPU here
MISSES = ("it samples every 50 ms. A task that ran on several CPUs between two samples is counted on the last. A "
          "process that began and ended between two samples is not seen. IRQs and softirqs are counts, their time "
          "inside the tasks'. Wakers, IPI senders and work items need the tracer, as root")  # fmt: skip


@dataclass
class Thread:
    comm: str
    tgid: int
    cpu: int
    runtime: int


def _stat(tgid: int, tid: int) -> tuple[str, int, int] | None:
    """(comm, ppid, last CPU) of a thread; None if it is gone."""
    try:
        text = (PROC / str(tgid) / "task" / str(tid) / "stat").read_text()
    except OSError:
        return None
    comm = text[text.find("(") + 1 : text.rfind(")")]
    fields = text[text.rfind(")") + 2 :].split()
    # fields[0] is state (the stat file's 3rd); ppid is the 4th, processor the 39th
    try:
        return comm, int(fields[1]), int(fields[36])
    except (IndexError, ValueError):
        return None


def _runtime(tgid: int, tid: int) -> int | None:
    try:
        return int((PROC / str(tgid) / "task" / str(tid) / "schedstat").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def threads() -> tuple[dict[int, Thread], dict[int, int]]:
    """Every thread now, and each process's parent."""
    tasks: dict[int, Thread] = {}
    parents: dict[int, int] = {}
    for entry in os.scandir(PROC):
        if not entry.name.isdigit():
            continue
        tgid = int(entry.name)
        try:
            tids = [int(t) for t in os.listdir(PROC / entry.name / "task") if t.isdigit()]
        except OSError:
            continue
        for tid in tids:
            stat, runtime = _stat(tgid, tid), _runtime(tgid, tid)
            if stat is None or runtime is None:
                continue
            comm, ppid, cpu = stat
            if tid == tgid:
                parents[tgid] = ppid
            tasks[tid] = Thread(comm, tgid, cpu, runtime)
    return tasks, parents


#: /proc/interrupts' per-CPU rows, named as the tracer names their vectors
VECTORS = {"LOC": "local_timer", "RES": "reschedule", "CAL": "call_function", "IWI": "irq_work"}


def _counts(path: str) -> dict[tuple[str, str, int], int]:
    """(kind, name, cpu) -> count, from /proc/interrupts or /proc/softirqs."""
    try:
        _, rows = parse_interrupts((PROC / path).read_text())
    except OSError:
        return {}
    out = {}
    for row in rows:
        if path == "softirqs":
            kind, name = "softirq", f"softirq {row.name}"
        elif row.name.isdigit():
            kind, name = "irq", f"irq {row.name} ({(row.description.split() or ['?'])[-1]})"
        else:
            kind, name = "vector", VECTORS.get(row.name, f"{row.name} ({row.description})".strip())
        for cpu, count in row.counts.items():
            out[(kind, name, cpu)] = count
    return out


def _idle_ticks(cpus: frozenset[int]) -> dict[int, int]:
    out = {}
    for line in (PROC / "stat").read_text().splitlines():
        name, *cols = line.split()
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus and len(cols) >= 5:
            out[int(name[3:])] = int(cols[3]) + int(cols[4])  # idle and iowait
    return out


@dataclass
class Sampler:
    """Samples until `done()` says the workload has ended (or the time is up)."""

    cpus: frozenset[int]
    workload: int | None = None
    own: frozenset[int] = frozenset()
    samples: int = 0
    _seen: dict[int, int] = field(default_factory=dict)

    def run(self, done: Callable[[], bool], clock: Callable[[], float], sleep: Callable[[float], None]) -> Trace:
        out = Trace({c: CpuIntruders(c) for c in sorted(self.cpus)}, set())
        irq0, soft0, idle0 = _counts("interrupts"), _counts("softirqs"), _idle_ticks(self.cpus)
        start = clock()
        tasks, _ = threads()
        self._seen = {tid: t.runtime for tid, t in tasks.items()}
        while True:
            finished = done()
            tasks, parents = threads()
            self.samples += 1
            self._account(out, tasks, parents)
            if finished:
                break
            sleep(EVERY_S)
        elapsed = clock() - start
        irq1, soft1, idle1 = _counts("interrupts"), _counts("softirqs"), _idle_ticks(self.cpus)
        hz = os.sysconf("SC_CLK_TCK")
        for cpu, c in out.cpus.items():
            c.traced_ns = elapsed * 1e9
            c.idle_ns = (idle1.get(cpu, 0) - idle0.get(cpu, 0)) * 1e9 / hz
            c.events = self.samples
            for before, after in ((irq0, irq1), (soft0, soft1)):
                for (kind, name, where), count in after.items():
                    delta = count - before.get((kind, name, where), 0)
                    if where == cpu and delta > 0:
                        c.use(kind, name).count += delta
        out.workload = {tid for tid, t in tasks.items() if self._inside(t.tgid, parents)}
        return out

    def _inside(self, tgid: int, parents: dict[int, int]) -> bool:
        """Whether a process descends from the workload's."""
        seen = 0
        while tgid > 1 and seen < 64:
            if tgid == self.workload:
                return True
            tgid, seen = parents.get(tgid, 0), seen + 1
        return False

    def _account(self, out: Trace, tasks: dict[int, Thread], parents: dict[int, int]) -> None:
        for tid, t in tasks.items():
            delta = t.runtime - self._seen.get(tid, 0)  # a thread born since the last sample: all its time
            self._seen[tid] = t.runtime
            if delta <= 0 or t.cpu not in out.cpus:
                continue
            c = out.cpus[t.cpu]
            if self.workload is not None and self._inside(t.tgid, parents):
                c.workload_ns += delta
                continue
            use = c.use("task", SELF if tid in self.own else t.comm, tid)
            use.ns += delta
            use.count += 1  # samples in which it had run
            use.longest_ns = max(use.longest_ns, delta)
            use.came[Came(SAMPLED)] += 1
