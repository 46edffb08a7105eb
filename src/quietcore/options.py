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


def rt_guard(policy: str, cpus: frozenset[int], online: frozenset[int], force: bool) -> None:
    """A real-time spinner on every online CPU leaves the kernel's own work
    nowhere to run; refused unless --force (the native core checks too)."""
    if policy in ("fifo", "rr") and cpus >= online and not force:
        raise UsageError(
            f"refusing --policy {policy} on every online CPU ({format_cpulist(online)}): leave one free, or add --force"
        )


def tags_option(items: list[str] | None) -> dict[str, str]:
    tags: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"invalid --tag {item!r} (expected KEY=VALUE)")
        tags[key.strip()] = value.strip()
    return tags
