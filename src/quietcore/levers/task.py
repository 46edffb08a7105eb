"""The threads `tune` may move off the targets, each by its own journal
entry (the task-affinity or cpuset-task knob, target "TID@START"), so that
a thread pinned on purpose gets its own affinity back."""

from __future__ import annotations

from dataclasses import dataclass

from quietcore.facts.cpulist import parse_cpulist
from quietcore.facts.root import Root
from quietcore.facts.tasks import read_tasks
from quietcore.owner import start_time


def target(tid: int) -> str | None:
    started = start_time(tid)
    return f"{tid}@{started}" if started else None


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
