"""The event cap: sized from the memory the kernel says is available and
from the run's length, never a constant; /proc/meminfo parsed from the
fixture roots of real machines. And the events as the probe hands them over
apart from its envelope (read_events)."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

from quietcore.errors import CommandError
from quietcore.facts.memory import available_bytes, parse_meminfo
from quietcore.facts.root import Root
from quietcore.probes.noise import BYTES_PER_EVENT, EVENT_CAP, MAX_EVENT_RATE, event_cap, read_events
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


def _memfd(data: bytes) -> int:
    fd = os.memfd_create("quietcore-test", os.MFD_CLOEXEC)
    os.write(fd, data)
    return fd


def _result(counts: list[int], size: int, order: str = "little") -> dict[str, object]:
    return {"events_binary": {"fd": 3, "bytes": size, "byte_order": order},
            "cpus": [{"cpu": 4 + k, "events_recorded": n, "events": []} for k, n in enumerate(counts)]}  # fmt: skip


def test_events_apart_from_the_envelope_are_each_cpus_starts_then_durations() -> None:
    # CPU 4: two events, CPU 5: one; each CPU's starts, then its durations
    values = np.array([10.0, 20.0, 1.5, 2.5, 7.0, 3.25])
    for order, dtype in (("little", "<f8"), ("big", ">f8")):
        fd = _memfd(values.astype(dtype).tobytes())
        try:
            events = read_events(fd, _result([2, 1], 48, order))
        finally:
            os.close(fd)
        assert list(events) == [4, 5]
        assert events[4][0].tolist() == [10.0, 20.0] and events[4][1].tolist() == [1.5, 2.5]
        assert events[5][0].tolist() == [7.0] and events[5][1].tolist() == [3.25]
        assert events[4][0].dtype == np.float64 and events[4][0].dtype.isnative


def test_events_the_file_and_the_envelope_disagree_on_are_refused() -> None:
    fd = _memfd(np.zeros(6).tobytes())
    try:
        assert read_events(fd, {"cpus": [{"cpu": 0, "events": [[1.0, 2.0]]}]}) == {}  # pairs in the JSON: not here
        for result, said in ((_result([2, 1], 40), "48 bytes of events where its envelope says 40"),
                             (_result([2, 2], 48), "48 bytes of events where its envelope says 48 for 4 events"),
                             (_result([2, 1], 48, "middle"), "byte order 'middle' (valid: little, big)")):  # fmt: skip
            with pytest.raises(CommandError, match=re.escape(said)):
                read_events(fd, result)
    finally:
        os.close(fd)
