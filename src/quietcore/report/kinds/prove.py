"""`tune prove`'s table: what the tuning bought, per CPU and workload,
stored as the session's last run. It stands for the rounds' noise and
workload runs in a report (they are in the flat table, tagged before or
after, and not drawn one by one)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from quietcore.report.kinds.base import Kind
from quietcore.runs.model import Run

if TYPE_CHECKING:
    from quietcore.report.builder import Builder, Section

HEADERS = ("where", "figure", "before", "after", "after/before [95% CI]", "p", "verdict")


def cells(row: dict[str, Any]) -> tuple[str, ...]:
    ratio, ci, p = row["ratio"], row["ci"], row["p"]
    shown = (f"{ratio:.2f} [{ci[0]:.2f}, {ci[1]:.2f}]" if ratio is not None and ci else
             f"{ratio:.2f}" if ratio is not None else "-")  # fmt: skip
    return (row["where"], f"{row['metric']} ({row['unit']})", f"{row['before']:,.2f}", f"{row['after']:,.2f}", shown,
            f"{p:.3f}" if p is not None else "-", row["verdict"])  # fmt: skip


def table(analysis: dict[str, Any]) -> Table:
    rounds, seconds, seed = analysis["rounds"], analysis["duration_s"], analysis["seed"]
    out = Table(title=f"What the tuning bought: medians over {rounds} rounds of {seconds:g} s (order seed {seed})")
    for header in HEADERS:
        out.add_column(header, justify="right" if header in ("before", "after", "p") else "left")
    for row in analysis["rows"]:
        out.add_row(*cells(row))
    return out


def notes(analysis: dict[str, Any]) -> list[str]:
    refused = [f"refused by the kernel: {line}" for line in analysis.get("refused", [])]
    kept = "kept (`quietcore tune revert` undoes it)" if analysis.get("kept") else "undone after"
    return [f"CPUs {analysis['targets']} shielded, {analysis['changes']} run-time changes; the tuning was {kept}.",
            *refused]  # fmt: skip


class ProveKind(Kind):
    name = "tune-prove"
    in_report = True
    in_table = False

    def terminal(self, out: Console, run: Run) -> None:
        out.print(table(run.analysis))
        for line in notes(run.analysis):
            out.print(line)

    def section(self, b: Builder, s: Section, run: Run) -> None:
        from quietcore.report.render import grid

        s.title = "tune prove: before and after"
        s.grids.append(grid(table(run.analysis)))
        s.paragraphs += notes(run.analysis)


class Round(Kind):
    """A noise or workload run of one of prove's rounds: as its own kind
    in the flat table, `results show` and JSON, and in a report through the
    prove table alone."""

    in_report = False

    def __init__(self, base: Kind) -> None:
        self.base = base
        self.name = base.name
        self.in_table = base.in_table

    def terminal(self, out: Console, run: Run) -> None:
        self.base.terminal(out, run)

    def rows(self, run: Run) -> list[dict[str, Any]]:
        return self.base.rows(run)

    def to_json(self, run: Run) -> dict[str, Any]:
        return self.base.to_json(run)


KIND = ProveKind()
