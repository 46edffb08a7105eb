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
from typing import Any

from matplotlib.figure import Figure

from quietcore.audit.finding import rank
from quietcore.experiments.crosscheck import compare_sessions
from quietcore.report import figures, tables, text
from quietcore.report.experiment import experiment_table
from quietcore.report.render import Grid, Rendered, grid, render
from quietcore.store import sessions

WINDOW_MS = 50.0  # the short window of the noise timeline: a dozen ticks at 250 Hz


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


class _Builder:
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

    def runs(self, row: sqlite3.Row) -> list[Section]:
        out: list[Section] = []
        for run in sessions.runs_of(self.conn, row["id"]):
            params = json.loads(run["params"])
            if "cell" in params:
                continue  # an experiment's run: its table and figures stand for it
            envelope = json.loads(run["envelope"])
            result = envelope.get("result") or {}
            analysis = json.loads(run["analysis"])
            handler = self.handlers().get(run["kind"])
            if handler is None:
                continue
            section = Section(f"Run {run['seq']}: {run['kind']}", level=3)
            handler(section, run, result, analysis)
            out.append(section)
        return out

    def handlers(self) -> dict[str, Callable[[Section, sqlite3.Row, dict[str, Any], dict[str, Any]], None]]:
        return {"calibrate": self.calibrate, "noise": self.noise, "latency": self.latency,
                "ctxswitch": self.ctxswitch, "experiment": self.experiment, "audit": self.audit}  # fmt: skip

    def calibrate(self, s: Section, run: sqlite3.Row, result: dict[str, Any], analysis: dict[str, Any]) -> None:
        s.paragraphs.append(text.calibrate_line(result))

    def noise(self, s: Section, run: sqlite3.Row, result: dict[str, Any], analysis: dict[str, Any]) -> None:
        if result.get("mode", "spin") != "spin":
            s.grids.append(grid(text.quanta_table(result)))
            return
        rows = sessions.noise_rows(self.conn, run["id"])
        s.grids.append(grid(text.noise_table(rows, "Per CPU")))
        s.paragraphs += text.noise_notes(rows)
        for cpu in analysis.get("cpus", []):
            s.paragraphs += text.periodic_lines(cpu)
            if cpu.get("attribution"):
                s.paragraphs.append(f"CPU {cpu['cpu']}: {cpu['attribution']['verdict']}")
                s.grids.append(grid(tables.attribution_table(cpu)))
        n = sum(len(c.get("events") or []) for c in result.get("cpus", []))
        self.figure(s, figures.noise_timeline(result), "noise-timeline", f"The whole run: {n} gaps recorded.")
        self.figure(s, figures.noise_timeline(result, WINDOW_MS), "noise-window",
                    f"The first {WINDOW_MS:g} ms, where single interruptions can be seen.")  # fmt: skip
        self.figure(s, figures.noise_durations(result), "noise-durations", "How long the interruptions lasted.")
        self.figure(s, figures.noise_heatmap(result), "noise-heatmap", "Lost time by CPU over the run.")
        self.figure(s, figures.attribution_bars(analysis), "noise-attribution",
                    "Lost time by source; periodic sources found are named under each CPU.")  # fmt: skip

    def latency(self, s: Section, run: sqlite3.Row, result: dict[str, Any], analysis: dict[str, Any]) -> None:
        s.grids.append(grid(tables.latency_table(result)))
        self.figure(s, figures.latency_histogram(result), "latency", "Wake-up latency per CPU, p99 and max marked.")

    def ctxswitch(self, s: Section, run: sqlite3.Row, result: dict[str, Any], analysis: dict[str, Any]) -> None:
        merged = {**result, "analysis": analysis}
        s.grids.append(grid(tables.ctxswitch_table(merged)))
        s.paragraphs += tables.slice_lines(result)
        self.figure(s, figures.ctxswitch_bars(merged, tables.LABELS), "ctxswitch", "Median per operation, 95 % CI.")

    def experiment(self, s: Section, run: sqlite3.Row, result: dict[str, Any], analysis: dict[str, Any]) -> None:
        s.title = f"Experiment {analysis['experiment']}: {analysis['title']}"
        s.grids.append(grid(experiment_table(analysis)))
        s.paragraphs += analysis.get("notes", [])
        s.warnings += analysis.get("warnings", [])
        name = analysis["experiment"]
        self.figure(
            s, figures.experiment_bars(analysis), f"{name}-bars", "Each cell's median and 95 % CI; dots are runs."
        )
        self.figure(s, figures.forest(analysis), f"{name}-forest", "Each cell against its baseline.")
        if name == "prefetch":
            self.figure(s, figures.stride_curve(analysis), "stride", "Time per access as the stride grows.")
        if name == "numa":
            distances = analysis.get("data", {}).get("distances", {})
            self.figure(s, figures.numa_matrix(analysis, distances), "numa", "Bandwidth beside the SLIT.")
        if name in ("affinity", "smt"):
            self.figure(s, figures.normalised(analysis), f"{name}-normalised", "Per-thread speed against the baseline.")

    def audit(self, s: Section, run: sqlite3.Row, result: dict[str, Any], analysis: dict[str, Any]) -> None:
        s.title = "Audit findings"
        findings = result.get("findings", [])
        counts: dict[str, int] = {}
        for f in findings:
            counts[f["status"]] = counts.get(f["status"], 0) + 1
        s.paragraphs.append(", ".join(f"{v} {k}" for k, v in sorted(counts.items())) + f" of {len(findings)} checks.")
        s.grids.append(Grid("Findings", ["status", "check", "summary", "advice"], [
            [f["status"], f["id"], f["summary"], " ".join(f.get("advice", []))]
            for f in sorted(findings, key=lambda f: rank(f["status"]))
        ]))  # fmt: skip

    def comparison(self, a: sqlite3.Row, b: sqlite3.Row) -> Section:
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


def build(conn: sqlite3.Connection, rows: list[sqlite3.Row], out: Path) -> Report:
    builder = _Builder(conn, out)
    sections: list[Section] = []
    for row in rows:
        sections.append(builder.node(row))
        sections += builder.runs(row)
    for b in rows[1:]:
        sections.append(builder.comparison(rows[0], b))
    ids = ", ".join(str(r["id"]) for r in rows)
    return Report(f"quietcore report: session{'s' if len(rows) > 1 else ''} {ids}", sections, builder.count)
