"""A report over stored sessions: the node, the audit, every probe and
experiment with its figures, and comparisons between the sessions. The
words come from the same data as the figures; nothing is recomputed that
the session stored."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from matplotlib.figure import Figure

from quietcore.report import figures, text
from quietcore.report.render import Grid, Rendered, render
from quietcore.runs.kinds import kind_of
from quietcore.runs.model import Run
from quietcore.safe import ident
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


@dataclass
class _Drawing:
    """A figure being drawn by a child process."""

    pid: int
    inline: Path  # where the child leaves the inline SVG
    fig: Figure
    section: Section
    index: int  # its place in section.figures


class Builder:
    def __init__(self, conn: sqlite3.Connection, out: Path) -> None:
        self.conn = conn
        self.out = out
        self.count = 0
        # Figures are drawn in child processes, one per CPU: drawing (text
        # layout, above all) is most of a report's time, each figure is
        # independent, and the measurement is over, so the CPUs are free.
        self.workers = len(os.sched_getaffinity(0)) if hasattr(os, "fork") else 1
        self.drawing: list[_Drawing] = []

    def figure(self, section: Section, fig: Figure | None, name: str, caption: str) -> None:
        if fig is None:
            return
        self.count += 1
        full = ident(f"f{self.count:02d}-{name}")  # an id and a file name: the name may hold stored text
        if self.workers < 2:
            section.figures.append(render(fig, full, caption, self.out))
            return
        self._wait(self.workers - 1)
        (self.out / "figures").mkdir(parents=True, exist_ok=True)
        inline = self.out / "figures" / f".{full}.inline.svg"
        pid = os.fork()
        if pid == 0:  # the child: draw, leave the inline SVG, and go without running the parent's exit code
            code = 1
            try:
                inline.write_text(render(fig, full, caption, self.out).svg, encoding="utf-8")
                code = 0
            finally:
                os._exit(code)
        section.figures.append(Rendered(full, caption, "", (f"figures/{full}.svg", f"figures/{full}.png")))
        self.drawing.append(_Drawing(pid, inline, fig, section, len(section.figures) - 1))

    def _wait(self, running: int) -> None:
        """Collect drawn figures, oldest first, until at most `running` are left."""
        while len(self.drawing) > running:
            d = self.drawing.pop(0)
            _, status = os.waitpid(d.pid, 0)
            done = d.section.figures[d.index]
            if os.waitstatus_to_exitcode(status) == 0 and d.inline.is_file():
                d.section.figures[d.index] = Rendered(done.name, done.caption, d.inline.read_text("utf-8"), done.files)
            else:  # the child failed: draw it here, where an error can be seen
                d.section.figures[d.index] = render(d.fig, done.name, done.caption, self.out)
            d.inline.unlink(missing_ok=True)

    def finish(self) -> None:
        self._wait(0)

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
    builder.finish()
    ids = ", ".join(str(r["id"]) for r in rows)
    return Report(f"quietcore report: session{'s' if len(rows) > 1 else ''} {ids}", sections, builder.count)
