"""A report over stored sessions: the node, the audit, every probe and
experiment with its figures, and comparisons between the sessions. The
words come from the same data as the figures; nothing is recomputed that
the session stored."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from quietcore.facts.cpulist import cpus_phrase, figure_range
from quietcore.report import account, changes, text
from quietcore.report.builder import Builder, Report, Section
from quietcore.report.kinds import kind_of
from quietcore.report.kinds.base import heading
from quietcore.report.render import Grid
from quietcore.runs.analysis import NoiseAnalysis
from quietcore.runs.model import Run, SessionRecord
from quietcore.store import sessions

Step = Callable[[str], None]


def run_sections(builder: Builder, runs: list[Run], on_step: Step) -> list[Section]:
    """A section per run whose kind has one (an experiment's cells are
    drawn in its table's section), titled by what the run is."""
    out: list[Section] = []
    for run in runs:
        kind = kind_of(run)
        if not kind.in_report:
            continue
        what = heading(run)
        on_step(f"drawing session {run.session_id}: {what}")
        section = Section(what, level=3)
        kind.section(builder, section, run)
        out.append(section)
    return out


def glance(builder: Builder, row: SessionRecord, runs: list[Run]) -> Section | None:
    """The report's opening, the answer at a glance: how much of the CPUs' time was available and lost,
    the tick's and the host's shares (one figure with lab, results show and audit), the costliest
    sources, and where each CPU's time went, drawn; None for a session without a noise run."""
    from quietcore.report import figures  # matplotlib: only when a report is drawn

    noise = [r for r in runs if r.kind == "noise" and r.spin_cpus]
    accounts = {c: a for r in noise for c, a in account.of_run(r).items()}
    rows = [x for r in noise for x in r.summary]
    if not accounts or not rows:
        return None
    virtualized = bool((row.facts.get("virtualization") or {}).get("virtualized"))
    cpus = frozenset(accounts)
    share = changes.shares(accounts.values(), virtualized)
    s = Section(f"Session {row.id}, {row.command}: at a glance")
    s.paragraphs.append(share.line(cpus_phrase(cpus), row.id))
    available = [float(r["available_pct"]) for r in rows]
    lost, measured = sum(float(r["lost_ns"]) for r in rows), sum(float(r["measured_ns"]) for r in rows)
    summed: dict[str, float] = {}
    for a in accounts.values():
        for r in a.rows:
            summed[r.name] = summed.get(r.name, 0.0) + r.ns
    top = [(n, ns) for n, ns in sorted(summed.items(), key=lambda kv: -kv[1])[:3] if ns >= 0.01 * share.lost_ns]
    facts = [["CPUs measured", cpus_phrase(cpus)],
             ["available", figure_range(available, ".3f") + "%"],
             ["lost", f"{lost / 1e6:,.2f} ms of {measured / 1e9:,.1f} CPU-seconds measured"],
             ["the tick and its timers", f"{share.tick:.0%} of the lost time"],
             ["the host" if virtualized else "what nothing names", f"{share.host:.0%} of the lost time"],
             ["costliest sources", "; ".join(f"{n}, {ns / share.lost_ns:.0%}" for n, ns in top) if share.lost_ns
              else "none"]]  # fmt: skip
    s.grids.append(Grid("At a glance", ["", ""], facts))
    warning = text.virt_warning(row.facts)
    if warning:
        s.warnings.append(warning)
    every = NoiseAnalysis(tuple(sorted((c for r in noise for c in r.noise.cpus), key=lambda c: c.cpu)), {})
    builder.figure(s, figures.attribution_bars(every, accounts), f"glance-{row.id}",
                   "Where each CPU's lost time went, by source, as its account has it.")  # fmt: skip
    return s


def what_to_change(row: SessionRecord, runs: list[Run]) -> Section | None:
    """The changes ranked by the time each would remove (report.changes), from the session's noise runs and
    its audit; None when it has not both."""
    findings = [f for r in runs if r.kind == "audit" for f in r.result.get("findings", [])]
    accounts = [a for r in runs if r.kind == "noise" for a in account.of_run(r).values()]
    if not findings or not accounts:
        return None
    virtualized = bool((row.facts.get("virtualization") or {}).get("virtualized"))
    said = changes.lines(accounts, findings, virtualized, cpus_phrase(frozenset(a.cpu for a in accounts)), row.id)
    if len(said) < 2:
        return None
    section = Section("What to change first, by the time each would remove at most")
    section.paragraphs += [line.strip() for line in said[2:]]  # its first, the shares, is the glance's
    return section


def build(conn: sqlite3.Connection, rows: list[SessionRecord], out: Path,
          progress: Callable[[int], Step] | None = None) -> Report:  # fmt: skip
    """The report of these sessions: for each, the answer first (at a glance, what to change, the audit),
    then each run, then the node's facts. progress(steps) gives the callback told of each step (a run
    drawn, a comparison made), for a progress bar."""
    builder = Builder(conn, out)
    runs = {row.id: sessions.runs_of(conn, row.id) for row in rows}
    steps = sum(kind_of(r).in_report for rs in runs.values() for r in rs) + len(rows) - 1
    on_step = progress(steps) if progress else (lambda what: None)
    sections: list[Section] = []
    for row in rows:
        node = builder.node(row)
        first = glance(builder, row, runs[row.id])
        mine = [first] if first is not None else []
        change = what_to_change(row, runs[row.id])
        mine += [change] if change is not None else []
        # the audit next, as the docs say: what to change, then why, then the figures
        mine += run_sections(builder, sorted(runs[row.id], key=lambda r: r.kind != "audit"), on_step)
        if first is None:  # no answer to open on (an experiment, an import): the node first, as its context
            sections += [node, *mine]
        else:  # the node's facts last, where a reader who wants them looks
            node.warnings.clear()  # the glance says it
            sections += [*mine, node]
    for b in rows[1:]:
        on_step(f"comparing session {b.id} with {rows[0].id}")
        sections.append(builder.comparison(rows[0], b))
    builder.finish()
    ids = ", ".join(str(r.id) for r in rows)
    return Report(f"quietcore report: session{'s' if len(rows) > 1 else ''} {ids}", sections, builder.count)
