"""The noise probe: arguments in, per-CPU summary rows out."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from quietcore.facts.cpulist import format_cpulist
from quietcore.probes.runner import ProbeResult, run_probe

#: Setup around the measured time: calibration, preheat, thread start.
OVERHEAD_S = 0.2


@dataclass(frozen=True)
class NoiseOptions:
    cpus: frozenset[int]
    duration: float
    threshold_ns: float | None = None
    max_events: int = 100_000

    def args(self) -> list[str]:
        args = ["--cpus", format_cpulist(self.cpus), "--duration", repr(self.duration)]
        if self.threshold_ns is not None:
            args += ["--threshold-ns", repr(self.threshold_ns)]
        return [*args, "--max-events", str(self.max_events)]

    def params(self) -> dict[str, Any]:
        return {
            "cpus": format_cpulist(self.cpus),
            "duration_s": self.duration,
            "threshold_ns": self.threshold_ns,
            "max_events": self.max_events,
        }


def run_noise(options: NoiseOptions, on_tick: Callable[[float], None] | None = None) -> ProbeResult:
    return run_probe("noise", options.args(), expected_s=options.duration + OVERHEAD_S, on_tick=on_tick)


def summary_rows(result: dict[str, Any], steal_ns: dict[int, float]) -> list[dict[str, Any]]:
    """One flat row per CPU, the columns of the noise_cpu table."""
    rows = []
    threshold = float(result["threshold"]["ns"])
    for cpu in result["cpus"]:
        rows.append(
            {
                "cpu": cpu["cpu"],
                "measured_ns": cpu["measured_ns"],
                "loops": cpu["loops"],
                "min_period_ns": cpu["min_period_ns"],
                "median_period_ns": cpu["median_period_ns"],
                "threshold_ns": threshold,
                "gaps": cpu["gaps"],
                "total_gap_ns": cpu["total_gap_ns"],
                "max_gap_ns": cpu["max_gap_ns"],
                "lost_ns": cpu["lost_ns"],
                "available_pct": cpu["available_pct"],
                "events_per_s": cpu["events_per_s"],
                "events_dropped": cpu["events_dropped"],
                "ctxsw_voluntary": cpu["ctxsw"]["voluntary"],
                "ctxsw_involuntary": cpu["ctxsw"]["involuntary"],
                "steal_ns": steal_ns.get(int(cpu["cpu"])),
            }
        )
    return rows
