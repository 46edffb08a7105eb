"""Context-switch runs: medians with bootstrap intervals, and the slices."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from quietcore.report import tables
from quietcore.report.kinds.base import Kind
from quietcore.runs.model import Run

if TYPE_CHECKING:
    from quietcore.report.builder import Builder, Section


class CtxswitchKind(Kind):
    name = "ctxswitch"
    in_report = True

    def terminal(self, out: Console, run: Run) -> None:
        out.print(tables.ctxswitch_table({**run.result, "analysis": run.analysis}))
        for line in tables.slice_lines(run.result):
            out.print(line)

    def section(self, b: Builder, s: Section, run: Run) -> None:
        from quietcore.report import figures  # matplotlib: only when a report is drawn
        from quietcore.report.render import grid

        merged = {**run.result, "analysis": run.analysis}
        s.grids.append(grid(tables.ctxswitch_table(merged)))
        s.paragraphs += tables.slice_lines(run.result)
        b.figure(s, figures.ctxswitch_bars(merged, tables.LABELS), "ctxswitch", "Median per operation, 95 % CI.")


KIND = CtxswitchKind()
