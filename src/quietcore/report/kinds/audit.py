"""An audit stored with a session (by lab): the findings, worst first."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from quietcore.audit.finding import rank
from quietcore.report.kinds.base import Kind
from quietcore.runs.model import Run

if TYPE_CHECKING:
    from quietcore.report.builder import Builder, Section


def _counts(run: Run) -> str:
    findings = run.result.get("findings", [])
    counts: dict[str, int] = {}
    for f in findings:
        counts[f["status"]] = counts.get(f["status"], 0) + 1
    ordered = sorted(counts.items(), key=lambda item: rank(item[0]))
    return ", ".join(f"{v} {k}" for k, v in ordered) + f" of {len(findings)} checks."


class AuditKind(Kind):
    name = "audit"
    in_report = True
    in_table = False

    def terminal(self, out: Console, run: Run) -> None:
        out.print("  " + _counts(run) + " (`quietcore report` lists them)")

    def section(self, b: Builder, s: Section, run: Run) -> None:
        from quietcore.report.render import Grid

        s.title = "Audit findings"
        s.paragraphs.append(_counts(run))
        findings = sorted(run.result.get("findings", []), key=lambda f: rank(f["status"]))
        cells = [[f["status"], f["id"], f["summary"], " ".join(f.get("advice", []))] for f in findings]
        s.grids.append(Grid("Findings", ["status", "check", "summary", "advice"], cells))


KIND = AuditKind()
