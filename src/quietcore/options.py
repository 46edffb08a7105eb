"""Validating option values once, before anything runs (after hyperfine):
each error names the option and what would be valid."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

from quietcore.errors import UsageError
from quietcore.facts.cpulist import format_cpulist, parse_cpulist
from quietcore.sched import PRIORITY_MAX, PRIORITY_MIN, RT, check_policy, check_priority, is_rt

T = TypeVar("T", int, float)


#: What a CPU list is held to: an audit or a plan (maybe of a snapshot) to the node's
#: online CPUs; a measurement to those this process may run on (USABLE).
ONLINE = "an online CPU"
USABLE = "a CPU this process may run on"


def usable_cpus(online: frozenset[int]) -> frozenset[int]:
    """The CPUs a measurement here may use: online, and in this process' affinity
    (a cgroup cpuset or taskset narrows it). The native core holds its --cpus to
    the same rule (sched_getaffinity, which the kernel keeps within the active
    CPUs) and refuses in the same words, so neither accepts what the other refuses."""
    return online & frozenset(os.sched_getaffinity(0))


def cpus_option(text: str, online: frozenset[int], option: str = "--cpus", what: str = ONLINE) -> frozenset[int]:
    valid = format_cpulist(online)
    try:
        cpus = parse_cpulist(text)
    except ValueError:
        raise UsageError(f"invalid {option} {text!r}: expected a CPU list like 0-3,8 (valid: {valid})") from None
    if not cpus:
        raise UsageError(f"invalid {option} {text!r}: no CPUs given (valid: {valid})")
    outside = cpus - online
    if outside:
        raise UsageError(f"invalid {option} {format_cpulist(outside)}: not {what} (valid: {valid})")
    return cpus


def _shown(x: float) -> str:
    """A bound as a user would type it: 1048576, 10000000 and 0.001, not 1.04858e+06."""
    return f"{int(x)}" if float(x).is_integer() else f"{x:g}"


def _in_range(text: str, option: str, lo: T, hi: T, convert: Callable[[str], T]) -> T:
    valid = f"(valid: {_shown(lo)}-{_shown(hi)})"
    try:
        value = convert(text)
    except ValueError:
        raise UsageError(f"invalid {option} {text!r} {valid}") from None
    # `not (lo <= value <= hi)` also refuses NaN.
    if not (lo <= value <= hi):
        raise UsageError(f"invalid {option} {text!r} {valid}")
    return value


def positive_float(text: str, option: str, lo: float, hi: float) -> float:
    return _in_range(text, option, lo, hi, float)


def int_in_range(text: str, option: str, lo: int, hi: int) -> int:
    return _in_range(text, option, lo, hi, int)


def ranks_option(text: str, option: str, hi: int) -> list[int]:
    """'1k,10k,100k' -> [1000, 10000, 100000], each 1 to hi, sorted and once each."""
    out = []
    for item in text.split(","):
        item = item.strip().lower()
        scale = {"k": 1_000, "m": 1_000_000}.get(item[-1:], 1)
        digits = item[:-1] if scale > 1 else item
        n = int(digits) * scale if digits.isdigit() else 0
        if not 1 <= n <= hi:
            raise UsageError(f"invalid {option} {text!r}: {item!r} (valid: whole numbers of ranks from 1 to "
                             f"{hi:,}, with k and M, comma-separated)")  # fmt: skip
        out.append(n)
    return sorted(set(out))


def positive_floats_option(text: str, option: str, hi: float) -> list[float]:
    """'10,100,1000' -> [10.0, 100.0, 1000.0], each above 0 and at most hi."""
    try:
        values = [float(x) for x in text.split(",")]
    except ValueError:
        values = []
    if not values or not all(0 < v <= hi for v in values):
        raise UsageError(f"invalid {option} {text!r} (valid: positive numbers up to {hi:g}, comma-separated)")
    return sorted(set(values))


def sched_option(policy: str, priority_text: str, cpus: frozenset[int], online: frozenset[int], force: bool) -> int:
    """The priority for a policy, checked before anything is opened or
    measured (the native core checks the same again): 1-99 with fifo and rr
    (0 means the lowest, 1), 0 otherwise. A real-time spinner on every
    online CPU leaves the kernel's own work nowhere to run, so it is refused
    unless --force."""
    check_policy(policy, "--policy")
    priority = check_priority(priority_text, "--priority", zero=True)
    if not is_rt(policy):
        if priority:
            valid = f"0; {PRIORITY_MIN}-{PRIORITY_MAX} with {' or '.join(RT)}"
            raise UsageError(f"invalid --priority {priority} with --policy {policy} (valid: {valid})")
        return 0
    if cpus >= online and not force:
        raise UsageError(
            f"refusing --policy {policy} on every online CPU ({format_cpulist(online)}): leave one free, or add --force"
        )
    return priority or 1


#: The measured length any probe accepts: 1 ms to a day.
DURATION_S = (0.001, 86400.0)


def duration_option(
    text: str, option: str = "--duration", lo: float = DURATION_S[0], hi: float = DURATION_S[1]
) -> float:
    return positive_float(text, option, lo, hi)


def cpu_pair_option(text: str, online: frozenset[int], option: str = "--cpus", what: str = ONLINE) -> list[int]:
    """One CPU A, or two as A,B, in the order given: the order means
    something (from A to B), so it is not a set."""
    parts = text.split(",")
    if not 1 <= len(parts) <= 2 or not all(p.strip().isdigit() for p in parts):
        raise UsageError(f"invalid {option} {text!r}: one CPU A, or two as A,B (valid CPUs: {format_cpulist(online)})")
    cpus = [min(cpus_option(p, online, option, what)) for p in parts]
    if len(set(cpus)) != len(cpus):
        raise UsageError(f"invalid {option} {text!r}: A and B must differ")
    return cpus


def tags_option(items: list[str] | None) -> dict[str, str]:
    tags: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"invalid --tag {item!r} (expected KEY=VALUE)")
        tags[key.strip()] = value.strip()
    return tags
