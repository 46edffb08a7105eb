"""A report over stored sessions: the node, the audit, every probe and
experiment with its figures, and comparisons between the sessions. The
words come from the same data as the figures; nothing is recomputed that
the session stored."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from matplotlib.figure import Figure

from quietcore.report import figures, text
from quietcore.report.render import Grid, Rendered, render
from quietcore.runs.kinds import kind_of
from quietcore.runs.model import Run
from quietcore.store import sessions


@dataclass
class Section:
    title: str
    level: int = 2
    paragraphs: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    grids: list[Grid] = field(default_factory=list)
    figures: list[Rendered] = field(default_factory=list)


@dataclass
class Report:
    title: str
    sections: list[Section]
    figure_count: int = 0


class Builder:
    def __init__(self, conn: sqlite3.Connection, out: Path) -> None:
        self.conn = conn
        self.out = out
        self.count = 0

    def figure(self, section: Section, fig: Figure | None, name: str, caption: str) -> None:
        if fig is None:
            return
        self.count += 1
        section.figures.append(render(fig, f"f{self.count:02d}-{name}", caption, self.out))

    def node(self, row: sqlite3.Row) -> Section:
        facts = json.loads(row["facts"])
        kernel, cpu, virt = facts["kernel"], facts["cpu"], facts["virtualization"]
        s = Section(f"Session {row['id']}: {row['command']}")
        tags = json.loads(row["tags"])
        s.paragraphs.append(
            f"Started {row['started_at'][:19]} UTC on {row['host']}, status {row['status']}, quietcore "
            f"{row['tool_version']}"
            + (f", tags {', '.join(f'{k}={v}' for k, v in tags.items())}" if tags else "")
            + "."
        )
        s.grids.append(Grid("The node", ["fact", "value"], [
            ["fingerprint", row["fingerprint"]],
            ["kernel", f"{kernel['release']} ({kernel.get('preempt_build') or 'preemption model unknown'}"
                       f"{', dynamic' if kernel.get('preempt_dynamic') else ''})"],
            ["CPU", f"{cpu['model']}, {cpu['count']} online ({cpu['online']}), SMT {cpu['smt']}"],
            ["isolated / nohz_full", f"{cpu['isolated'] or 'none'} / {cpu['nohz_full'] or 'none'}"],
            ["NUMA nodes", cpu["numa_nodes"] or "-"],
            ["governors", ", ".join(cpu["governors"]) or "none (no cpufreq)"],
            ["THP enabled / defrag", f"{facts['thp']['enabled']} / {facts['thp']['defrag']}"],
            ["clocksource", str(facts.get("clocksource"))],
            ["boot parameters", " ".join(f"{k}={v}" if v else k for k, v in facts["boot_params"].items()) or "none"],
            ["virtualization", f"{virt['hypervisor'] or 'yes'}" if virt["virtualized"] else "none found"],
        ]))  # fmt: skip
        warning = text.virt_warning(facts)
        if warning:
            s.warnings.append(warning)
        return s

    def runs(self, runs: list[Run], on_step: Step) -> list[Section]:
        """A section per run whose kind has one (an experiment's cells are
        drawn in its table's section)."""
        out: list[Section] = []
        for run in runs:
            kind = kind_of(run)
            if not kind.in_report:
                continue
            on_step(f"drawing session {run.session_id}, run {run.seq}: {run.kind}")
            section = Section(f"Run {run.seq}: {run.kind}", level=3)
            kind.section(self, section, run)
            out.append(section)
        return out

    def comparison(self, a: sqlite3.Row, b: sqlite3.Row) -> Section:
        from quietcore.experiments.crosscheck import compare_sessions  # scipy: only when sessions are compared

        result = compare_sessions(self.conn, a, b)
        s = Section(f"Session {b['id']} against session {a['id']}")
        if result["same_fingerprint"]:
            s.paragraphs.append(f"Same node configuration (fingerprint {a['fingerprint']}).")
        else:
            s.grids.append(Grid("What changed in the node", ["fact", f"session {a['id']}", f"session {b['id']}"],
                                [[c["fact"], str(c["a"]), str(c["b"])] for c in result["changes"]]))  # fmt: skip
        rows = [c for c in result["cells"] if c.get("comparison")]
        if not rows:
            s.paragraphs.append("No experiment cell was measured in both sessions.")
            return s
        s.grids.append(Grid("Per cell, B over A", ["experiment", "cell", "ratio [95% CI]", "p (Holm)", "verdict"], [
            [c["experiment"], c["cell"], f"{c['comparison']['ratio']:.3f} [{c['comparison']['ci_low']:.3f}-"
             f"{c['comparison']['ci_high']:.3f}]", f"{c['comparison']['p_adjusted']:.3g}", c["comparison"]["verdict"]]
            for c in rows
        ]))  # fmt: skip
        forest = {"experiment": f"session {b['id']} / {a['id']}",
                  "rows": [{"cell": f"{c['experiment']}: {c['cell']}", "comparison": c["comparison"],
                            "stats": {"n": min(c["a"]["n"], c["b"]["n"])}} for c in rows]}  # fmt: skip
        self.figure(s, figures.forest(forest, f"session {a['id']}"), f"compare-{a['id']}-{b['id']}",
                    f"Session {b['id']}'s median over session {a['id']}'s, per cell.")  # fmt: skip
        return s


Step = Callable[[str], None]


def build(conn: sqlite3.Connection, rows: list[sqlite3.Row], out: Path,
          progress: Callable[[int], Step] | None = None) -> Report:  # fmt: skip
    """The report of these sessions. progress(steps) gives the callback told
    of each step (a run drawn, a comparison made), for a progress bar."""
    builder = Builder(conn, out)
    runs = {row["id"]: sessions.runs_of(conn, row["id"]) for row in rows}
    steps = sum(kind_of(r).in_report for rs in runs.values() for r in rs) + len(rows) - 1
    on_step = progress(steps) if progress else (lambda what: None)
    sections: list[Section] = []
    for row in rows:
        sections.append(builder.node(row))
        sections += builder.runs(runs[row["id"]], on_step)
    for b in rows[1:]:
        on_step(f"comparing session {b['id']} with {rows[0]['id']}")
        sections.append(builder.comparison(rows[0], b))
    ids = ", ".join(str(r["id"]) for r in rows)
    return Report(f"quietcore report: session{'s' if len(rows) > 1 else ''} {ids}", sections, builder.count)
