"""Who a quietcore process is, so that another can tell whether it still
runs: its pid together with its start time (field 22 of /proc/PID/stat, in
clock ticks since boot), because a pid alone is reused by the kernel."""

from __future__ import annotations

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
