"""The run-time levers, by the name experiments (and later `tune`) use, in
the order they are applied. Order matters where one knob resets or depends
on another, and undo runs in reverse:

1. THP enabled before defrag: defrag only matters once THP can be used.
2. The governor before anything measured on those CPUs settles.
3. IRQ affinity after the CPU-wide knobs: moving an IRQ is per IRQ and may
   be refused for some, so it should not leave other levers half-done.
4. The shield after the IRQs: it moves them too, with the cpusets and
   threads, and its undo (first) leaves the IRQ lever's values to its own.
5. The preemption model last: switching it (a static-call patch of the
   running kernel) is the most invasive, and the first one undone."""

from __future__ import annotations

from typing import Protocol

from quietcore.actions import Action
from quietcore.facts.root import Root
from quietcore.levers.governor import GovernorLever
from quietcore.levers.irq import IrqAffinityLever
from quietcore.levers.journal import Journal
from quietcore.levers.names import NAMES
from quietcore.levers.preempt import PreemptLever
from quietcore.levers.thp import ThpLever
from quietcore.tune.shield import ShieldLever


class Lever(Protocol):
    name: str

    def available(self) -> tuple[bool, str]: ...

    def choices(self) -> list[str]: ...

    def read(self) -> str: ...

    def validate(self, value: str) -> str | None: ...

    def plan(self, value: str) -> list[Action]: ...

    def apply(self, value: str, journal: Journal) -> None: ...


__all__ = ["NAMES", "Lever", "in_order", "lever"]


def lever(name: str, cpus: frozenset[int], root: Root | None = None) -> Lever:
    """`cpus`: the CPUs a per-CPU lever (the governor) acts on."""
    root = root or Root("/")
    if name == "thp":
        return ThpLever("enabled", root)
    if name == "thp_defrag":
        return ThpLever("defrag", root)
    if name == "governor":
        return GovernorLever(cpus, root)
    if name == "irq_affinity":
        return IrqAffinityLever(root)
    if name == "preempt":
        return PreemptLever(root)
    if name == "shield":
        return ShieldLever(root)
    raise ValueError(f"unknown lever {name!r} (valid: {', '.join(NAMES)})")


def in_order(names: dict[str, str]) -> list[tuple[str, str]]:
    """(lever, value) pairs in the registry's order."""
    return sorted(names.items(), key=lambda item: NAMES.index(item[0]))
