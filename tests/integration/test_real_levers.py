"""Levers on this node's real settings: THP and IRQ affinity really change
and really come back, through the journal. Here and not among the unit
tests, which run while the suite's sched experiment measures a CPU (the
changes would reach it)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from quietcore.facts.root import Root
from quietcore.levers.irq import IrqAffinityLever
from quietcore.levers.journal import Journal
from quietcore.levers.thp import BASE, ThpLever

THP = Path("/") / BASE


@pytest.fixture
def real_thp() -> Iterator[str]:
    """This node's THP setting, put back after the test whatever happens."""
    if os.geteuid() != 0 or not (THP / "enabled").exists():
        pytest.skip("needs root and transparent huge pages")
    original = ThpLever("enabled").read()
    try:
        yield original
    finally:
        (THP / "enabled").write_text(original)


def test_real_thp_is_changed_and_restored(conn: sqlite3.Connection, real_thp: str) -> None:
    lever = ThpLever("enabled")
    other = next(c for c in lever.choices() if c != real_thp)
    with Journal(conn, None) as journal:
        lever.apply(other, journal)
        assert lever.read() == other  # the kernel really took it
    assert lever.read() == real_thp


@pytest.fixture
def real_irqs() -> Iterator[dict[str, str]]:
    """This node's IRQ affinities, written back after the test whatever happens."""
    live = Root("/")
    irqs = [n for n in live.listdir("proc/irq") if n.isdigit() and live.exists(f"proc/irq/{n}/smp_affinity")]
    if os.geteuid() != 0 or len(os.sched_getaffinity(0)) < 2 or not irqs:
        pytest.skip("needs root, two CPUs and movable IRQs")
    saved = {n: live.read_line(f"proc/irq/{n}/smp_affinity") or "" for n in irqs}
    try:
        yield saved
    finally:
        for n, mask in saved.items():
            with contextlib.suppress(OSError):  # one the kernel refused to move in the first place
                live.write(f"proc/irq/{n}/smp_affinity", mask)


def test_real_irqs_move_to_one_cpu_and_back(conn: sqlite3.Connection, real_irqs: dict[str, str]) -> None:
    lever = IrqAffinityLever(Root("/"), online=frozenset(os.sched_getaffinity(0)))
    cpu = min(os.sched_getaffinity(0))
    with Journal(conn, None) as journal:
        lever.apply(str(cpu), journal)
        moved = [n for n in real_irqs if Root("/").read_line(f"proc/irq/{n}/smp_affinity_list") == str(cpu)]
        assert len(moved) + len(lever.refused) >= len([n for n, m in real_irqs.items() if m])
        assert moved, "the kernel took none of the moves"
    after = {n: Root("/").read_line(f"proc/irq/{n}/smp_affinity") for n in real_irqs}
    assert after == real_irqs
