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


def _invalid(what: str, value: str, valid: str, context: str) -> UsageError:
    """One wording for every caller: "[CONTEXT: ]invalid WHAT 'VALUE' (valid: ...)"."""
    return UsageError(f"{context + ': ' if context else ''}invalid {what} {value!r} (valid: {valid})")


def check_policy(value: str, what: str, deadline: bool = False, context: str = "") -> str:
    valid = (*NAMES, DEADLINE) if deadline else NAMES
    if value not in valid:
        raise _invalid(what, value, ", ".join(valid), context)
    return value


def check_priority(text: str, what: str, zero: bool = False, context: str = "") -> int:
    """A real-time priority, PRIORITY_MIN-PRIORITY_MAX; with zero, 0 too
    (the options' "lowest", which the caller turns into PRIORITY_MIN)."""
    lo = 0 if zero else PRIORITY_MIN
    try:
        value = int(text)
    except ValueError:
        raise _invalid(what, text, f"{lo}-{PRIORITY_MAX}", context) from None
    if not lo <= value <= PRIORITY_MAX:
        raise _invalid(what, text, f"{lo}-{PRIORITY_MAX}", context)
    return value
