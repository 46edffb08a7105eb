"""The node's noise as Prometheus metrics, for node_exporter's textfile
collector: `DIR/quietcore.prom`, in prometheus_client's text format, written
whole or not at all (a temporary file in DIR, then a rename: node_exporter
reads only names ending in .prom, so it never sees a half-written file).

Names follow Prometheus' guide: base units (seconds), ratios from 0 to 1,
no `_total` (every figure is the last measurement's, a gauge, not a counter),
and a `cpu` label as node_exporter's own CPU metrics have. Each file is the
last measurement of whichever command wrote it (noise, check, lab, survey):
`quietcore_info`'s `command` label says which."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, InfoMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from quietcore._version import __version__
from quietcore.facts.virt import label
from quietcore.fleet.verdict import Verdict
from quietcore.runs.reference import CpuNoise
from quietcore.safe import write_atomic

FILE = "quietcore.prom"
#: Gap lengths, seconds: a cache miss is under 1 µs, an IRQ some µs, the tick tens, a
#: host's preemption of a vCPU a millisecond or more.
BUCKETS = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2)
PREFIX = "quietcore"


@dataclass(frozen=True)
class Snapshot:
    """What one node's file says: its last measurement and, from `check`, the verdict."""

    command: str
    fingerprint: str
    kernel: str
    virtualization: str
    at: float  # Unix time the measurement ended
    cpus: Sequence[CpuNoise]  # with their gaps (gaps_s) for the histogram
    verdict: Verdict | None = None


class _Collector(Collector):
    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap

    def collect(self) -> Iterator[Metric]:
        s = self.snap
        info = InfoMetricFamily(PREFIX, "quietcore's version, the node's configuration fingerprint, kernel and "
                                "virtualization, and the command that measured", labels=())  # fmt: skip
        info.add_metric((), {"version": __version__, "fingerprint": s.fingerprint, "kernel": s.kernel,
                             "virtualization": s.virtualization, "command": s.command,
                             "host": socket.gethostname()})  # fmt: skip
        yield info
        yield GaugeMetricFamily(f"{PREFIX}_last_run_timestamp_seconds", "when the last measurement ended",
                                value=s.at)  # fmt: skip
        per_cpu: dict[str, tuple[str, Callable[[CpuNoise], float]]] = {
            "measured_seconds": ("how long the CPU was measured", lambda c: c.measured_s),
            "available_ratio": (
                "share of the measured time the spinner had the CPU (0-1)",
                lambda c: 1.0 - c.lost_ratio,
            ),
            "lost_seconds": ("time lost to noise in the last measurement", lambda c: c.lost_ratio * c.measured_s),
            "max_gap_seconds": ("the longest gap in the last measurement", lambda c: c.max_gap_s),
        }
        for name, (doc, value) in per_cpu.items():
            family = GaugeMetricFamily(f"{PREFIX}_{name}", doc, labels=["cpu"])
            for c in s.cpus:
                family.add_metric([str(c.cpu)], value(c))
            yield family
        gaps = HistogramMetricFamily(f"{PREFIX}_gap_seconds", "the last measurement's gaps over the probe's "
                                     "threshold, by length", labels=["cpu"])  # fmt: skip
        for c in s.cpus:
            gaps.add_metric([str(c.cpu)], _buckets(c.gaps_s), sum(c.gaps_s))
        yield gaps
        if s.verdict is not None:
            yield GaugeMetricFamily(f"{PREFIX}_check_passed", "1 when the last check passed, 0 when it failed",
                                    value=1.0 if s.verdict.passed else 0.0)  # fmt: skip
            cpu = GaugeMetricFamily(f"{PREFIX}_check_cpu_passed", "1 when the CPU passed the last check",
                                    labels=["cpu"])  # fmt: skip
            ref = GaugeMetricFamily(f"{PREFIX}_reference_available_ratio",
                                    "the available ratio of the reference the check compared with",
                                    labels=["cpu"])  # fmt: skip
            for v in s.verdict.cpus:
                cpu.add_metric([str(v.cpu)], 1.0 if v.passed else 0.0)
                if v.reference_lost_ratio is not None:
                    ref.add_metric([str(v.cpu)], 1.0 - v.reference_lost_ratio)
            yield cpu
            yield ref


def _buckets(gaps: Sequence[float]) -> list[tuple[str, float]]:
    counts = np.searchsorted(np.sort(np.asarray(gaps, dtype=float)), BUCKETS, side="right")
    return [*((f"{le:g}", float(n)) for le, n in zip(BUCKETS, counts, strict=True)), ("+Inf", float(len(gaps)))]


def text(snap: Snapshot) -> bytes:
    """The file's content, in prometheus_client's text format."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(snap))
    return generate_latest(registry)


def write(where: Path, snap: Snapshot) -> Path:
    path = where / FILE
    write_atomic(path, text(snap))
    return path


def snapshot(command: str, facts: Mapping[str, Any], fingerprint: str, cpus: Iterable[CpuNoise],
             verdict: Verdict | None = None) -> Snapshot:  # fmt: skip
    """The file of a session's CPUs (fleet.baseline.cpu_noise with their gaps; a lab's rounds together)."""
    return Snapshot(command, fingerprint, str((facts.get("kernel") or {}).get("release", "")),
                    label(facts.get("virtualization") or {}), time.time(), sorted(cpus, key=lambda c: c.cpu),
                    verdict)  # fmt: skip
