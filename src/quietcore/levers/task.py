"""A thread's CPU affinity as a journaled knob (sched_setaffinity, as
`taskset -p`). Its target is "TID@START", the thread id with its start
time: a revert must never move another thread that got the id since. A
process is moved thread by thread, each thread its own entry, so that a
thread pinned on purpose gets its own affinity back."""

from __future__ import annotations

import os
from dataclasses import dataclass

from quietcore.facts.cpulist import format_cpulist, parse_cpulist
from quietcore.facts.root import Root
from quietcore.owner import start_time


class Gone(Exception):
    """The thread exited (or its id now names another thread)."""


def target(tid: int) -> str | None:
    started = start_time(tid)
    return f"{tid}@{started}" if started else None


def _tid(target: str) -> tuple[int, str]:
    tid, _, started = target.partition("@")
    return int(tid), started


def zombie(tid: int) -> bool:
    """Exited, not yet reaped (by init, here, which is slow to): the kernel
    has already moved it to the root cgroup, and nothing can set it."""
    try:
        with open(f"/proc/{tid}/stat", encoding="utf-8") as handle:
            stat = handle.read()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2 :].split()[0] in ("Z", "X")


def read(target: str) -> str | None:
    """Its allowed CPUs now, or None when it is gone (or a zombie)."""
    tid, started = _tid(target)
    if start_time(tid) != started or zombie(tid):
        return None
    try:
        with open(f"/proc/{tid}/status", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("Cpus_allowed_list:"):
                    return format_cpulist(parse_cpulist(line.split(":", 1)[1].strip()))
    except OSError:
        return None
    return None


def write(target: str, value: str) -> None:
    """Raises Gone, or OSError with the kernel's refusal (EINVAL for a
    kthread bound to its CPU)."""
    tid, started = _tid(target)
    if start_time(tid) != started:
        raise Gone(target)
    try:
        os.sched_setaffinity(tid, parse_cpulist(value))
    except ProcessLookupError as exc:
        raise Gone(target) from exc


@dataclass(frozen=True)
class Thread:
    tid: int
    pid: int
    comm: str
    kthread: bool
    allowed: frozenset[int]


def movable(root: Root) -> tuple[list[Thread], int]:
    """Every thread quietcore may move, and how many the kernel binds to
    their CPU (per-CPU kthreads: PF_NO_SETAFFINITY). Only a live root has
    threads to move."""
    from quietcore.facts.tasks import read_tasks

    if not root.is_live:
        return [], 0
    threads, bound = [], 0
    for task in read_tasks(root):
        if task.bound:
            bound += 1
            continue
        tids = [int(t) for t in root.listdir(f"proc/{task.pid}/task") if t.isdigit()] or [task.pid]
        for tid in tids:
            text = root.read_text(f"proc/{task.pid}/task/{tid}/status") or ""
            allowed = next((parse_cpulist(line.split(":", 1)[1].strip()) for line in text.splitlines()
                            if line.startswith("Cpus_allowed_list:")), None)  # fmt: skip
            if allowed is not None:
                threads.append(Thread(tid, task.pid, task.comm, task.kthread, allowed))
    return threads, bound
