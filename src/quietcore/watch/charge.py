"""What the OS took from each job: on each of a job's CPUs, every stretch that is not the job's own thread
nor idle is charged to the job, by source (an IRQ and its device, a softirq, a vector, an IPI, a work item,
a timer, a task: of another job, named so, or of the system), net of nesting, as `intruders` charges a
workload's CPUs. The CPUs no job holds are "no job"'s: all that ran there is the system's own."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from quietcore.attribution import intruders
from quietcore.watch.jobs import Job

#: The name of the CPUs no job holds
NO_JOB = "no job"


@dataclass
class Source:
    kind: str
    name: str
    ns: float = 0.0
    count: int = 0
    longest_ns: float = 0.0


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

    @property
    def taken_ns(self) -> float:
        return sum(s.ns for s in self.sources.values())

    def ranked(self) -> list[Source]:
        return sorted(self.sources.values(), key=lambda s: -s.ns)

    def to_json(self, top: int | None = None) -> dict[str, Any]:
        ranked = self.ranked()
        return {"job": self.job, "cpus": sorted(self.cpus), "threads": self.threads, "traced_ns": self.traced_ns,
                "job_ns": self.job_ns, "idle_ns": self.idle_ns, "taken_ns": self.taken_ns,
                "sources": [{"kind": s.kind, "name": s.name, "ns": s.ns, "count": s.count,
                             "longest_ns": s.longest_ns} for s in ranked[:top]]}  # fmt: skip


def _of_job(jobs: Sequence[Job]) -> dict[int, str]:
    return {tid: j.name for j in jobs for tid in j.threads}


def charge(lines: Sequence[str], to_ns: Callable[[str], float], window: tuple[float, float], jobs: Sequence[Job],
           online: Iterable[int], own: Iterable[int],
           owners: dict[int, str] | None = None) -> list[Charge]:  # fmt: skip
    """Each job's charge, then no job's (the online CPUs no job holds), from one trace of every CPU. A pass
    over the trace a job: a node's jobs are few, its events many, and each pass is linear in them.
    `owners`: IRQ number -> its device, to name a device's IRQs and their threads as `intruders` does."""
    owner = _of_job(jobs)
    held = frozenset(c for j in jobs for c in j.cpus)
    rest = frozenset(online) - held
    own = frozenset(own)
    out = []
    for name, cpus, threads in [*((j.name, j.cpus, j.threads) for j in jobs), (NO_JOB, rest, frozenset[int]())]:
        cpus = cpus & frozenset(online)
        if not cpus:
            continue
        trace = intruders.account(lines, cpus, to_ns, threads, window, own)
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
    return out


def add(a: Charge, b: Charge) -> Charge:
    """Two looks at one job, as one: its figures summed, its CPUs and threads as the later look saw them."""
    out = Charge(a.job, b.cpus, b.threads, a.traced_ns + b.traced_ns, a.job_ns + b.job_ns, a.idle_ns + b.idle_ns)
    for look in (a, b):
        for key, s in look.sources.items():
            t = out.sources.setdefault(key, Source(s.kind, s.name))
            t.ns += s.ns
            t.count += s.count
            t.longest_ns = max(t.longest_ns, s.longest_ns)
    return out
