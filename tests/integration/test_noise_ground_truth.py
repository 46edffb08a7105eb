"""Ground truth: a known periodic disturbance must be found by `quietcore
noise`, with its period, its length and its count.

`quietcore-probe disturb` at SCHED_FIFO on the measured CPU wakes every
10 ms and spins 200 µs. Each burst preempts the spinner at once, so the
noise probe sees one gap per period: from the timer interrupt that wakes
the disturber, through its wake-up (which the disturber times itself, from
the timer's expiry to its first instruction), the burst, and the switch
back. So the gap quietcore finds must be the burst plus the disturber's own
median wake-up latency plus one context switch. This VM also shows
host gaps of up to milliseconds: they are other events, and a burst that
merges with one moves off its period and drops out of the periodic source,
which is why the count is of the bursts the host did not delay. The host has a
100 Hz source of its own, which quietcore must report apart: the injected
source is the costlier of the two."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
from pathlib import Path

import pytest

from quietcore.probes.runner import probe_path
from tests.conftest import CliRunner, allowed_cpus

PERIOD_US, BURST_US, MEASURE_S = 10_000, 200, 4.0


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
    # The disturber's wake-ups while the noise probe surely ran (from 2 s to
    # MEASURE_S after its start; before and after, its CPU idles and wakes
    # up slower).
    during = [
        lat
        for start, lat in zip(bursts["burst_starts_ns"], bursts["wake_latencies_ns"], strict=True)
        if 2e9 <= start <= MEASURE_S * 1e9
    ]
    assert len(during) >= 0.9 * (MEASURE_S - 2) * 1e9 / (PERIOD_US * 1e3)
    # Count: one per period of the measured time, at least 95 % of those the
    # host did not hold up. A burst that woke more than a period's match
    # tolerance (2 %, 200 µs) late merged with a host stall begun before the
    # timer, and the merged gap starts off the period: under heavy host load
    # (this VM, at times) that is one burst in twelve.
    periods = row["measured_ns"] / (PERIOD_US * 1e3)
    on_time = sum(lat <= 0.02 * PERIOD_US * 1e3 for lat in during) / len(during)
    assert 0.95 * on_time * periods <= source["events"] <= periods + 1, (source["events"], on_time)
    wake_up = float(statistics.median(during))
    found_burst = source["median_duration_ns"] - wake_up
    # What is left is the way back to the spinner: the disturber re-arms its
    # timer and sleeps, one context switch. 10-20 µs on this VM while its
    # host is quiet; 32-45 µs in the runs of 2026-11-25 that failed a bound of
    # 30, the host loaded, though a pipe context switch measured 3-3.5 µs then
    # (`quietcore-probe ctxswitch --cpus 1 --tests pipe`). The gap is never
    # shorter than burst + wake-up; a duration found wrong by a burst's
    # quarter (a merged or split gap, the threshold counted) fails.
    excess = found_burst - BURST_US * 1e3
    assert -0.05 * BURST_US * 1e3 <= excess <= 0.25 * BURST_US * 1e3, (source["median_duration_ns"], wake_up)
    # And the attribution does not call the injected bursts host noise.
    assert row["attribution"]["lost_ns"] >= source["lost_ns"]
