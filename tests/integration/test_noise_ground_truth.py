"""Ground truth: a known periodic disturbance must be found by `quietcore
noise`, with its period, its length and its count.

`quietcore-probe disturb` at SCHED_FIFO on the measured CPU wakes every
10.618 ms (PERIOD_US says why not 10) and spins 200 µs. Each burst preempts the spinner at once, so the
noise probe sees one gap per period: from the timer interrupt that wakes
the disturber, through its wake-up, the burst, and the switch back. The
disturber records each wake-up on CLOCK_MONOTONIC_RAW, the clock of the
probe's origin, with its latency from the timer's expiry and its length,
so each burst is set against the gap the probe recorded around it: the gap
must begin between the timer's expiry and the wake-up, hold the whole
burst, and end one switch after it. (A median of the wake-ups against a
median of the gaps, as this test once did, failed whenever the host held
up the timer's interrupt while the probe went on spinning: on a VM the
expiry is not the interrupt.) This VM also shows host gaps of up to
milliseconds: they are other events, and a burst that merges with one
moves off its period and drops out of the periodic source, which is why
the count is of the bursts the host did not delay. The host has a 100 Hz
source of its own, which quietcore must report apart: the injected source
is the costlier of the two."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from quietcore.probes.runner import probe_path
from quietcore.store import db, sessions
from tests.conftest import CliRunner, allowed_cpus

#: Not 10 ms: a period the node's own trains divide makes their coincidence with the bursts all or nothing for a
#: whole run. 10 ms against the guest's 250 Hz tick repeats every 20 ms, so when a tick fell within its handling
#: (15 µs here) before the disturber's timer, the one interrupt ran both and every other burst's gap began with the
#: tick: held/not held alternated exactly (0.497 in 1 of 6 runs of this test's matching, the tick 23 µs before the
#: expiry; a suite failed so at 0.5). 10.618 ms steps 2.618 ms across the tick and 0.618 ms across a host's 100 Hz
#: or 1 kHz train, so a run's bursts meet each at scattered phases, and a coincidence is one burst, not half of them.
PERIOD_US, BURST_US, MEASURE_S = 10_618, 200, 3.0
#: A vCPU's gap may begin before its timer expires: KVM exits the guest up to its LAPIC timer advance (adaptive,
#: at most 5 µs: LAPIC_TIMER_ADVANCE_NS_MAX) early, to inject the interrupt on time. 2-5 µs early in 1-4 % of the
#: bursts here, at any phase of the tick, against 0.5-0.9 µs typically (the two clocks' match).
EARLY_NS = 5_000


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="SCHED_FIFO needs root (or CAP_SYS_NICE)")
def test_quietcore_noise_finds_the_injected_disturbance(cli: CliRunner, db_file: Path) -> None:
    cpu = allowed_cpus()[-1]
    disturber = subprocess.Popen(
        [
            str(probe_path()),
            "disturb",
            "--cpus",
            str(cpu),
            "--period-us",
            str(PERIOD_US),
            "--burst-us",
            str(BURST_US),
            "--policy",
            "fifo",
            "--priority",
            "1",
            "--duration",
            str(MEASURE_S + 3),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert disturber.stderr is not None and "running" in disturber.stderr.readline()
        time.sleep(0.2)
        proc = cli("noise", "--cpus", str(cpu), "--duration", str(MEASURE_S), "--json")
        disturber.terminate()  # it reports what it did on SIGTERM
        out, _ = disturber.communicate(timeout=10)
    finally:
        # Never leave a real-time spinner behind, whatever happened.
        disturber.kill()
        disturber.wait()
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(proc.stdout)["cpus"]
    (bursts,) = json.loads(out)["result"]["cpus"]
    periodic = row["periodic"]
    injected = [p for p in periodic if abs(p["period_ns"] - PERIOD_US * 1e3) <= 0.02 * PERIOD_US * 1e3]
    assert injected, f"no source within 2 % of {PERIOD_US} µs among {[round(p['frequency_hz'], 2) for p in periodic]}"
    assert not [p for p in periodic if abs(p["period_ns"] - PERIOD_US * 1e3 / 2) <= 0.02 * PERIOD_US * 1e3 / 2], (
        "the timer and the host's 100 Hz source reported as one at 200 Hz"
    )
    source = max(injected, key=lambda p: p["lost_ns"])
    # Each burst set against the gap the probe recorded around it, both on
    # CLOCK_MONOTONIC_RAW (the disturber's wake-ups; the probe's origin):
    # the bursts of the measured window, less a millisecond at each end.
    with contextlib.closing(db.open_db(db_file, create=False, write=False)) as conn:
        (run,) = sessions.runs_of(conn, 1)
    assert run.trace is not None
    trace = run.trace.cpu(cpu)
    woke = np.asarray(bursts["burst_starts_raw_ns"], dtype=np.float64) - run.result["origin"]["monotonic_raw_ns"]
    latency = np.asarray(bursts["wake_latencies_ns"], dtype=np.float64)
    length = np.asarray(bursts["burst_lengths_ns"], dtype=np.float64)
    inside = (woke - latency >= trace.span_start_ns + 1e6) & (woke + length <= trace.span_end_ns - 1e6)
    woke, latency, length = woke[inside], latency[inside], length[inside]
    assert len(woke) >= 0.95 * (MEASURE_S * 1e9 - 2e6) / (PERIOD_US * 1e3)
    # The last gap begun by each wake-up (none: -1), its start and end
    gap = np.searchsorted(trace.start_ns, woke, side="right") - 1
    gap_start = trace.start_ns[np.maximum(gap, 0)]
    gap_end = gap_start + trace.duration_ns[np.maximum(gap, 0)]
    # A burst the host held up (woken later than a period's match tolerance,
    # 2 %, or spinning longer than asked) merges with the stall and is no
    # member of the periodic source: under heavy host load (this VM, at
    # times) one burst in twelve.
    on_time = (latency <= 0.02 * PERIOD_US * 1e3) & (length <= 1.05 * BURST_US * 1e3)
    # The gap holds the whole burst, and begins with the timer's interrupt:
    # not before the timer expired (less KVM's timer advance, EARLY_NS) and,
    # being the last gap begun by the wake-up, not after it. One that began
    # earlier merged with a host stall, or with a tick handled just before.
    holds = (gap >= 0) & (gap_end >= woke + length) & (gap_start >= woke - latency - EARLY_NS)
    assert holds[on_time].mean() >= 0.95, (holds[on_time].mean(), on_time.mean())
    # It ends with the way back to the spinner: the disturber re-arms its
    # timer and sleeps, one context switch. 3.5-18 µs here on a quiet host
    # (median 5), 32-45 µs while it was loaded; a gap found wrong by a
    # quarter of a burst (merged, split, the threshold counted) fails.
    way_back = gap_end - (woke + length)
    assert 0 <= float(np.median(way_back[holds])) <= 0.25 * BURST_US * 1e3, np.percentile(way_back[holds], [5, 50, 95])
    # The source quietcore names is made of those gaps: its count one per
    # measured period, at least 95 % of those the host did not hold up, and
    # its typical length theirs.
    periods = row["measured_ns"] / (PERIOD_US * 1e3)
    assert 0.95 * on_time.mean() * periods <= source["events"] <= periods + 1, (source["events"], on_time.mean())
    matched = float(np.median((gap_end - gap_start)[holds & on_time]))
    assert source["median_duration_ns"] == pytest.approx(matched, rel=0.05), (source["median_duration_ns"], matched)
    # And the attribution does not call the injected bursts host noise.
    assert row["attribution"]["lost_ns"] >= source["lost_ns"]
