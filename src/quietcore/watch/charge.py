"""What the OS took from each job: on each of a job's CPUs, every stretch that is not the job's own thread
nor idle is charged to the job, by source (an IRQ and its device, a softirq, a vector, an IPI, a work item,
a timer, a task: of another job, named so, or of the system), net of nesting, as `intruders` charges a
workload's CPUs. The CPUs no job holds are "no job"'s: all that ran there is the system's own."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from quietcore.attribution import intruders
from quietcore.watch.bpf import TASK
from quietcore.watch.jobs import Job

#: A source is the node's where another's CPUs had it at this share of a job's rate or more
SHARED = 0.25
#: The name of the CPUs no job holds
NO_JOB = "no job"


@dataclass
class Source:
    kind: str
    name: str
    ns: float = 0.0
    count: int = 0
    longest_ns: float = 0.0
    #: seen in the same look on CPUs this job did not hold too: the node's, not met alone
    shared: bool = False


@dataclass
class Charge:
    """One job's account over the look."""

    job: str
    cpus: frozenset[int]
    threads: int
    traced_ns: float = 0.0  # over its CPUs
    job_ns: float = 0.0  # its own threads' time on its CPUs
    idle_ns: float = 0.0
    sources: dict[tuple[str, str], Source] = field(default_factory=dict)
    #: time the host ran something else while its CPUs wanted to run (a VM's steal): no guest event covers
    #: it, and it lies inside the figures above, in whatever the guest thought was running
    steal_ns: float = 0.0

    @property
    def taken_ns(self) -> float:
        return sum(s.ns for s in self.sources.values())

    def ranked(self) -> list[Source]:
        return sorted(self.sources.values(), key=lambda s: -s.ns)

    def to_json(self, top: int | None = None) -> dict[str, Any]:
        """Its figures; with `top`, its largest sources and the rest summed in one, "other sources (N)"."""
        ranked = self.ranked()
        if top is not None and len(ranked) > top:
            rest = ranked[top:]
            ranked = [*ranked[:top], Source("other", f"other sources ({len(rest):,})", sum(s.ns for s in rest),
                                            sum(s.count for s in rest), max(s.longest_ns for s in rest),
                                            all(s.shared for s in rest))]  # fmt: skip
        return {"job": self.job, "cpus": sorted(self.cpus), "threads": self.threads, "traced_ns": self.traced_ns,
                "job_ns": self.job_ns, "idle_ns": self.idle_ns, "taken_ns": self.taken_ns, "steal_ns": self.steal_ns,
                "sources": [{"kind": s.kind, "name": s.name, "ns": s.ns, "count": s.count,
                             "longest_ns": s.longest_ns, "shared": s.shared} for s in ranked]}  # fmt: skip

    @staticmethod
    def from_json(d: dict[str, Any]) -> Charge:
        """A charge as to_json wrote it (watch's own state file); ValueError, KeyError or TypeError if not."""
        cpus = frozenset(int(c) for c in d["cpus"])
        c = Charge(str(d["job"]), cpus, int(d["threads"]), float(d["traced_ns"]), float(d["job_ns"]),
                   float(d["idle_ns"]), steal_ns=float(d.get("steal_ns", 0.0)))  # fmt: skip
        for s in d["sources"]:
            source = Source(str(s["kind"]), str(s["name"]), float(s["ns"]), int(s["count"]), float(s["longest_ns"]),
                            bool(s.get("shared", False)))  # fmt: skip
            c.sources[(source.kind, source.name)] = source
        return c


def mark_shared(charges: Sequence[Charge]) -> None:
    """Each source a job met that another job or no job met in the same look too, at a quarter of its rate
    or more (a share of the CPUs' time), is the node's: the tick, the host, an IRQ spread over every CPU. The
    rest it met alone: a neighbour's task, a device's IRQ on its CPUs, a task that only started elsewhere."""
    rates: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for i, c in enumerate(charges):
        for (kind, name), source in c.sources.items():
            rate = source.ns / c.traced_ns if c.traced_ns else 0.0
            rates.setdefault((kind, name.split(" (job ", 1)[0]), []).append((i, rate))
    for i, c in enumerate(charges):
        for (kind, name), source in c.sources.items():
            mine = source.ns / c.traced_ns if c.traced_ns else 0.0
            others = rates[(kind, name.split(" (job ", 1)[0])]
            source.shared = source.shared or any(j != i and rate >= SHARED * mine for j, rate in others)


def _of_job(jobs: Sequence[Job]) -> dict[int, str]:
    return {tid: j.name for j in jobs for tid in j.threads}


_HEAD = re.compile(r"-\d+ +\[(\d+)\] ")


def cpu_of_lines(lines: Sequence[str]) -> list[int]:
    """Each line's CPU, as telling wrote it: a name right-aligned in 16 columns (a task's name is 15 bytes at
    most), "-", the pid in 7, then "[CPU]". A line of another shape (a stack's frame) goes with the line before
    it."""
    out: list[int] = []
    last = -1
    for line in lines:
        if len(line) > 27 and line[16] == "-" and line[25] == "[":
            end = line.find("]", 26, 34)
            if end > 26 and line[26:end].isdigit():
                last = int(line[26:end])
        elif m := _HEAD.match(line, 16):  # a pid of more than 7 digits
            last = int(m[1])
        out.append(last)
    return out


def _of_cpus(lines: Sequence[str], at: dict[int, list[int]], cpus: frozenset[int]) -> list[str]:
    """The lines of these CPUs, in the trace's order (a fork on one CPU before its child runs on another): a
    job's pass reads its own CPUs' lines alone, so that a look's passes, one a job, read each line once
    between them."""
    picked = sorted(i for cpu in cpus for i in at.get(cpu, ()))
    return [lines[i] for i in picked]


def charge(lines: Sequence[str], to_ns: Callable[[str], float], window: tuple[float, float], jobs: Sequence[Job],
           online: Iterable[int], own: Iterable[int],
           owners: dict[int, str] | None = None) -> list[Charge]:  # fmt: skip
    """Each job's charge, then no job's (the online CPUs no job holds), from one trace of every CPU. A pass a
    job, over its own CPUs' lines: linear in the trace's lines, however many jobs there are.
    `owners`: IRQ number -> its device, to name a device's IRQs and their threads as `intruders` does."""
    owner = _of_job(jobs)
    held = frozenset(c for j in jobs for c in j.cpus)
    rest = frozenset(online) - held
    own = frozenset(own)
    at: dict[int, list[int]] = {}  # CPU -> its lines' indices
    for i, number in enumerate(cpu_of_lines(lines)):
        at.setdefault(number, []).append(i)
    out = []
    for name, cpus, threads in [*((j.name, j.cpus, j.threads) for j in jobs), (NO_JOB, rest, frozenset[int]())]:
        cpus = cpus & frozenset(online)
        if not cpus:
            continue
        trace = intruders.account(_of_cpus(lines, at, cpus), cpus, to_ns, threads, window, own)
        trace.name_devices(owners or {})
        c = Charge(name, cpus, len(threads))
        for cpu in trace.cpus.values():
            c.traced_ns += cpu.traced_ns
            c.job_ns += cpu.workload_ns
            c.idle_ns += cpu.idle_ns
            for use in cpu.uses.values():
                other = owner.get(use.pid) if use.kind == "task" and use.pid is not None else None
                label = f"{use.name} (job {other})" if other is not None and other != name else use.name
                key = (use.kind, label)
                s = c.sources.setdefault(key, Source(use.kind, label))
                s.ns += use.ns
                s.count += use.count
                s.longest_ns = max(s.longest_ns, use.longest_ns)
        out.append(c)
    mark_shared(out)
    return out


def add(a: Charge, b: Charge) -> Charge:
    """Two looks at one job, as one: its figures summed, its CPUs and threads as the later look saw them."""
    out = Charge(
        a.job,
        b.cpus,
        b.threads,
        a.traced_ns + b.traced_ns,
        a.job_ns + b.job_ns,
        a.idle_ns + b.idle_ns,
        steal_ns=a.steal_ns + b.steal_ns,
    )
    for look in (a, b):
        for key, s in look.sources.items():
            t = out.sources.setdefault(key, Source(s.kind, s.name))
            t.ns += s.ns
            t.count += s.count
            t.longest_ns = max(t.longest_ns, s.longest_ns)
            t.shared = t.shared or s.shared
    return out


def from_kernel(entries: Sequence[Any], named: Callable[[Any], tuple[str, str]], comm: Callable[[int], str | None],
                wall_ns: float, jobs: Sequence[Job], v1: bool, online: Iterable[int], own: Iterable[int],
                owners: dict[int, str] | None = None) -> list[Charge]:  # fmt: skip
    """Each job's charge, then no job's, from the in-kernel account's entries of one look (watch.bpf.Entry):
    on each of a job's CPUs, a task of its cgroups (Job.ids) or of its threads is the job's own, pid 0
    is idle, and everything else is charged to it by source. A CPU's time is the look's wall time."""
    owners = owners or {}
    own = frozenset(own)
    held = frozenset(c for j in jobs for c in j.cpus)
    online = frozenset(online)
    job_of: dict[int, str] = {i: j.name for j in jobs for i in j.ids}
    ids = {j.name: j.ids for j in jobs}
    by_cpu: dict[int, list[Any]] = {}
    for e in entries:
        by_cpu.setdefault(e.cpu, []).append(e)
    names: dict[int, str] = {}
    out = []
    every = [*((j.name, j.cpus, j.threads) for j in jobs), (NO_JOB, online - held, frozenset[int]())]
    for name, cpus, threads in every:
        cpus = cpus & online
        if not cpus:
            continue
        mine = ids.get(name, frozenset())
        c = Charge(name, cpus, len(threads), traced_ns=wall_ns * len(cpus))
        for cpu in cpus:
            for e in by_cpu.get(cpu, ()):
                if e.kind == TASK:
                    group = e.cpuset if v1 else e.cgroup
                    if e.id == 0:
                        c.idle_ns += e.ns
                        continue
                    if group in mine or e.id in threads:
                        c.job_ns += e.ns
                        continue
                    if e.id not in names:
                        names[e.id] = (
                            intruders.SELF if e.id in own else intruders.device_name(comm(e.id) or str(e.id), owners)
                        )
                    label = names[e.id]
                    other = job_of.get(group)
                    key = ("task", f"{label} (job {other})" if other is not None and other != name else label)
                else:
                    kind, what = named(e)
                    key = (kind, intruders.device_name(what, owners))
                s = c.sources.setdefault(key, Source(*key))
                s.ns += e.ns
                s.count += e.count
                s.longest_ns = max(s.longest_ns, float(e.longest))
        out.append(c)
    mark_shared(out)
    return out
