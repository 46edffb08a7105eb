"""`quietcore check`: the verdict line, and per CPU the lost ratio against
the reference's, the test's p, and why it failed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from quietcore.report.kinds.base import Kind, run_row
from quietcore.runs.model import Run
from quietcore.safe import plain
from quietcore.stats.said import lost_pct

if TYPE_CHECKING:
    from quietcore.report.builder import Builder, Section


def _pct(ratio: float | None) -> str:
    return "-" if ratio is None else lost_pct(ratio)


def table(result: dict[str, Any]) -> Table:
    """The verdict's first line, as `check` printed it (a check stored before it was kept: its one line), and
    a row a CPU with its reasons."""
    out = Table(title=plain(str(result.get("headline") or result.get("line", ""))), title_justify="left")
    for header in ("CPU", "lost", "reference", "p (Holm)", "verdict", "why, or what else was seen"):
        out.add_column(header, justify="right" if header in ("CPU", "lost", "reference", "p (Holm)") else "left")
    for c in result.get("cpus", []):
        p = c.get("p")
        out.add_row(str(c["cpu"]), _pct(c["lost_ratio"]), _pct(c.get("reference_lost_ratio")),
                    "-" if p is None else f"{p:.2g}", "pass" if c["passed"] else "FAIL",
                    "\n".join(plain(r) for r in c.get("reasons", []) + c.get("notes", [])))  # fmt: skip
    return out


class CheckKind(Kind):
    name = "check"
    in_report = True

    def terminal(self, out: Console, run: Run) -> None:
        out.print(table(run.analysis))
        ref = run.analysis.get("reference")
        if ref:
            out.print(plain(f"Against reference {ref['name']}, session {ref['session']}. The test: "
                            f"{run.analysis['test']}."))  # fmt: skip
        if run.analysis.get("drift"):
            out.print(plain(f"The configuration changed since the reference: {', '.join(run.analysis['drift'])}."))

    def section(self, b: Builder, s: Section, run: Run) -> None:
        from quietcore.report.render import grid

        s.grids.append(grid(table(run.analysis)))

    def rows(self, run: Run) -> list[dict[str, Any]]:
        shared = run_row(run)
        return [{**shared, "cpu": c["cpu"], "check_passed": c["passed"], "lost_ratio": c["lost_ratio"],
                 "reference_lost_ratio": c.get("reference_lost_ratio"), "check_p": c.get("p")}
                for c in run.analysis.get("cpus", [])] or [shared]  # fmt: skip


KIND = CheckKind()
