"""The noise probe: arguments in, per-CPU summary rows out."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from quietcore.facts.cpulist import format_cpulist
from quietcore.probes.runner import ProbeResult, run_probe
from quietcore.store.sessions import NOISE_COLUMNS

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
    threshold = float(result["threshold"]["ns"])
    rows = []
    for cpu in result["cpus"]:
        row = {column: cpu[column] for column in NOISE_COLUMNS if column in cpu}
        row["threshold_ns"] = threshold
        row["ctxsw_voluntary"] = cpu["ctxsw"]["voluntary"]
        row["ctxsw_involuntary"] = cpu["ctxsw"]["involuntary"]
        row["steal_ns"] = steal_ns.get(int(cpu["cpu"]))
        rows.append(row)
    return rows
