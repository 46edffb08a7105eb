"""The native core through its JSON contract: envelopes, results, exit codes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

import numpy as np
import pytest

from quietcore.probes.noise import read_events
from quietcore.probes.runner import ENVELOPE_KEYS, parse_envelope, probe_path
from quietcore.stats.percentiles import histogram_quantile
from tests.conftest import allowed_cpus


def probe(*args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(probe_path()), *args], capture_output=True, text=True, timeout=60, check=False, **kwargs)


def envelope_of(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    return parse_envelope(proc.stdout)


def test_calibrate_envelope_and_result() -> None:
    proc = probe("calibrate", "--trials", "3", "--trial-ms", "20")
    assert proc.returncode == 0, proc.stderr
    env = envelope_of(proc)
    assert set(ENVELOPE_KEYS) <= set(env)
    assert env["command"] == "calibrate" and env["error"] is None
    assert env["argv"][1:] == ["calibrate", "--trials", "3", "--trial-ms", "20"]
    assert env["uname"]["release"] == os.uname().release
    assert env["ran_on"]["policy"] == "SCHED_OTHER"
    result = env["result"]
    assert len(result["trials"]) == 3
    # The counter runs at a real clock rate, and the trials agree to 0.1 %.
    assert 1e6 < result["hz"] < 1e11
    assert result["spread_ppm"] < 1000
    assert result["min_hz"] <= result["hz"] <= result["max_hz"]
    assert set(result["kernel"]) >= {"perf_mmap"}
    for figure in result["kernel"].values():
        assert figure["hz"] is not None or figure["note"]


def test_noise_result_is_consistent_with_itself() -> None:
    cpu = allowed_cpus()[-1]
    proc = probe("noise", "--cpus", str(cpu), "--duration", "0.5")
    assert proc.returncode == 0, proc.stderr
    env = envelope_of(proc)
    assert env["ran_on"]["cpus"] == [cpu]
    result = env["result"]
    assert result["interrupted"] is False
    (row,) = result["cpus"]
    assert row["cpu"] == cpu == row["cpu_observed_start"] == row["cpu_observed_end"]
    buckets = row["histogram"]["buckets"]
    # Every loop is in the histogram, and the histogram gives the same median.
    assert sum(b[2] for b in buckets) == row["loops"] > 1000
    assert histogram_quantile(buckets, 0.5) == pytest.approx(row["median_period_ns"], rel=1e-6)
    assert row["min_period_ns"] == pytest.approx(buckets[0][0])
    assert 0 < row["min_period_ns"] <= row["median_period_ns"] < 10_000
    # Measured time is the requested duration, within scheduling slop.
    assert 0.45e9 < row["measured_ns"] < 0.6e9
    # Events are the gaps over the threshold, and they add up.
    threshold = result["threshold"]["ns"]
    assert row["gaps"] == row["events_recorded"] + row["events_dropped"]
    assert all(duration > threshold * 0.999 for _, duration in row["events"])
    if row["events_dropped"] == 0:
        assert sum(d for _, d in row["events"]) == pytest.approx(row["total_gap_ns"], rel=1e-6)
        assert max((d for _, d in row["events"]), default=0) == pytest.approx(row["max_gap_ns"], rel=1e-9)
    starts = [s for s, _ in row["events"]]
    assert starts == sorted(starts) and all(0 <= s < 0.7e9 for s in starts)
    assert 0 <= row["available_pct"] <= 100
    expected_lost = row["total_gap_ns"] - row["gaps"] * row["min_period_ns"]
    assert row["lost_ns"] == pytest.approx(expected_lost, rel=1e-6, abs=1)


def test_noise_events_through_a_descriptor_are_the_runs_gaps_as_float64s() -> None:
    """--events-fd: quietcore's way (probes.noise.run_noise). The pairs leave the JSON, the
    descriptor holds each CPU's starts then durations, and they are the gaps the result counts."""
    cpus = allowed_cpus()
    fd = os.memfd_create("quietcore-test-events", os.MFD_CLOEXEC)
    try:
        proc = probe("noise", "--cpus", ",".join(map(str, cpus)), "--duration", "0.5", "--events-fd", str(fd),
                     "--max-events", "100", pass_fds=(fd,))  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        result = envelope_of(proc)["result"]
        told = result["events_binary"]
        assert told["fd"] == fd and told["byte_order"] == sys.byteorder
        assert told["bytes"] == 16 * sum(row["events_recorded"] for row in result["cpus"]) == os.fstat(fd).st_size
        events = read_events(fd, result)
    finally:
        os.close(fd)
    threshold = result["threshold"]["ns"]
    for row in result["cpus"]:
        starts, durations = events[row["cpu"]]
        assert row["events"] == [] and len(starts) == len(durations) == row["events_recorded"] > 0
        assert row["gaps"] == row["events_recorded"] + row["events_dropped"]
        assert np.all(np.diff(starts) > 0) and starts[0] >= 0 and starts[-1] < 0.7e9
        # the JSON's max_gap_ns has 10 digits
        assert np.all(durations > threshold * 0.999) and durations.max() <= row["max_gap_ns"] * (1 + 1e-9)
        if row["events_dropped"] == 0:
            assert float(durations.sum()) == pytest.approx(row["total_gap_ns"], rel=1e-9)


def test_noise_events_to_a_closed_descriptor_fail_naming_it() -> None:
    proc = probe("noise", "--cpus", str(allowed_cpus()[0]), "--duration", "0.05", "--events-fd", "1000")
    assert proc.returncode == 1
    assert envelope_of(proc)["error"]["message"] == "cannot write the events to --events-fd 1000: Bad file descriptor"
    refused = probe("noise", "--cpus", str(allowed_cpus()[0]), "--duration", "0.05", "--events-fd", "2")
    assert refused.returncode == 2 and "--events-fd" in refused.stdout + refused.stderr


def test_explicit_threshold_and_event_cap() -> None:
    cpu = allowed_cpus()[0]
    proc = probe("noise", "--cpus", str(cpu), "--duration", "0.3", "--threshold-ns", "30", "--max-events", "10")
    assert proc.returncode == 0, proc.stderr
    result = envelope_of(proc)["result"]
    assert result["threshold"]["auto"] is False
    assert result["threshold"]["ns"] == pytest.approx(30, abs=1)
    # the threshold is said as given, not as the ticks it truncates to, with the tick beside it (at qemu's
    # 62.5 MHz counter the automatic 500 ns was printed as 496)
    assert result["threshold"]["tick_ns"] == pytest.approx(1e9 / result["counter"]["hz"], rel=1e-6)
    (row,) = result["cpus"]
    # A 30 ns threshold is crossed far more than 10 times in 0.3 s.
    assert row["events_recorded"] == 10 and row["events_dropped"] > 0


def test_several_cpus_at_once() -> None:
    cpus = allowed_cpus()
    listing = ",".join(map(str, cpus))
    proc = probe("noise", "--cpus", listing, "--duration", "0.2")
    assert proc.returncode == 0, proc.stderr
    env = envelope_of(proc)
    assert [r["cpu"] for r in env["result"]["cpus"]] == cpus
    assert env["ran_on"]["cpus"] == cpus


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["noise", "--cpus", "4096", "--duration", "1"], "invalid --cpus"),
        (["noise", "--cpus", "1-", "--duration", "1"], "invalid --cpus '1-'"),
        (["noise", "--cpus", "0", "--duration", "0"], "invalid --duration '0' (valid: 0.001-86400)"),
        (["noise", "--cpus", "0", "--duration", "-1"], "invalid --duration '-1'"),
        (["noise", "--cpus", "0", "--duration", "x"], "invalid --duration 'x'"),
        (["noise", "--cpus", "0"], "missing --duration"),
        (["noise", "--duration", "1"], "missing --cpus"),
        (["noise", "--cpus", "0", "--duration", "1", "--bogus"], "unknown or incomplete option '--bogus'"),
        (["noise", "--cpus", "0", "--duration", "1", "--max-events", "-3"], "invalid --max-events"),
        (["noise", "--cpus"], "unknown or incomplete option '--cpus'"),
        (["calibrate", "--trials", "0"], "invalid --trials '0' (valid: 1-1000)"),
        (["calibrate", "--cpu", "0-1"], "invalid --cpu"),
        (
            ["warp"],
            "unknown command 'warp' (valid: calibrate, noise, latency, ctxswitch, disturb, simulate, matmul, compute, "
            "cpuburn, memory, memscan, stride, stream, numa, io, mixed)",
        ),
    ],
)
def test_bad_usage_exits_2_with_one_line_and_an_error_envelope(args: list[str], message: str) -> None:
    proc = probe(*args)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    env = envelope_of(proc)
    assert env["exit_code"] == 2 and message in env["error"]["message"] and env["result"] is None


# A CPU outside the affinity: tests/integration/test_valid_cpus.py, beside quietcore's own refusal.


def test_help_and_version() -> None:
    assert probe("--version").stdout.startswith("quietcore-probe ")
    top = probe("--help")
    assert top.returncode == 0 and "noise" in top.stdout and "calibrate" in top.stdout
    sub = probe("noise", "--help")
    assert sub.returncode == 0 and "--threshold-ns" in sub.stdout and not sub.stdout.lstrip().startswith("{")
    assert probe().returncode == 2


def test_sigint_stops_early_with_partial_results() -> None:
    cpu = allowed_cpus()[-1]
    proc = subprocess.Popen(
        [str(probe_path()), "noise", "--cpus", str(cpu), "--duration", "30"], stdout=subprocess.PIPE, text=True
    )
    try:
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    result = json.loads(out)["result"]
    assert result["interrupted"] is True
    assert result["cpus"][0]["measured_ns"] < 10e9
