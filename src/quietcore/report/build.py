"""A report over stored sessions: the node, the audit, every probe and
experiment with its figures, and comparisons between the sessions. The
words come from the same data as the figures; nothing is recomputed that
the session stored."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from quietcore.report import account, changes
from quietcore.report.builder import Builder, Report, Section
from quietcore.report.kinds import kind_of
from quietcore.runs.model import Run, SessionRecord
from quietcore.store import sessions

Step = Callable[[str], None]


def run_sections(builder: Builder, runs: list[Run], on_step: Step) -> list[Section]:
    """A section per run whose kind has one (an experiment's cells are
    drawn in its table's section)."""
    out: list[Section] = []
    for run in runs:
        kind = kind_of(run)
        if not kind.in_report:
            continue
        on_step(f"drawing session {run.session_id}, run {run.seq}: {run.kind}")
        section = Section(f"Run {run.seq}: {run.kind}", level=3)
        kind.section(builder, section, run)
        out.append(section)
    return out


def what_to_change(row: SessionRecord, runs: list[Run]) -> Section | None:
    """The report's opening: the changes ranked by the time each would remove
    (report.changes), from the session's noise runs and its audit; None when it
    has not both."""
    findings = [f for r in runs if r.kind == "audit" for f in r.result.get("findings", [])]
    accounts = [a for r in runs if r.kind == "noise" for a in account.of_run(r).values()]
    if not findings or not accounts:
        return None
    virtualized = bool((row.facts.get("virtualization") or {}).get("virtualized"))
    said = changes.lines(accounts, findings, virtualized)
    if not said:
        return None
    section = Section("What to change first")
    section.paragraphs += [said[0], *(line.strip() for line in said[1:])]
    return section


def build(conn: sqlite3.Connection, rows: list[SessionRecord], out: Path,
          progress: Callable[[int], Step] | None = None) -> Report:  # fmt: skip
    """The report of these sessions. progress(steps) gives the callback told
    of each step (a run drawn, a comparison made), for a progress bar."""
    builder = Builder(conn, out)
    runs = {row.id: sessions.runs_of(conn, row.id) for row in rows}
    steps = sum(kind_of(r).in_report for rs in runs.values() for r in rs) + len(rows) - 1
    on_step = progress(steps) if progress else (lambda what: None)
    sections: list[Section] = []
    for row in rows:
        sections.append(builder.node(row))
        first = what_to_change(row, runs[row.id])
        if first is not None:
            sections.append(first)
        # the audit second, as the docs say: what to change, then why, then the figures
        ordered = sorted(runs[row.id], key=lambda r: r.kind != "audit")
        sections += run_sections(builder, ordered, on_step)
    for b in rows[1:]:
        on_step(f"comparing session {b.id} with {rows[0].id}")
        sections.append(builder.comparison(rows[0], b))
    builder.finish()
    ids = ", ".join(str(r.id) for r in rows)
    return Report(f"quietcore report: session{'s' if len(rows) > 1 else ''} {ids}", sections, builder.count)
