"""The calibrate probe."""

from __future__ import annotations

from quietcore.probes.runner import ProbeResult, run_probe


def run_calibrate(trials: int = 5, trial_ms: int = 100) -> ProbeResult:
    args = ["--trials", str(trials), "--trial-ms", str(trial_ms)]
    return run_probe("calibrate", args, expected_s=trials * trial_ms / 1000)
