"""Tasks and where they may run, from /proc/PID/stat and status
(Documentation/filesystems/proc.rst). A kernel thread has PF_KTHREAD
(0x00200000, include/linux/sched.h) in the flags field of stat."""

from __future__ import annotations

from dataclasses import dataclass

from quietcore.facts.cpulist import parse_cpulist
from quietcore.facts.root import Root

PF_KTHREAD = 0x00200000
PF_NO_SETAFFINITY = 0x04000000  # a kthread bound by the kernel (per-CPU)


@dataclass(frozen=True)
class Task:
    pid: int
    comm: str
    kthread: bool
    bound: bool  # affinity fixed by the kernel (PF_NO_SETAFFINITY)
    allowed: frozenset[int]
    start: str | None = None  # its start time (stat field 22), which names it with its pid: a knob's TID@START


def parse_stat(text: str) -> tuple[str, int, str | None]:
    """(comm, flags, start time) from /proc/PID/stat; comm may hold spaces
    and ")". The start time is None where the line stops short of it (a
    root written by hand)."""
    start, end = text.index("("), text.rindex(")")
    fields = text[end + 2 :].split()
    # After comm: state(3) ppid(4) pgrp(5) session(6) tty_nr(7) tpgid(8) flags(9) ... starttime(22).
    started = fields[19] if len(fields) > 19 and fields[19].isdigit() else None
    return text[start + 1 : end], int(fields[6]), started


def _allowed(status: str) -> frozenset[int] | None:
    for line in status.splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return parse_cpulist(line.split(":", 1)[1])
    return None


def read_tasks(root: Root) -> list[Task]:
    tasks = []
    for entry in root.listdir("proc"):
        if not entry.isdigit():
            continue
        stat = root.read_text(f"proc/{entry}/stat")
        status = root.read_text(f"proc/{entry}/status")
        if not stat or not status:
            continue  # exited while we looked
        try:
            comm, flags, started = parse_stat(stat)
            allowed = _allowed(status)
        except (ValueError, IndexError):
            continue
        if allowed is None:
            continue
        kthread = bool(flags & PF_KTHREAD)
        tasks.append(Task(int(entry), comm, kthread, bool(flags & PF_NO_SETAFFINITY), allowed, started))
    return sorted(tasks, key=lambda t: t.pid)


def irqbalance_running(tasks: list[Task]) -> Task | None:
    return next((t for t in tasks if t.comm == "irqbalance" and not t.kthread), None)
