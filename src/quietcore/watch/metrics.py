"""The charges as Prometheus metrics, for node_exporter's textfile collector: `DIR/quietcore-watch.prom`,
beside the file `check` writes, written whole or not at all (fleet.prometheus). A `job` label a job ("no
job" for the CPUs none holds), and the sources by `kind` and `source`: each job's TOP largest by name, the
rest summed as source="other", so that a node's series stay bounded whatever its tasks call themselves.
`--once` writes gauges of its look; watching until stopped writes counters (`_total`), each job's figures
over every look it was in, and a job's series leave the file when it ends."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from quietcore.safe import plain, write_atomic
from quietcore.watch.charge import Charge

FILE = "quietcore-watch.prom"
PREFIX = "quietcore_watch"
#: Sources a job's series name; the rest are one series, "other"
TOP = 8
#: The longest label value kept: a task names itself, up to 15 bytes, a device's IRQ a little more
LABEL = 64


def _label(text: str) -> str:
    return plain(text)[:LABEL]


class _Collector(Collector):
    def __init__(self, charges: Sequence[Charge], seconds: float, at: float, cumulative: bool) -> None:
        self.charges, self.seconds, self.at, self.cumulative = charges, seconds, at, cumulative

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily if self.cumulative else GaugeMetricFamily
        yield GaugeMetricFamily(f"{PREFIX}_last_timestamp_seconds", "when the last look ended", value=self.at)
        yield family(f"{PREFIX}_look_seconds", "how long the looks traced", value=self.seconds)
        cpus = GaugeMetricFamily(f"{PREFIX}_cpus", "the CPUs the job holds", labels=["jobid"])
        traced = family(f"{PREFIX}_traced_seconds", "CPU time traced on the job's CPUs", labels=["jobid"])
        own = family(f"{PREFIX}_job_seconds", "CPU time of the job's own threads on its CPUs", labels=["jobid"])
        steal = family(f"{PREFIX}_steal_seconds", "time the host took from the job's CPUs (a VM's steal)",
                       labels=["jobid"])  # fmt: skip
        taken = family(f"{PREFIX}_taken_seconds", "time the OS took on the job's CPUs, by source",
                       labels=["jobid", "kind", "source"])  # fmt: skip
        for c in self.charges:
            job = _label(c.job)
            cpus.add_metric([job], float(len(c.cpus)))
            traced.add_metric([job], c.traced_ns / 1e9)
            own.add_metric([job], c.job_ns / 1e9)
            steal.add_metric([job], c.steal_ns / 1e9)
            ranked = c.ranked()
            for s in ranked[:TOP]:
                taken.add_metric([job, s.kind, _label(s.name)], s.ns / 1e9)
            if rest := ranked[TOP:]:
                taken.add_metric([job, "other", "other"], sum(s.ns for s in rest) / 1e9)
        yield from (cpus, traced, own, steal, taken)


def text(charges: Sequence[Charge], seconds: float, at: float | None = None, cumulative: bool = False) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(charges, seconds, time.time() if at is None else at, cumulative))
    return generate_latest(registry)


def write(where: Path, charges: Sequence[Charge], seconds: float, cumulative: bool = False) -> Path:
    path = where / FILE
    write_atomic(path, text(charges, seconds, cumulative=cumulative))
    return path
