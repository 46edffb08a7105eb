"""A job's record from `watch`: what the OS took from it, by source, each with its share of the job's CPU
time, whether the job met it alone or the whole node did, and what would keep it away."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from quietcore.facts.cpulist import cpus_phrase
from quietcore.report.kinds.base import Kind, run_row
from quietcore.runs.model import Run
from quietcore.safe import plain

if TYPE_CHECKING:
    from quietcore.report.builder import Builder, Section

#: Rows of a job's table; the rest are in `results export`
ROWS = 12
#: Fixes said under it: those of the largest sources it met alone
FIXES = 3


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.1f} ms"


def _short(ns: float) -> str:
    """A stretch's length: µs below a millisecond, ms above."""
    return f"{ns / 1e3:,.0f} µs" if ns < 1e6 else _ms(ns)


def summary(a: dict[str, Any]) -> str:
    traced = float(a.get("traced_ns") or 0)
    taken = float(a.get("taken_ns") or 0)
    listed = [c for c in a.get("cpus", []) if type(c) is int]
    cpus = cpus_phrase(listed)
    share = f"{taken / traced:.2%}" if traced else "-"
    wall = traced / len(listed) if listed else traced
    watched = f"watched {wall / 1e9:,.1f} s" + (f", {traced / 1e9:,.1f} CPU-seconds" if len(listed) > 1 else "")
    said = (
        f"Job {plain(str(a.get('job')))} on {cpus}, {watched}. Its threads ran "
        f"{float(a.get('job_ns') or 0) / 1e9:,.2f} s. The OS took {_ms(taken)}, {share} of its CPUs' time."
    )
    steal = float(a.get("steal_ns") or 0)
    if steal:
        said += f" The host took {_ms(steal)} besides (steal), inside the figures above."
    return said


def table(a: dict[str, Any]) -> Table:
    traced = float(a.get("traced_ns") or 0)
    out = Table(title=None)
    for name, right in (("source", False), ("kind", False), ("took", True), ("of its CPUs", True),
                        ("times", True), ("longest", True), ("met", False)):  # fmt: skip
        out.add_column(name, justify="right" if right else "left")
    for s in a.get("sources", [])[:ROWS]:
        ns = float(s.get("ns") or 0)
        out.add_row(plain(str(s.get("name"))), plain(str(s.get("kind"))), _ms(ns),
                    f"{ns / traced:.2%}" if traced else "-", f"{int(s.get('count') or 0):,}",
                    _short(float(s.get("longest_ns") or 0)),
                    "with the node" if s.get("shared") else "alone")  # fmt: skip
    return out


def fix_lines(a: dict[str, Any]) -> list[str]:
    fixes = a.get("fixes") or {}
    alone = [s for s in a.get("sources", []) if not s.get("shared") and s.get("kind") != "other"]
    out = []
    for s in alone[:FIXES]:
        fix = fixes.get(f"{s.get('kind')} {s.get('name')}")
        if isinstance(fix, str):
            out.append(plain(f"{s.get('name')}: {fix}"))
    return out


class JobKind(Kind):
    name = "job"
    in_report = True

    def terminal(self, out: Console, run: Run) -> None:
        a = run.analysis
        out.print(summary(a))
        if a.get("sources"):
            out.print(table(a))
            out.print("\"With the node\": other CPUs had the same source in the same look, at a quarter of this "
                      "job's rate or more. \"Alone\": only this job's CPUs had it so.")  # fmt: skip
        else:
            out.print("Nothing took time from it.")
        lines = fix_lines(a)
        if lines:
            out.print("What would keep away what it met alone:")
            for text in lines:
                out.print(f"  {text}")

    def section(self, b: Builder, s: Section, run: Run) -> None:
        from quietcore.report.render import grid

        # in the terminal's order: what the job lost, by what, then what would keep it away
        s.screen.extend([summary(run.analysis), grid(table(run.analysis)), *fix_lines(run.analysis)])

    def rows(self, run: Run) -> list[dict[str, Any]]:
        shared = run_row(run)
        return [{**shared, "job": run.analysis.get("job"), "source_kind": s.get("kind"), "source": s.get("name"),
                 "source_ns": s.get("ns"), "source_shared": s.get("shared")}
                for s in run.analysis.get("sources", [])] or [shared]  # fmt: skip


KIND = JobKind()
