"""A noise run's events as arrays, decoded once from the probe's envelope:
per CPU the start and duration of every gap over the threshold (ns from the
probe's origin), the measured span, and the events the probe dropped when
--max-events filled. Attribution, figures, tracing and exports all read
this, never the envelope's lists of pairs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from quietcore.errors import StoreError
from quietcore.runs.events import DamagedEvents, decode_many

Array = npt.NDArray[np.float64]


@dataclass(frozen=True)
class CpuTrace:
    cpu: int
    start_ns: Array  # gap start times, ns since the probe's origin, ascending
    duration_ns: Array  # gap lengths, ns
    span_start_ns: float  # when this CPU's measurement began
    measured_ns: float  # how long it measured
    lost_ns: float  # the probe's own sum of gap minus the loop period
    dropped: int  # events over --max-events, counted but not recorded
    involuntary: int  # the spinner's involuntary context switches

    @property
    def span_end_ns(self) -> float:
        return self.span_start_ns + self.measured_ns

    @property
    def events(self) -> int:
        return int(self.start_ns.size)

    def pairs(self) -> list[tuple[float, float]]:
        return list(zip(self.start_ns.tolist(), self.duration_ns.tolist(), strict=True))


@dataclass(frozen=True)
class NoiseTrace:
    cpus: tuple[CpuTrace, ...]
    threshold_ns: float

    @staticmethod
    def from_result(result: Mapping[str, Any], stored: Mapping[int, bytes] | None = None,
                    arrays: Mapping[int, tuple[Array, Array]] | None = None) -> NoiseTrace | None:  # fmt: skip
        """The trace of a spin-mode noise result; None for other modes. A
        CPU's events come from `arrays` (starts, durations) when it has the
        CPU (what was just encoded: decode gives them back bit for bit), else
        from `stored` (runs.events blobs, as the store keeps them), else from
        the result's pairs."""
        if result.get("mode", "spin") != "spin" or "threshold" not in result:
            return None
        stored = stored or {}
        cpus = list(result.get("cpus", []))
        given = {**_decoded({int(c["cpu"]): stored[int(c["cpu"])] for c in cpus if int(c["cpu"]) in stored}),
                 **(arrays or {})}  # fmt: skip
        return NoiseTrace(tuple(_cpu(c, given.get(int(c["cpu"]))) for c in cpus), float(result["threshold"]["ns"]))

    def cpu(self, number: int) -> CpuTrace:
        for c in self.cpus:
            if c.cpu == number:
                return c
        raise KeyError(f"CPU {number} is not in this trace")

    @property
    def events(self) -> int:
        return sum(c.events for c in self.cpus)

    @property
    def span_end_ns(self) -> float:
        return max((c.span_end_ns for c in self.cpus), default=0.0)


def _decoded(blobs: Mapping[int, bytes]) -> dict[int, tuple[Array, Array]]:
    """Each CPU's blob decoded (runs.events.decode_many); StoreError naming the first CPU whose blob is damaged."""
    try:
        return decode_many(blobs)
    except DamagedEvents as exc:
        raise StoreError(f"CPU {exc.cpu}'s stored events cannot be read ({exc.why}): the database is damaged") from exc


def _cpu(c: Mapping[str, Any], arrays: tuple[Array, Array] | None = None) -> CpuTrace:
    if arrays is not None:
        starts, durations = arrays
    else:
        pairs = np.asarray(c.get("events") or [], dtype=np.float64).reshape(-1, 2)
        starts, durations = np.ascontiguousarray(pairs[:, 0]), np.ascontiguousarray(pairs[:, 1])
    return CpuTrace(
        cpu=int(c["cpu"]),
        start_ns=starts,
        duration_ns=durations,
        span_start_ns=float(c.get("start_ns", 0.0)),
        measured_ns=float(c["measured_ns"]),
        lost_ns=float(c.get("lost_ns", 0.0)),
        dropped=int(c.get("events_dropped", 0)),
        involuntary=int((c.get("ctxsw") or {}).get("involuntary", 0)),
    )
