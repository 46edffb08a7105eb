"""Latency runs (cyclictest's method): percentiles per CPU and a histogram."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from quietcore.report import tables
from quietcore.report.kinds.base import WAKE_MAX, WAKE_P50, WAKE_P99, Kind
from quietcore.runs.model import Run

if TYPE_CHECKING:
    from quietcore.report.builder import Builder, Section


class LatencyKind(Kind):
    name = "latency"
    in_report = True

    def terminal(self, out: Console, run: Run) -> None:
        out.print(tables.latency_table(run.result))

    def section(self, b: Builder, s: Section, run: Run) -> None:
        from quietcore.report import figures  # matplotlib: only when a report is drawn
        from quietcore.report.render import grid

        s.grids.append(grid(tables.latency_table(run.result)))
        b.figure(s, figures.latency_histogram(run.result), "latency", "Wake-up latency per CPU, p99 and max marked.")

    def figures(self, run: Run) -> dict[int, dict[str, float]]:
        out: dict[int, dict[str, float]] = {}
        for c in run.result.get("cpus", []):
            figures = {WAKE_MAX: c["max_ns"] / 1e3, WAKE_P50: c["p50_ns"] / 1e3}
            if c.get("samples", 0) >= 100:
                figures[WAKE_P99] = c["p99_ns"] / 1e3
            out[int(c["cpu"])] = figures
        return out


KIND = LatencyKind()
