from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from quietcore.attribution.counters import CounterSnapshot, attribute
from quietcore.facts.procstat import CpuTimes
from quietcore.runs.trace import CpuTrace, NoiseTrace
from quietcore.stats.bootstrap import bootstrap_ci, median_ci


def snap(loc: int, res: int, nvme: int, timer: int, steal: int) -> CounterSnapshot:
    return CounterSnapshot(
        interrupts={"LOC": {1: loc}, "RES": {1: res}, "45": {1: nvme}},
        names={"LOC": "Local timer interrupts", "RES": "Rescheduling interrupts", "45": "nvme0q1"},
        softirqs={"TIMER": {1: timer}},
        cpu_times={1: CpuTimes(1, {"steal": steal})},
    )


def test_counts_costs_and_unexplained() -> None:
    before, after = snap(100, 10, 0, 50, 0), snap(2600, 12, 5, 300, 2)
    a = attribute(1, before, after, lost_ns=100e6, durations_ns=np.array([30e3] * 10 + [300e3] * 3),
                  involuntary=1, user_hz=100, measured_costs={"LOC": (17e3, "measured")}, virtualized=True)  # fmt: skip
    by_name = {s.name: s for s in a.sources}
    loc = by_name["LOC (Local timer interrupts)"]
    assert loc.count == 2500 and loc.estimate_ns == 2500 * 17e3 and loc.basis == "measured"
    assert by_name["45 (nvme0q1)"].kind == "irq" and by_name["45 (nvme0q1)"].count == 5
    assert by_name["softirq TIMER"].count == 250
    assert by_name["steal"].estimate_ns == 20e6  # 2 ticks at USER_HZ=100
    assert by_name["preempted by another task"].estimate_ns == 300e3
    assert a.sources[0].name.startswith("LOC")  # biggest first
    assert a.explained_ns <= a.lost_ns
    assert a.long_gaps == 3
    assert a.verdict.startswith(
        "3 gaps over 100 µs (0.9 ms in all), longer than any interrupt the guest handles; "
        "a guest task preempted the probe 1 time, which leaves 2 to the host preempting this vCPU."
    )


def test_the_host_verdict_reads_with_no_task_preempting() -> None:
    """It read "40 of the 40 gaps ... and more than the 0 times a guest task preempted the probe"."""
    a = attribute(1, snap(0, 0, 0, 0, 0), snap(10, 0, 0, 0, 0), lost_ns=10e6, durations_ns=np.array([200e3] * 40),
                  involuntary=0, user_hz=100, measured_costs={}, virtualized=True)  # fmt: skip
    assert a.verdict.startswith(
        "40 gaps over 100 µs (8.0 ms in all), longer than any interrupt the guest handles; "
        "no guest task preempted the probe: the host preempted this vCPU."
    )
    assert " 0 times" not in a.verdict and "of the 40" not in a.verdict


def test_the_counts_window_is_the_snapshots_and_rates_use_it() -> None:
    """The counters are read around the probe, start-up and end included: a
    0.5 s check's 171 ticks came over 0.63 s (272/s, not 342/s). The window
    is kept with the attribution, and the check's guest rates divide by it
    (the probe's own preemptions by its measured time)."""
    from dataclasses import replace

    from quietcore.runs.analysis import Attribution

    before, after = replace(snap(0, 0, 0, 0, 0), taken_ns=1_000), replace(snap(171, 0, 0, 0, 0), taken_ns=629_001_000)
    a = attribute(1, before, after, lost_ns=1e6, durations_ns=np.array([]), involuntary=0, user_hz=100,
                  measured_costs={}, virtualized=True)  # fmt: skip
    assert a.counted_ns == 629e6 and Attribution.from_json(a.to_json()).counted_ns == 629e6
    # unknown (two snapshots without a time, as the fixtures above) is None, and so in old runs
    assert attribute(1, snap(0, 0, 0, 0, 0), snap(1, 0, 0, 0, 0), lost_ns=1e6, durations_ns=np.array([]),
                     involuntary=0, user_hz=100, measured_costs={}, virtualized=True).counted_ns is None  # fmt: skip
    assert Attribution.from_json({"lost_ns": 1.0}).counted_ns is None


def test_bare_metal_verdict() -> None:
    a = attribute(1, snap(0, 0, 0, 0, 0), snap(10, 0, 0, 0, 0), lost_ns=1e6, durations_ns=np.array([]), involuntary=0,
                  user_hz=100, measured_costs={}, virtualized=False)  # fmt: skip
    assert "try a tracer" in a.verdict


def test_bootstrap_is_seeded_and_brackets_the_median() -> None:
    values = [10.0, 11.0, 9.0, 12.0, 10.5, 9.5, 11.5]
    assert bootstrap_ci(values) == bootstrap_ci(values)
    low, high = bootstrap_ci(values)
    assert low <= 10.5 <= high
    summary = median_ci(values)
    assert summary["n"] == 7 and summary["median"] == 10.5


def test_steal_is_said_with_its_resolution_never_over_the_time_lost() -> None:
    """A 0.5 s check read "10 ms of steal time, 194% of the time lost": /proc/stat counts 10 ms ticks."""
    from quietcore.report.text import steal_note

    short = {"cpu": 0, "steal_ns": 10e6, "lost_ns": 5.15e6, "measured_ns": 0.5e9}
    assert steal_note(short) == (
        "CPU 0: the hypervisor counted 1 tick of steal, 10 ms. It counts in 10 ms ticks, too coarse to say what "
        "the host took in 0.5 s."
    )
    long = {"cpu": 1, "steal_ns": 130e6, "lost_ns": 120e6, "measured_ns": 10e9}
    assert steal_note(long) == (
        "CPU 1: the hypervisor counted 130 ms of steal, as much as all the time lost, give or take a 10 ms tick. "
        "That is the host's noise."
    )
    assert "75% of the time lost" in (steal_note(long | {"steal_ns": 90e6}) or "")
    assert steal_note(long | {"steal_ns": 10e6}) is None and steal_note(long | {"steal_ns": None}) is None


def test_a_counts_estimate_is_of_the_measured_time_not_the_counters_window() -> None:
    """A 0.5 s check's counters came over 0.63 s: its 171 LOC, priced at the tick's measured
    16 µs, are 136 in the measured time, and the account shows those beside the estimate."""
    from dataclasses import replace

    from quietcore.report.account import account
    from quietcore.runs.analysis import CpuAnalysis

    before, after = replace(snap(0, 0, 0, 0, 0), taken_ns=1_000), replace(snap(171, 0, 0, 0, 0), taken_ns=629_001_000)
    a = attribute(1, before, after, lost_ns=5e6, durations_ns=np.array([]), involuntary=0, user_hz=100,
                  measured_costs={"LOC": (16e3, "measured")}, virtualized=True, measured_ns=500e6)  # fmt: skip
    (loc,) = a.sources
    assert loc.count == 171 and loc.estimate_ns == pytest.approx(171 * 500 / 629 * 16e3)
    shown = account(CpuAnalysis.from_json({"cpu": 1, "attribution": a.to_json()}), None, 5e6, 0, 0.0, 500e6)
    assert shown is not None and shown.rows[0].count == 136
    assert shown.rows[0].ns == pytest.approx(136 * 16e3, rel=0.01)


def test_a_runs_analysis_spread_over_processes_is_the_one_done_in_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each CPU's analysis is its own: spread over a process per CPU here once a run has
    PARALLEL_FROM CPUs, it gives what it gives in turn, in the same order."""
    import os

    from quietcore.attribution import noise
    from quietcore.runs.trace import CpuTrace, NoiseTrace

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU to run on: the analysis is not spread")
    rng = np.random.default_rng(7)
    cpus = []
    for cpu in range(noise.PARALLEL_FROM):
        starts = np.sort(np.concatenate([np.arange(1e5 * cpu, 2e9, 4e6), rng.uniform(0, 2e9, 50)]))
        durations = np.where(rng.random(starts.size) < 0.9, 16e3, rng.uniform(1e3, 300e3, starts.size))
        cpus.append(CpuTrace(cpu, starts, durations, 0.0, 2e9, float(durations.sum()), 0, 0))
    trace = NoiseTrace(tuple(cpus), 500.0)
    n = noise.PARALLEL_FROM
    seen: list[int] = []
    spread = noise.analyze(trace, snap(0, 0, 0, 0, 0), snap(500, 0, 0, 0, 0), config_hz=250, virtualized=True,
                           user_hz=100, on_cpu=seen.append)  # fmt: skip
    monkeypatch.setattr(noise, "PARALLEL_FROM", 10**6)
    in_turn = noise.analyze(trace, snap(0, 0, 0, 0, 0), snap(500, 0, 0, 0, 0), config_hz=250, virtualized=True,
                            user_hz=100)  # fmt: skip
    assert spread == in_turn and seen == list(range(n))
    assert all(c["periodic"] for c in in_turn["cpus"])  # the 250 Hz train found on each


def _twelve_cpus(rng: np.random.Generator, random: int, own: int) -> NoiseTrace:
    """12 CPUs of 2 s, each with a 250 Hz x 16 µs tick (phase-shifted a CPU) and `random` gaps of
    2-300 µs; CPU `own` has its own 100 Hz x 150 µs train besides."""
    cpus = []
    for cpu in range(12):
        starts = np.concatenate([np.arange(1e5 * cpu, 2e9, 4e6), rng.uniform(0, 2e9, random)])
        durations = np.concatenate([np.full(500, 16e3), rng.uniform(2e3, 300e3, random)])
        if cpu == own:
            starts = np.concatenate([starts, np.arange(3.3e6, 2e9, 10e6)])
            durations = np.concatenate([durations, np.full(200, 150e3)])
        order = np.argsort(starts)
        cpus.append(CpuTrace(cpu, starts[order], durations[order], 0.0, 2e9, float(durations.sum()), 0, 0))
    return NoiseTrace(tuple(cpus), 500.0)


def test_the_cpus_past_the_scouts_search_above_the_nodes_background(monkeypatch: pytest.MonkeyPatch) -> None:
    """Above SCOUTS CPUs, the others search only spectral peaks above the scouts' median strongest peak
    that held no source (the node's background), reported as search_floor: a strong source of one CPU that
    is not a scout (100 Hz x 150 µs on CPU 4 of 12) is still found there, and only there, and the analysis is
    the same in turn and spread (the floor reaches the forked workers)."""
    from quietcore.attribution import noise

    trace = _twelve_cpus(np.random.default_rng(12), random=400, own=4)
    scouts = sorted({round(i * 11 / (noise.SCOUTS - 1)) for i in range(noise.SCOUTS)})
    assert 4 not in scouts
    got = noise.analyze(trace, snap(0, 0, 0, 0, 0), snap(500, 0, 0, 0, 0), config_hz=250, virtualized=True,
                        user_hz=100)  # fmt: skip
    assert got["search_floor"] >= 0 and got["search_floor_light"] >= 0
    assert all(noise.FAILED not in c for c in got["cpus"])
    hundred = [c["cpu"] for c in got["cpus"] if any(abs(p["frequency_hz"] - 100) < 0.1 for p in c["periodic"])]
    assert hundred == [4], hundred
    monkeypatch.setattr(noise, "PARALLEL_FROM", 10**6)
    monkeypatch.setattr(noise, "SCOUTS_PARALLEL_FROM", 10**6)
    assert noise.analyze(trace, snap(0, 0, 0, 0, 0), snap(500, 0, 0, 0, 0), config_hz=250, virtualized=True,
                         user_hz=100) == got  # fmt: skip


def test_the_scouts_search_in_two_waves_and_the_rest_with_all_they_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first FIRST_SCOUTS scouts search with no rate known; the other scouts try the rates those found
    first (a 100 Hz train only the first wave's CPU 0 has, and the 250 Hz all have), with no floor and no
    background passed over; the CPUs past the scouts try every scout's rates, above the floor, passing
    over the scouts' peaks tried in vain."""
    from quietcore.attribution import noise

    trace = _twelve_cpus(np.random.default_rng(3), random=300, own=0)
    calls: list[tuple[int, tuple[float, ...], bool, bool, bool]] = []
    real = noise.analyze_cpu

    def seen(cpu: CpuTrace, *args: Any, **kw: Any) -> dict[str, Any]:
        futile = kw.get("futile", ((), ()))
        calls.append((cpu.cpu, tuple(round(f) for f in kw.get("shared_hz", ())), kw.get("scout", False),
                      kw.get("floor") is not None, bool(futile[0] or futile[1])))  # fmt: skip
        return real(cpu, *args, **kw)

    monkeypatch.setattr(noise, "analyze_cpu", seen)
    monkeypatch.setattr(noise, "PARALLEL_FROM", 10**6)
    monkeypatch.setattr(noise, "SCOUTS_PARALLEL_FROM", 10**6)
    noise.analyze(trace, snap(0, 0, 0, 0, 0), snap(500, 0, 0, 0, 0), config_hz=250, virtualized=True, user_hz=100)
    scouts = sorted({round(i * 11 / (noise.SCOUTS - 1)) for i in range(noise.SCOUTS)})
    first = [c for c in calls if c[0] in scouts][: noise.FIRST_SCOUTS]
    later = [c for c in calls if c[0] in scouts][noise.FIRST_SCOUTS :]
    rest = [c for c in calls if c[0] not in scouts]
    assert [c[0] for c in first] == [0, scouts[len(scouts) // 2]]
    assert all(c[1:] == ((), True, False, False) for c in first)
    assert all(sorted(c[1]) == [100, 250] and c[2:] == (True, False, False) for c in later), later
    assert len(rest) == 12 - len(scouts) and all(not c[2] and c[3] for c in rest)
    assert all(100 in c[1] for c in rest)  # the first wave's 100 Hz, though the later scouts had none


def test_each_kind_of_spectrum_has_the_floor_of_the_scouts_that_searched_one() -> None:
    """A scout that never searched a kind of spectrum says nothing of its background there: counted as
    0, the GPU node's light floor fell to the threshold and its other CPUs tried some thirty peaks each."""
    from quietcore.attribution.noise import _floors

    assert _floors([None, 3.0, 5.0], [None, None, 10.0]) == (4.0, 10.0)
    assert _floors([1.0, 2.0], [None, None]) == (1.5, 1.5)
    assert _floors([None], [None]) == (0.0, 0.0)


def test_the_scouts_rates_are_hinted_fastest_first_so_a_slower_rate_takes_no_slot_of_a_faster_train() -> None:
    """A 1 kHz timer half of whose fires show (the others in the gaps of the tick and a host's 250 Hz train,
    as on the GPU node): each 250 Hz hint tried before it took one of its slots, and the CPU read four 250 Hz
    trains. The scouts' rates come fastest first, so the timer is taken whole and the 250 Hz hints take the
    tick's and the host's trains."""
    from quietcore.attribution import noise
    from quietcore.stats.periodicity import periodic_members

    scouted = [{"periodic": [{"frequency_hz": f} for f in rates]}
               for rates in ([250.0, 250.0, 1000.0], [250.0, 1000.0, 250.0], [250.0, 250.0, 1000.0])]  # fmt: skip
    shared = noise._shared_rates(scouted)
    assert shared == (1000.0, 250.0, 250.0)
    span, rng = 10e9, np.random.default_rng(61)

    def every_4_ms(at: float) -> np.ndarray:
        return np.arange(at, span, 4e6) + rng.normal(0, 300, 2_500)

    tick, host, timer = every_4_ms(0.2e6), every_4_ms(1.7e6), np.concatenate([every_4_ms(2.2e6), every_4_ms(3.2e6)])
    others = rng.uniform(0, span, 10_000)
    starts = np.concatenate([tick, host, timer, others])
    order = np.argsort(starts)
    lengths = np.concatenate([np.full(2_500, 12e3), np.full(2_500, 9e3), np.full(5_000, 9e3),
                              rng.exponential(2e3, 10_000)])[order]  # fmt: skip

    def found(rates: tuple[float, ...]) -> list[tuple[int, int]]:
        # as analyze_cpu hints them: the tick's rate first, once less among the shared
        got = periodic_members(starts[order], lengths, span, hints_hz=(250.0,), rates_hz=rates,
                               known_hz=(1000.0, 250.0))  # fmt: skip
        return [(round(s.frequency_hz), s.events) for s, _ in got]

    fastest = found((1000.0, 250.0))
    assert [f for f, _ in fastest] == [250, 1000, 250] and 5_000 <= fastest[1][1] <= 5_600, fastest
    slowest = found((250.0, 1000.0))
    assert 1000 not in [f for f, _ in slowest], f"tried last, its slots were taken: {slowest}"
