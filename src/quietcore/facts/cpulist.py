"""CPU lists and masks in the kernel's formats.

Lists: "0-3,8-11", and the grouped form "0-31:2/8" (the first 2 of every 8),
as Documentation/admin-guide/kernel-parameters.rst describes. Masks: hex
words of 32 bits separated by commas, most significant first
("ffffffff,00000001"), as in /proc/irq/*/smp_affinity.
"""

from __future__ import annotations

import itertools
import re
import statistics
from collections.abc import Sequence

_ITEM = re.compile(r"^(\d+)(?:-(\d+)(?::(\d+)/(\d+))?)?$")
MAX_CPUS = 1 << 16


def parse_cpulist(text: str) -> frozenset[int]:
    """Parse a CPU list; raise ValueError naming what is malformed."""
    text = text.strip()
    if not text:
        return frozenset()
    cpus: set[int] = set()
    for item in text.split(","):
        match = _ITEM.match(item.strip())
        if not match:
            raise ValueError(f"malformed CPU list item {item!r}")
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
        used = int(match.group(3)) if match.group(3) is not None else 1
        group = int(match.group(4)) if match.group(4) is not None else 1
        if last < first or last >= MAX_CPUS:
            raise ValueError(f"bad CPU range {item!r}")
        if group == 0 or used == 0 or used > group:
            raise ValueError(f"bad CPU group {item!r} (used/group with 0 < used <= group)")
        cpus.update(c for c in range(first, last + 1) if (c - first) % group < used)
    return frozenset(cpus)


def format_cpulist(cpus: frozenset[int] | set[int] | list[int]) -> str:
    """The shortest kernel-style list: ranges for runs of consecutive CPUs."""
    ordered = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


#: Past this many characters a CPU list is told in brief (`brief_cpulist`).
BRIEF_WIDTH = 40


def brief_cpulist(cpus: frozenset[int] | set[int] | list[int], width: int = BRIEF_WIDTH) -> str:
    """A CPU list a table cell holds: the kernel's list while it is short; else
    "0-382 every 2nd (192)" or "6-378, 134 of them (6,10,14,...)". At 384 CPUs
    the kernel's list of every other CPU was 712 characters."""
    ordered = sorted(set(cpus))
    full = format_cpulist(ordered)
    if len(full) <= width:
        return full
    span, n, step = f"{ordered[0]}-{ordered[-1]}", len(ordered), _step(ordered)
    return f"{span} every {step} ({n})" if step else f"{span}, {n} of them ({_head(full, width)},...)"


def cpus_phrase(cpus: frozenset[int] | set[int] | list[int], width: int = BRIEF_WIDTH) -> str:
    """brief_cpulist in a sentence: "CPU 3", "CPUs 0-15,32-47", "192 CPUs, 0-382
    every 2nd", "134 CPUs in 6-378 (6,10,14,...)"."""
    ordered = sorted(set(cpus))
    full = format_cpulist(ordered)
    if len(ordered) == 1:
        return f"CPU {full}"
    if len(full) <= width:
        return f"CPUs {full}"
    span, n, step = f"{ordered[0]}-{ordered[-1]}", len(ordered), _step(ordered)
    return f"{n} CPUs, {span} every {step}" if step else f"{n} CPUs in {span} ({_head(full, width)},...)"


def figure_range(values: Sequence[float], fmt: str) -> str:
    """A figure over many CPUs, in a line said once for them all: "12" where each reads 12, else
    "10,000-10,383" (`fmt` as format() takes it)."""
    low, high = format(min(values), fmt), format(max(values), fmt)
    return low if low == high else f"{low}-{high}"


def figure_spread(values: Sequence[float], fmt: str) -> str:
    """A figure over a group of CPUs, in a table's cell: "min / median / max"."""
    return " / ".join(format(v, fmt) for v in (min(values), statistics.median(values), max(values)))


def _step(ordered: list[int]) -> str | None:
    """ "2nd", "4th": the one stride of CPUs evenly spaced; None otherwise."""
    steps = {b - a for a, b in itertools.pairwise(ordered)}
    if len(steps) != 1:
        return None
    return ordinal(steps.pop())


def ordinal(n: int) -> str:
    """2nd, 3rd, 4th, 11th, 21st, 32nd."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def counted(n: int, word: str, many: str | None = None) -> str:
    """ "1 package", "2 packages", "1 IRQ", "3 IRQs"; `many` where the plural is not the word and an s."""
    return f"{n:,} {word if n == 1 else many or word + 's'}"


def _head(full: str, width: int) -> str:
    return full[: width - 16].rsplit(",", 1)[0]


def parse_cpumask(text: str) -> frozenset[int]:
    """Parse a hex mask with optional comma-separated 32-bit groups."""
    words = text.strip().split(",")
    cpus: set[int] = set()
    bit_base = 0
    for word in reversed(words):
        word = word.strip()
        if not word or not re.fullmatch(r"[0-9a-fA-F]{1,8}", word):
            raise ValueError(f"malformed CPU mask {text.strip()!r}")
        value = int(word, 16)
        cpus.update(bit_base + b for b in range(32) if value >> b & 1)
        bit_base += 32
    return frozenset(cpus)


def format_cpumask(cpus: frozenset[int] | set[int]) -> str:
    """The kernel's hex mask format: 32-bit words, most significant first,
    separated by commas ("ffffffff,00000001"), as /proc/irq/N/smp_affinity
    takes it."""
    value = sum(1 << c for c in set(cpus))
    words = []
    while True:
        words.append(value & 0xFFFFFFFF)
        value >>= 32
        if not value:
            break
    head = f"{words[-1]:x}"
    return ",".join([head, *(f"{w:08x}" for w in reversed(words[:-1]))])
