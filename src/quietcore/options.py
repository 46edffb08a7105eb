"""Validating option values once, before anything runs (after hyperfine):
each error names the option and what would be valid."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from quietcore.errors import UsageError
from quietcore.facts.cpulist import format_cpulist, parse_cpulist

T = TypeVar("T", int, float)


def cpus_option(text: str, online: frozenset[int], option: str = "--cpus") -> frozenset[int]:
    valid = format_cpulist(online)
    try:
        cpus = parse_cpulist(text)
    except ValueError:
        raise UsageError(f"invalid {option} {text!r}: expected a CPU list like 0-3,8 (valid: {valid})") from None
    if not cpus:
        raise UsageError(f"invalid {option} {text!r}: no CPUs given (valid: {valid})")
    outside = cpus - online
    if outside:
        raise UsageError(f"invalid {option} {format_cpulist(outside)}: not an online CPU (valid: {valid})")
    return cpus


def _in_range(text: str, option: str, lo: T, hi: T, convert: Callable[[str], T]) -> T:
    try:
        value = convert(text)
    except ValueError:
        raise UsageError(f"invalid {option} {text!r} (valid: {lo:g}-{hi:g})") from None
    # `not (lo <= value <= hi)` also refuses NaN.
    if not (lo <= value <= hi):
        raise UsageError(f"invalid {option} {text!r} (valid: {lo:g}-{hi:g})")
    return value


def positive_float(text: str, option: str, lo: float, hi: float) -> float:
    return _in_range(text, option, lo, hi, float)


def int_in_range(text: str, option: str, lo: int, hi: int) -> int:
    return _in_range(text, option, lo, hi, int)


def sched_option(policy: str, priority_text: str, cpus: frozenset[int], online: frozenset[int], force: bool) -> int:
    """The priority for a policy, checked before anything is opened or
    measured (the native core checks the same again): 1-99 with fifo and rr
    (0 means the lowest, 1), 0 otherwise. A real-time spinner on every
    online CPU leaves the kernel's own work nowhere to run, so it is refused
    unless --force."""
    priority = int_in_range(priority_text, "--priority", 0, 99)
    if policy not in ("fifo", "rr"):
        if priority:
            raise UsageError(f"invalid --priority {priority} with --policy {policy} (valid: 0; 1-99 with fifo or rr)")
        return 0
    if cpus >= online and not force:
        raise UsageError(
            f"refusing --policy {policy} on every online CPU ({format_cpulist(online)}): leave one free, or add --force"
        )
    return priority or 1


def tags_option(items: list[str] | None) -> dict[str, str]:
    tags: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"invalid --tag {item!r} (expected KEY=VALUE)")
        tags[key.strip()] = value.strip()
    return tags
