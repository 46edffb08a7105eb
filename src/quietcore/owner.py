"""Who a quietcore process is, so that another can tell whether it still
runs: its pid together with its start time (field 22 of /proc/PID/stat, in
clock ticks since boot), because a pid alone is reused by the kernel; and
this process's own threads, which step off the CPUs it measures."""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from dataclasses import dataclass


def start_time(pid: int) -> str | None:
    """The process's start time, or None when it no longer exists."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            stat = handle.read()
    except OSError:
        return None
    # comm (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None


def alive(pid: int, started: str | None) -> bool:
    """True while that very process runs (same pid and start time); with
    no start time recorded (an old journal row), the pid alone decides."""
    now = start_time(pid)
    return now is not None and (started is None or now == started)


@dataclass(frozen=True)
class Owner:
    host: str
    pid: int
    started: str | None
    command: str

    @staticmethod
    def me() -> Owner:
        argv = ["quietcore", *sys.argv[1:]]
        return Owner(socket.gethostname(), os.getpid(), start_time(os.getpid()), " ".join(argv))


def own_threads() -> frozenset[int]:
    """This process's threads (a progress bar has one of its own)."""
    return frozenset(int(t) for t in os.listdir("/proc/self/task") if t.isdigit())


def step_aside(cpus: frozenset[int], keep: frozenset[int] = frozenset()) -> dict[int, set[int]]:
    """This process's threads but `keep` off `cpus`, each where it has
    somewhere else to run: quietcore waiting on a CPU it measures is noise of
    its own (a progress bar redrawn there cost 2 % of the CPU). Returns their
    masks before, for `step_back`."""
    before: dict[int, set[int]] = {}
    for tid in own_threads() - keep:
        with contextlib.suppress(OSError):  # a thread that has ended
            mask = os.sched_getaffinity(tid)
            if mask & cpus and mask - cpus:
                os.sched_setaffinity(tid, mask - cpus)
                before[tid] = mask
    return before


def step_back(before: dict[int, set[int]]) -> None:
    """Each thread `step_aside` moved back to its mask."""
    for tid, mask in before.items():
        with contextlib.suppress(OSError):  # a thread that has ended
            os.sched_setaffinity(tid, mask)
