"""The run-time levers experiments can set, by the factor name they use."""

from __future__ import annotations

from typing import Protocol

from quietcore.levers.governor import GovernorLever
from quietcore.levers.journal import Journal
from quietcore.levers.preempt import PreemptLever
from quietcore.levers.thp import ThpLever


class Lever(Protocol):
    name: str

    def available(self) -> tuple[bool, str]: ...

    def choices(self) -> list[str]: ...

    def read(self) -> str: ...

    def apply(self, value: str, journal: Journal) -> None: ...


NAMES = ("thp", "thp_defrag", "governor", "preempt")


def lever(name: str, cpus: frozenset[int]) -> Lever:
    if name == "thp":
        return ThpLever("enabled")
    if name == "thp_defrag":
        return ThpLever("defrag")
    if name == "governor":
        return GovernorLever(cpus)
    if name == "preempt":
        return PreemptLever()
    raise ValueError(f"unknown lever {name!r}")
