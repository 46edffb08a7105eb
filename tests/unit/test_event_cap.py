"""The event cap: sized from the memory the kernel says is available and
from the run's length, never a constant; /proc/meminfo parsed from the
fixture roots of real machines."""

from __future__ import annotations

from quietcore.facts.memory import available_bytes, parse_meminfo
from quietcore.facts.root import Root
from quietcore.probes.noise import BYTES_PER_EVENT, EVENT_CAP, MAX_EVENT_RATE, event_cap
from tests.conftest import KVM_ROOT


def test_meminfo_in_bytes() -> None:
    info = parse_meminfo("MemTotal:       24576000 kB\nMemAvailable:   20000000 kB\nHugePages_Total:       0\n")
    assert info["MemAvailable"] == 20_000_000 * 1024 and info["HugePages_Total"] == 0
    kvm = available_bytes(Root(KVM_ROOT))
    assert kvm is None or kvm > 0


def test_cap_grows_with_memory_and_shrinks_with_cpus() -> None:
    gib = 2**30
    small, _ = event_cap(2, 1 * gib, 3600)
    big, why = event_cap(2, 16 * gib, 3600)
    assert big == int(16 * gib * 0.25 / (2 * BYTES_PER_EVENT)) and big > 15 * small
    assert small == int(gib * 0.25 / (2 * BYTES_PER_EVENT))
    assert event_cap(128, 16 * gib, 3600)[0] < big
    assert "GiB available" in why


def test_a_short_run_gets_the_buffer_it_can_fill() -> None:
    cap, _ = event_cap(2, 16 * 2**30, 2.0)
    assert cap == 2 * MAX_EVENT_RATE
    assert event_cap(2, 16 * 2**30, 0.01)[0] == EVENT_CAP[0]  # never under the floor


def test_unreadable_meminfo_says_so() -> None:
    cap, why = event_cap(2, None, 3600)
    assert cap == 100_000 and "unreadable" in why
