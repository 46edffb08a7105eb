"""An experiment's table: the analysis of all its cells, stored as the
session's last run. It stands for its cells in a report; in the flat table
it has no row of its own (its cells have)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console

from quietcore.report import spread
from quietcore.report.experiment import experiment_table
from quietcore.report.kinds.base import Kind
from quietcore.runs.model import Run

if TYPE_CHECKING:
    from quietcore.report.builder import Builder, Section

#: Figures beyond the bars and the forest, per experiment.
EXTRA = {"prefetch": "stride", "numa": "numa", "affinity": "normalised", "smt": "normalised"}


def spread_lines(analysis: dict[str, Any]) -> list[str]:
    """Why each cell's runs differ, and the method, once (report.spread)."""
    return spread.lines(analysis.get("spread", []))


class ExperimentKind(Kind):
    name = "experiment"
    in_report = True
    in_table = False

    def terminal(self, out: Console, run: Run) -> None:
        out.print(experiment_table(run.analysis))
        for sentence in run.analysis.get("notes", []) + spread_lines(run.analysis):
            out.print(sentence)
        for warning in run.analysis.get("warnings", []):
            out.print(f"warning: {warning}")

    def section(self, b: Builder, s: Section, run: Run) -> None:
        from quietcore.report import figures  # matplotlib: only when a report is drawn
        from quietcore.report.render import grid

        analysis = run.analysis
        name = analysis["experiment"]
        s.title = f"Experiment {name}: {analysis['title']}"
        s.grids.append(grid(experiment_table(analysis)))
        s.paragraphs += analysis.get("notes", []) + spread_lines(analysis)
        s.warnings += analysis.get("warnings", [])
        b.figure(s, figures.experiment_bars(analysis), f"{name}-bars", "Each cell's median and 95 % CI; dots are runs.")
        b.figure(s, figures.forest(analysis), f"{name}-forest", "Each cell against its baseline.")
        extra = EXTRA.get(name)
        if extra == "stride":
            b.figure(s, figures.stride_curve(analysis), "stride", "Time per access as the stride grows.")
        elif extra == "numa":
            distances = analysis.get("data", {}).get("distances", {})
            b.figure(s, figures.numa_matrix(analysis, distances), "numa", "Bandwidth beside the SLIT.")
        elif extra == "normalised":
            b.figure(s, figures.normalised(analysis), f"{name}-normalised", "Per-thread speed against the baseline.")


KIND = ExperimentKind()
