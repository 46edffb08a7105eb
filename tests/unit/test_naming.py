"""Periodic sources are named from what the CPU's own counters saw, on the
real counter deltas of a 10 s noise run on this 2-vCPU KVM guest (LOC about
366/s on CPU 0 and 387/s on CPU 1 over the counters' window, no device
interrupt near 1,000/s)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from quietcore.attribution.counters import snapshot
from quietcore.attribution.naming import Rates, name_source
from quietcore.facts.root import Root
from quietcore.report.sources import NOTES, basis, label, notes
from quietcore.runs.analysis import (
    AT_TICK_RATE,
    DEVICE,
    OPEN,
    OUTSIDE,
    SECOND,
    SLICES,
    TICK,
    TICK_MULTIPLE,
    TICK_TIMER,
    TURNS,
    Named,
    named_of,
    same_frequency,
)
from quietcore.stats.periodicity import PeriodicSource

COUNTERS = Path(__file__).parent.parent / "fixtures" / "counters" / "kvm-2cpu"
SPAN_S = 10.0


def rates(cpu: int) -> Rates:
    return Rates.of(cpu, snapshot(Root(COUNTERS / "before")), snapshot(Root(COUNTERS / "after")), SPAN_S)


def src(hz: float) -> PeriodicSource:
    return PeriodicSource(hz, 1e9 / hz, 9708, 10001, 0.97, 100.0, 19.4e3)


def test_the_fixture_holds_this_vms_real_deltas() -> None:
    assert rates(0).per_s["LOC"] == pytest.approx(365.7)
    assert rates(1).per_s["LOC"] == pytest.approx(386.7)
    fastest = rates(0).fastest()
    assert fastest is not None and fastest[0] == "LOC" and fastest[1] == pytest.approx(365.7)


def test_the_tick_is_named_only_where_loc_was_counted_at_its_rate() -> None:
    named = name_source(src(250.0), 250, rates(0), virtualized=True)
    assert (named.kind, named.label, named.by, named.counter, round(named.rate)) == (TICK, "the tick", "counters",
                                                                                      "LOC", 366)  # fmt: skip
    assert basis(named) == "counted: LOC 366/s"
    # The same source on a CPU whose counters saw no LOC at all is not the guest's tick.
    quiet = Rates({"CAL": 3.0}, {"CAL": "Function call interrupts"})
    assert name_source(src(250.0), 250, quiet, virtualized=True).kind == OUTSIDE


def test_a_source_faster_than_every_counted_interrupt_is_the_host_on_a_vm() -> None:
    """The issue's case: 1,000 Hz, 4 x CONFIG_HZ, while LOC ran at about 257-387/s."""
    named = name_source(src(1000.01), 250, rates(0), virtualized=True)
    assert (named.kind, named.label, named.why, named.host) == (OUTSIDE, "the host", "faster", True)
    assert basis(named) == "faster than any counter (LOC 366/s)"
    assert notes([named]) == [NOTES["faster"]]
    bare = name_source(src(1000.01), 250, rates(0), virtualized=False)
    assert bare.label == "firmware or SMIs" and not bare.host
    assert notes([bare]) == [NOTES["faster"], NOTES["firmware"]] and "perf stat -e msr/smi/" in NOTES["firmware"]


def test_a_multiple_of_the_tick_counted_as_such_keeps_its_name() -> None:
    busy = Rates({"LOC": 1002.0}, {"LOC": "Local timer interrupts"})
    named = name_source(src(1000.01), 250, busy, virtualized=True)
    assert (named.kind, named.label, basis(named)) == (TICK_MULTIPLE, "timers at 4x the tick's rate",
                                                       "counted: LOC 1,002/s")  # fmt: skip


def test_a_device_is_named_by_its_counted_rate() -> None:
    nic = Rates({"LOC": 250.0, "45": 99.0}, {"LOC": "Local timer interrupts", "45": "eth0-rx-0"})
    named = name_source(src(100.0), 250, nic, virtualized=False)
    assert (named.kind, named.label, basis(named)) == (DEVICE, "IRQ 45 (eth0-rx-0)", "counted: IRQ 45 99/s")
    # Without such a device, a 100 Hz source LOC has room for (366/s beside a 250 Hz tick) is named by what
    # could hold it, and on what: every source gets a name and its basis.
    named = name_source(src(100.0), 250, rates(0), virtualized=True)
    assert (named.kind, named.label, basis(named)) == (OPEN, "not named", "could be LOC's 116/s beyond the tick")
    assert notes([named]) == [NOTES[OPEN]]


def test_a_rate_no_counter_has_room_for_is_the_hosts() -> None:
    """This guest's 100 Hz train, unnamed before: LOC 259/s beside a 250 Hz tick, nothing else at 100/s."""
    guest = Rates({"LOC": 259.0, "RES": 3.0, "CAL": 1.0}, {"LOC": "Local timer interrupts"})
    named = name_source(src(100.0), 250, guest, virtualized=True)
    assert (named.kind, named.label, named.why, basis(named)) == (OUTSIDE, "the host", "no-room",
                                                                  "no counter has room (LOC 259/s)")  # fmt: skip
    metal = name_source(src(100.0), 250, guest, virtualized=False)
    assert metal.label == "firmware or SMIs" and NOTES["firmware"] in notes([metal])


def test_a_second_train_at_the_ticks_rate_is_not_the_tick() -> None:
    """The GPU node's CPUs each had two 250 Hz trains, both named the tick; LOC counted one a tick."""
    from quietcore.attribution.naming import second_at_tick

    gpu = Rates({"LOC": 237.0}, {"LOC": "Local timer interrupts"})
    named = second_at_tick(250, gpu, virtualized=True)
    assert (named.kind, named.label, named.why, basis(named)) == (OUTSIDE, "the host", "tick-rate",
                                                                  "one tick only (LOC 237/s)")  # fmt: skip
    busy = Rates({"LOC": 510.0}, {"LOC": "Local timer interrupts"})
    named = second_at_tick(250, busy, virtualized=True)
    assert (named.kind, named.label) == (AT_TICK_RATE, "a guest timer at the tick's rate")


def test_once_a_second_unless_a_device_was_counted_often_enough_at_that_rate() -> None:
    # CPU 1 counted 8 virtio3-tx interrupts in the 10 s: too few to call a 1 Hz source that device.
    assert rates(1).per_s["42"] == pytest.approx(0.8)
    assert name_source(src(1.0), 250, rates(1), virtualized=True).kind == SECOND


@pytest.mark.parametrize(("hz", "words"), [(125.0, "a timer on every 2nd tick"), (62.5, "a timer on every 4th tick")])
def test_a_source_at_a_fraction_of_the_tick_is_named_in_english(hz: float, words: str) -> None:
    named = name_source(src(hz), 250, rates(0), virtualized=True)
    assert (named.kind, named.label) == (TICK_TIMER, words)


def test_each_name_has_one_kind_whatever_its_cpu_counted() -> None:
    """A source's key leaves out what its CPU counted, so that simulate can take one source from every
    CPU and the screen says it once: CPU 0 and CPU 1 of the fixture counted LOC at 366/s and 387/s, and
    every kind of source keeps one key."""
    busy = {cpu: Rates({**rates(cpu).per_s, "45": 99.0 + cpu, "LOC": 1002.0 + cpu},
                       {**rates(cpu).names, "45": "eth0-rx-0"}) for cpu in (0, 1)}  # fmt: skip
    cases = [(src(250.0), rates), (src(1000.01), rates), (src(1000.01), busy.__getitem__), (src(125.0), rates),
             (src(100.0), busy.__getitem__), (src(1.0), rates)]  # fmt: skip
    keys, differ = [], []
    for source, at in cases:
        named = [name_source(source, 250, at(cpu), virtualized=True) for cpu in (0, 1)]
        differ.append(named[0] != named[1])
        (key,) = {n.key for n in named}
        keys.append(key)
    assert keys == [
        (TICK, "the tick"), (OUTSIDE, "the host"), (TICK_MULTIPLE, "timers at 4x the tick's rate"),
        (TICK_TIMER, "a timer on every 2nd tick"), (DEVICE, "IRQ 45 (eth0-rx-0)"),
        (SECOND, "a 1 s timer (vmstat and the like)"),
    ]  # fmt: skip
    assert differ == [True, True, True, True, True, True]  # each carries its CPU's count
    assert same_frequency(249.0, 250.0) and not same_frequency(244.0, 250.0)


def test_no_name_twice_on_a_cpu() -> None:
    """Two untraced trains at 100 Hz on this guest's CPU 1 (20 and 2 µs each) are two sources."""
    from quietcore.attribution.noise import distinct

    host = Named(OUTSIDE, "the host", "trace", None, 996, 996, why="untraced", host=True)
    periodic: list[dict[str, Any]] = [{"frequency_hz": 100.0, "named": host.to_json()},
                                      {"frequency_hz": 99.99, "named": {**host.to_json(), "held": 976, "of": 976}},
                                      {"frequency_hz": 20.0, "name": None}]  # fmt: skip
    distinct(periodic)
    second = named_of(periodic[1])
    assert second is not None and second.train == 2 and label(second) == "the host, 2nd train"
    assert basis(second) == "untraced, 976 of 976 gaps" and named_of(periodic[2]) is None


def test_a_job_on_every_cpu_is_one_busy_line() -> None:
    """A rank a CPU on 64 CPUs: one line, not 64 (check's UNKNOWN line joined them all)."""
    from quietcore.attribution.busy import lines

    busy = {str(c): [{"pid": 4000 + c, "tid": 4000 + c, "comm": "xhpl", "share": 0.48 + c % 9 / 100}]
            for c in range(64)}  # fmt: skip
    assert lines({"busy": busy}, why=False) == [
        "CPUs 0-63 were shared: xhpl (64 processes) ran 48-56% of each. A task is work, not noise."
    ]
    two = {"busy": {"1": [{"pid": 705, "tid": 705, "comm": "python3", "share": 0.54}]}}
    assert lines(two) == [
        "CPU 1 was shared: python3 (pid 705) ran 54% of its time. A task is work, not noise. Its time slices are "
        "left out of the periodic sources."
    ]


def test_names_the_trace_gave_are_kept_when_analysed_again() -> None:
    """`results analyse` has no trace text: a second untraced train's name was not known as the trace's,
    and got the counters' name (seen in CI)."""
    from quietcore.attribution.noise import traced_names

    tick = Named(TICK, "the tick", "trace", "local_timer", 73, 75, config_hz=250).to_json()
    host = Named(OUTSIDE, "the host", "trace", None, 30, 30, why="untraced", host=True).to_json()
    stored: dict[str, Any] = {"cpus": [{"cpu": 1, "periodic": [
        {"frequency_hz": 250.0, "median_duration_ns": 16e3, "named": tick},
        {"frequency_hz": 100.0, "median_duration_ns": 10e3, "named": host},
        {"frequency_hz": 100.0, "median_duration_ns": 15.3e3, "named": {**host, "train": 2}},
    ]}]}  # fmt: skip
    counted = Named(OUTSIDE, "the host", "counters", counter="LOC", rate=250.0, why="no-room", host=True).to_json()
    again: dict[str, Any] = {"cpus": [{"cpu": 1, "periodic": [
        {"frequency_hz": 250.0, "median_duration_ns": 16e3,
         "named": Named(TICK, "the tick", "counters", counter="LOC", rate=250.0).to_json()},
        {"frequency_hz": 100.0, "median_duration_ns": 10e3, "named": counted},
        {"frequency_hz": 100.0, "median_duration_ns": 15.3e3, "named": counted},
    ]}]}  # fmt: skip
    traced_names(again, stored)
    assert [named_of(p) for p in again["cpus"][0]["periodic"]] == [named_of(p) for p in stored["cpus"][0]["periodic"]]


def test_a_train_of_time_slices_the_probe_was_preempted_for_is_a_task_not_the_tick() -> None:
    """The GPU node's CPU 0 in a check: 250 Hz x 4 ms over 66 of 126 periods, the probe preempted 65 times
    (the account: "preempted by another task", 99 %), was named the tick because LOC ran at 250/s; and at
    125 Hz in the next run, "every 2nd tick"."""
    turns = PeriodicSource(250.0, 4e6, 66, 126, 6e3, 4.015e6, 66 * 4.015e6)
    named = name_source(turns, 250, rates(0), virtualized=True, preempted=65)
    assert (named.kind, named.label, basis(named)) == (TURNS, SLICES, "the probe preempted 65 times")
    half = PeriodicSource(125.0, 8e6, 38, 63, 24.5e3, 4.009e6, 38 * 4.009e6)
    assert name_source(half, 250, rates(0), virtualized=True, preempted=62).key == named.key
    # not without the preemptions to hold it, nor for gaps shorter than a slice: the tick stays the tick
    assert name_source(turns, 250, rates(0), virtualized=True, preempted=40).kind == TICK
    # nor for a task that takes too little of the CPU to be sharing it: 1 ms in 10 is noise
    intruder = PeriodicSource(100.0, 1e7, 995, 1000, 50.0, 1e6, 995 * 1e6)
    assert name_source(intruder, 250, rates(0), virtualized=True, preempted=1000).kind != TURNS
    tick = PeriodicSource(250.0, 4e6, 2480, 2500, 100.0, 16e3, 2480 * 16e3)
    assert name_source(tick, 250, rates(0), virtualized=True, preempted=5000).kind == TICK


def test_a_name_stored_as_a_sentence_is_read_as_data() -> None:
    """Sessions and references stored before names were data keep what they found: the sentence is read
    once into a Named (runs.analysis.legacy_name)."""
    from quietcore.runs.analysis import legacy_name

    tick = legacy_name("the scheduler tick, CONFIG_HZ=250 (traced: local_timer in 2,404 of 2,479 gaps)")
    assert (tick.kind, tick.by, tick.event, tick.held, tick.of, tick.config_hz) == (TICK, "trace", "local_timer",
                                                                                    2404, 2479, 250)  # fmt: skip
    host = legacy_name(
        "outside the guest kernel: untraced, a second train at 100 Hz (no traced event in 875 of "
        "875 gaps): the host (its timer or its scheduling of this vCPU), unseen from inside the VM"
    )
    assert (host.kind, host.label, host.why, host.held, host.train, host.host) == (OUTSIDE, "the host", "untraced",
                                                                                   875, 2, True)  # fmt: skip
    faster = legacy_name("outside the guest kernel: faster than any interrupt this CPU counted (the most was LOC "
                         "(Local timer interrupts) at 237/s): the host (its timer or its scheduling of this vCPU), "
                         "unseen from inside the VM")  # fmt: skip
    assert (faster.why, faster.counter, faster.rate) == ("faster", "LOC", 237.0)
    assert legacy_name("IRQ 45 (eth0-rx-0), counted at 99/s on this CPU").kind == DEVICE
    assert legacy_name(f"{SLICES} (the probe was preempted 65 times on this CPU: a task shared it)").kind == TURNS


def test_a_cpu_whose_source_is_a_tasks_turns_is_busy_for_check() -> None:
    """check says UNKNOWN, and --slurm-drain drains nothing, where a task shared a measured CPU: seen by
    its thread (busy), or, where the two looks missed the thread, by a train named its time slices (the
    GPU node's CPU 0 in a check failed for "a new source" at 250 Hz x 4 ms)."""
    from quietcore.attribution.busy import sliced

    turns = {"frequency_hz": 250.0, "median_duration_ns": 4.0e6,
             "named": Named(TURNS, SLICES, "counters", held=65).to_json()}  # fmt: skip
    tick = {
        "frequency_hz": 250.0,
        "median_duration_ns": 9e3,
        "name": "the scheduler tick, CONFIG_HZ=250 (LOC 250/s)",
    }  # a name stored before names were data
    analysis = {"cpus": [{"cpu": 0, "periodic": [turns]}, {"cpu": 1, "periodic": [tick, {"name": None}]},
                         {"cpu": 7, "periodic": [tick, turns]}]}  # fmt: skip
    assert sliced(analysis) == [0, 7]
    assert sliced({"cpus": [{"cpu": 1, "periodic": [tick]}]}) == [] and sliced({}) == []
