"""Scheduling policies and priorities (sched(7)): the one place quietcore
names them and checks a priority against them."""

from __future__ import annotations

import os

from quietcore.errors import UsageError

#: The policies a process can be given with sched_setscheduler, by the names
#: quietcore's options and factors use.
POLICIES: dict[str, int] = {"other": os.SCHED_OTHER, "batch": os.SCHED_BATCH, "idle": os.SCHED_IDLE,
                            "fifo": os.SCHED_FIFO, "rr": os.SCHED_RR}  # fmt: skip
NAMES = tuple(POLICIES)
#: SCHED_DEADLINE takes runtime/deadline/period through sched_setattr, which
#: only the native workloads call.
DEADLINE = "deadline"
RT = ("fifo", "rr")
#: sched_get_priority_min/max of SCHED_FIFO and SCHED_RR on Linux.
PRIORITY_MIN, PRIORITY_MAX = 1, 99


def is_rt(policy: str) -> bool:
    return policy in RT


def check_policy(value: str, where: str, deadline: bool = False) -> str:
    valid = (*NAMES, DEADLINE) if deadline else NAMES
    if value not in valid:
        raise UsageError(f"invalid {where} {value!r} (valid: {', '.join(valid)})")
    return value


def check_priority(text: str, where: str) -> int:
    """A real-time priority, PRIORITY_MIN-PRIORITY_MAX."""
    valid = f"valid: {PRIORITY_MIN}-{PRIORITY_MAX}"
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"invalid {where} {text!r} ({valid})") from None
    if not PRIORITY_MIN <= value <= PRIORITY_MAX:
        raise UsageError(f"invalid {where} {text!r} ({valid})")
    return value
