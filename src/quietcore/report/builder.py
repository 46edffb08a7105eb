"""What a report is made of, and the builder the run kinds fill: sections
of paragraphs, tables and figures (drawn in child processes), the node's
section and the comparison of two sessions. The kinds (report.kinds) say
what each run shows; report.build puts the sessions together."""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from quietcore.facts.cpulist import parse_cpulist
from quietcore.report import figures, text
from quietcore.report.render import Grid, Rendered, render
from quietcore.runs.model import SessionRecord
from quietcore.safe import ident


@dataclass
class Fold:
    """Detail a reader opens when they want it (HTML's <details>): one CPU's
    tables among hundreds, open from the start when it is an outlier."""

    summary: str
    paragraphs: list[str] = field(default_factory=list)
    grids: list[Grid] = field(default_factory=list)
    open: bool = False


@dataclass
class Section:
    title: str
    level: int = 2
    paragraphs: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    grids: list[Grid] = field(default_factory=list)
    figures: list[Rendered] = field(default_factory=list)
    folds: list[Fold] = field(default_factory=list)  # after the figures
    #: lines and tables in the order a terminal gives them, after the grids and paragraphs: a node of many
    #: CPUs, whose account table followed its groups' table, before the lines that lead to it
    screen: list[str | Grid] = field(default_factory=list)


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
        self.facts: dict[int, dict[str, Any]] = {}  # by session, as node() read them: a run's groups of CPUs

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

    def node(self, row: SessionRecord) -> Section:
        facts = row.facts
        self.facts[row.id] = facts
        s = Section(f"Session {row.id}: {row.command}")
        tags = row.tags
        s.paragraphs.append(
            f"Started {row.started_at[:19]} UTC on {row.host}, status {row.status}, quietcore "
            f"{row.tool_version}" + (f", tags {', '.join(f'{k}={v}' for k, v in tags.items())}" if tags else "") + "."
        )
        if "cpu" not in facts or "kernel" not in facts:  # an import: its file says what it says of its node
            imported = facts.get("imported") or {}
            what = ", ".join(f"{k} {v}" for k, v in imported.items() if v and isinstance(v, str))
            s.paragraphs.append(f"Imported ({what or 'no word of its node'}): no fact of the node was read.")
            return s
        kernel, cpu, virt = facts["kernel"], facts["cpu"], facts["virtualization"]
        s.grids.append(Grid("The node", ["fact", "value"], [
            ["fingerprint", row.fingerprint],
            ["kernel", f"{kernel['release']} ({kernel.get('preempt_build') or 'preemption model unknown'}"
                       f"{', dynamic' if kernel.get('preempt_dynamic') else ''})"],
            ["CPU", f"{cpu['model']}, {cpu['count']} online ({cpu['online']}), SMT {cpu['smt']}"],
            ["isolated / nohz_full", f"{cpu['isolated'] or 'none'} / {cpu['nohz_full'] or 'none'}"],
            ["NUMA nodes", numa_nodes(cpu["numa_nodes"])],
            ["governors", ", ".join(cpu["governors"]) or "none (no cpufreq)"],
            ["THP enabled / defrag", f"{facts['thp']['enabled']} / {facts['thp']['defrag']}"],
            ["clocksource", str(facts.get("clocksource"))],
            ["boot parameters", " ".join(f"{k}={v}" if v else k for k, v in facts["boot_params"].items()) or "none"],
            ["virtualization", f"{virt['hypervisor'] or 'yes'}" if virt["virtualized"] else "none found"],
            *([["GPUs and NICs", devices_cell(facts["devices"])]] if facts.get("devices") else []),
        ]))  # fmt: skip
        warning = text.virt_warning(facts)
        if warning:
            s.warnings.append(warning)
        return s

    def comparison(self, a: SessionRecord, b: SessionRecord) -> Section:
        from quietcore.report.crosscheck import compare_sessions  # numpy: only when sessions are compared

        result = compare_sessions(self.conn, a, b)
        s = Section(f"Session {b.id} against session {a.id}")
        if result["same_fingerprint"]:
            s.paragraphs.append(f"Same node configuration (fingerprint {a.fingerprint}).")
        else:
            s.grids.append(Grid("What changed in the node", ["fact", f"session {a.id}", f"session {b.id}"],
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
        forest = {"experiment": f"session {b.id} / {a.id}",
                  "rows": [{"cell": f"{c['experiment']}: {c['cell']}", "comparison": c["comparison"],
                            "stats": {"n": min(c["a"]["n"], c["b"]["n"])}} for c in rows]}  # fmt: skip
        self.figure(s, figures.forest(forest, f"session {a.id}"), f"compare-{a.id}-{b.id}",
                    f"Session {b.id}'s median over session {a.id}'s, per cell.")  # fmt: skip
        return s


def devices_cell(found: dict[str, Any]) -> str:
    """The node's GPUs and NICs as the fingerprint keeps them: name, driver, NUMA node."""
    return "; ".join(f"{d.get('name') or address} ({d.get('driver') or 'no driver'}, NUMA node "
                     f"{d['numa_node'] if d.get('numa_node') is not None else 'unknown'})"
                     for address, d in sorted(found.items()))  # fmt: skip


def numa_nodes(stored: str) -> str:
    """How many NUMA nodes, and which: the fingerprint stores their ids as a
    list ("0", "0-1"), which a table read as a count ("NUMA nodes 0")."""
    try:
        ids = parse_cpulist(stored) if stored else frozenset()
    except ValueError:
        return f"unreadable ({stored!r})"
    if not ids:
        return "none found"
    return f"{len(ids)} (node{'s' if len(ids) > 1 else ''} {stored})"
