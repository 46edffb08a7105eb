"""Ground truth: a known periodic disturbance must be found by `quietcore
noise`, with its period, its length and its count.

`quietcore-probe disturb` at SCHED_FIFO on the measured CPU wakes every
10 ms and spins 200 µs. Each burst preempts the spinner at once, so the
noise probe sees one gap per period: the burst, plus the timer interrupt
that woke the disturber. That interrupt costs what a tick costs (the same
hrtimer path), which the same run measures as the tick's gap; the burst
length quietcore finds is the gap less that cost. This VM also shows host
gaps of up to milliseconds: they are other events, and a burst that merges
with one moves off its period and drops out of the periodic source, which
is why the count is asserted at 95 % and not at 100 %."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from quietcore.probes.runner import probe_path
from tests.conftest import CliRunner, allowed_cpus

PERIOD_US, BURST_US, MEASURE_S = 10_000, 200, 5.0


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
    finally:
        # Never leave a real-time spinner behind, whatever happened.
        disturber.kill()
        disturber.wait()
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(proc.stdout)["cpus"]
    periodic = row["periodic"]
    injected = [p for p in periodic if abs(p["period_ns"] - PERIOD_US * 1e3) <= 0.02 * PERIOD_US * 1e3]
    assert injected, f"no source within 2 % of {PERIOD_US} µs among {[round(p['frequency_hz'], 2) for p in periodic]}"
    source = injected[0]
    # Count: one per period of the measured time, at least 95 % of them.
    expected = row["measured_ns"] / (PERIOD_US * 1e3)
    assert 0.95 * expected <= source["events"] <= expected + 1
    # Length: the gap less the measured cost of the interrupt that woke the disturber.
    tick = next((p for p in periodic if p["name"] and "scheduler tick" in p["name"]), None)
    irq_cost = tick["median_duration_ns"] if tick else 0.0
    found_burst = source["median_duration_ns"] - irq_cost
    assert abs(found_burst - BURST_US * 1e3) <= 0.10 * BURST_US * 1e3, (source["median_duration_ns"], irq_cost)
    # And the attribution does not call the injected bursts host noise.
    assert row["attribution"]["lost_ns"] >= source["lost_ns"]
