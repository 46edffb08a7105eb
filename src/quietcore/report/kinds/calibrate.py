"""Counter calibration runs: one line, the frequency and its spread."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from quietcore.report import text
from quietcore.report.kinds.base import Kind
from quietcore.runs.model import Run

if TYPE_CHECKING:
    from quietcore.report.builder import Builder, Section


class CalibrateKind(Kind):
    name = "calibrate"
    in_report = True

    def terminal(self, out: Console, run: Run) -> None:
        out.print("  " + text.calibrate_line(run.result))

    def section(self, b: Builder, s: Section, run: Run) -> None:
        s.paragraphs.append(text.calibrate_line(run.result))


KIND = CalibrateKind()
