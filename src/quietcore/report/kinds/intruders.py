"""`quietcore intruders`: per watched CPU, every source that ran there
besides the workload, with how it came and what would keep it away; from
ONE_TABLE_FROM CPUs one table for them all, each source with the CPUs it
hit. The remedies are long, so the table numbers them and lists them below
it."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from quietcore.attribution import explain
from quietcore.facts.cpulist import brief_cpulist, cpus_phrase
from quietcore.report.iterations import figure, iteration_lines, iterations_table
from quietcore.report.kinds.base import Kind
from quietcore.runs.model import Run
from quietcore.safe import markup

if TYPE_CHECKING:
    from quietcore.report.builder import Builder, Section

KIND_NAMES = {"task": "task", "irq": "IRQ", "softirq": "softirq", "vector": "vector", "ipi": "IPI", "work": "work",
              "timer": "timer"}  # fmt: skip
STRETCHES = "stretches the intruders took"
SHOWN = 25  # sources per CPU in a table; the JSON has them all


def ms(ns: float) -> str:
    return f"{ns / 1e6:,.3f} ms" if ns < 1e9 else f"{ns / 1e9:,.3f} s"


def heading(cpu: dict[str, Any]) -> str:
    traced, others = cpu["traced_ns"], cpu["intruded_ns"]
    if not cpu.get("events"):
        return f"CPU {cpu['cpu']}: {ms(traced)} traced, not one event: nothing interrupted what ran there"
    share = f" ({others / traced:.1%})" if traced else ""
    return (f"CPU {cpu['cpu']}: {ms(traced)} traced; the workload {ms(cpu['workload_ns'])}, idle "
            f"{ms(cpu['idle_ns'])}, others {ms(others)}{share}")  # fmt: skip


def _came(came: dict[str, int]) -> str:
    parts = [f"{how} x{n}" if n > 1 else how for how, n in list(came.items())[:2]]
    more = len(came) - 2
    return "; ".join(parts) + (f"; {more} more" if more > 0 else "")


def table(cpu: dict[str, Any], fixes: list[str]) -> Table:
    """`fixes` gathers the remedies: a row shows its number in that list."""
    out = Table(title=heading(cpu), title_justify="left")
    for header in ("what", "source", "count", "time", "longest", "how it came", "fix"):
        out.add_column(header, justify="right" if header in ("count", "time", "longest") else "left")
    for source in cpu["sources"][:SHOWN]:
        fix = source.get("fix", "")
        if fix and fix not in fixes:
            fixes.append(fix)
        name = source["name"] + (f" ({source['pid']})" if source.get("pid") is not None else "")
        counted = source["kind"] in ("irq", "softirq", "vector") and not source["ns"]  # sampled: a count alone
        time_ = "-" if counted else ms(source["ns"])
        out.add_row(KIND_NAMES.get(source["kind"], source["kind"]), markup(name), f"{source['count']:,}",
                    time_, ms(source["longest_ns"]) if source["kind"] == "task" else "",
                    markup(_came(source["came"])), f"[{fixes.index(fix) + 1}]" if fix else "")  # fmt: skip
    if len(cpu["sources"]) > SHOWN:
        out.caption = f"{len(cpu['sources']) - SHOWN} smaller sources not shown (--json has them)"
    return out


#: From this many CPUs the intruders are one table, each row with the CPUs it hit (as noise's summary).
ONE_TABLE_FROM = 5
_ON_CPU = re.compile(r" on CPU (\d+)")
_PER_CPU = re.compile(r"/\d+(?::\d+H?)?$")  # ksoftirqd/3, migration/12, kworker/3:1H


def family(source: dict[str, Any]) -> tuple[str, str]:
    """What a source is across CPUs: a per-CPU kthread's number ("ksoftirqd/3",
    "migration/12") dropped, so each CPU's own copy is one row."""
    return source["kind"], _PER_CPU.sub("/N", source["name"])


def merged(cpus: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """The CPUs' heading summed, and their sources as one list: a source per
    family with the CPUs it hit, its counts and times summed, its longest the
    longest, costliest first."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for cpu in cpus:
        for source in cpu["sources"]:
            key = family(source)
            row = rows.setdefault(key, {"kind": key[0], "name": key[1], "pids": set(), "count": 0, "ns": 0.0,
                                        "longest_ns": 0.0, "came": {}, "fix": source.get("fix", ""),
                                        "cpus": set()})  # fmt: skip
            if source.get("pid") is not None:
                row["pids"].add(source["pid"])
            row["count"] += source["count"]
            row["ns"] += source["ns"]
            row["longest_ns"] = max(row["longest_ns"], source.get("longest_ns") or 0.0)
            for how, n in source["came"].items():
                # "woken by watchdog_timer_fn on CPU 4", "... on CPU 5": one way it came, from the CPUs it did
                at = _ON_CPU.search(how)
                key = (how[: at.start()], how[at.end() :]) if at else (how, "")
                seen = row["came"].setdefault(key, [0, set()])
                seen[0] += n
                if at:
                    seen[1].add(int(at.group(1)))
            row["cpus"].add(int(cpu["cpu"]))
    traced = sum(c["traced_ns"] for c in cpus)
    others = sum(c["intruded_ns"] for c in cpus)
    share = f" ({others / traced:.1%})" if traced else ""
    title = (f"{cpus_phrase(frozenset(int(c['cpu']) for c in cpus))}: {ms(traced)} traced in all; the "
             f"workload {ms(sum(c['workload_ns'] for c in cpus))}, idle {ms(sum(c['idle_ns'] for c in cpus))}, "
             f"others {ms(others)}{share}")  # fmt: skip
    for row in rows.values():
        ways = sorted(row["came"].items(), key=lambda kv: -kv[1][0])
        row["came"] = {f"{head} on {cpus_phrase(frozenset(cpus))}{tail}" if cpus else head + tail: n
                       for (head, tail), (n, cpus) in ways}  # fmt: skip
    return title, sorted(rows.values(), key=lambda r: (-r["ns"], -r["count"]))


def one_table(cpus: list[dict[str, Any]], fixes: list[str]) -> Table:
    """Every watched CPU's intruders in one table, each row with the CPUs it hit."""
    title, rows = merged(cpus)
    out = Table(title=title, title_justify="left")
    for header in ("what", "source", "CPUs", "count", "time", "longest", "how it came", "fix"):
        out.add_column(header, justify="right" if header in ("count", "time", "longest") else "left")
    for row in rows[:SHOWN]:
        fix = row["fix"]
        if fix and fix not in fixes:
            fixes.append(fix)
        pid = f" ({next(iter(row['pids']))})" if len(row["pids"]) == 1 else ""
        counted = row["kind"] in ("irq", "softirq", "vector") and not row["ns"]
        out.add_row(KIND_NAMES.get(row["kind"], row["kind"]), markup(row["name"] + pid),
                    brief_cpulist(frozenset(row["cpus"])), f"{row['count']:,}", "-" if counted else ms(row["ns"]),
                    ms(row["longest_ns"]) if row["kind"] == "task" else "", markup(_came(row["came"])),
                    f"[{fixes.index(fix) + 1}]" if fix else "")  # fmt: skip
    if len(rows) > SHOWN:
        out.caption = f"{len(rows) - SHOWN} smaller sources not shown (--json has them, CPU by CPU)"
    return out


def tables_of(analysis: dict[str, Any], fixes: list[str]) -> list[Table]:
    """A table a CPU up to ONE_TABLE_FROM CPUs, else one for them all."""
    cpus = list(analysis["cpus"])
    if len(cpus) >= ONE_TABLE_FROM:
        return [one_table(cpus, fixes)]
    return [table(cpu, fixes) for cpu in cpus]


def metric_lines(analysis: dict[str, Any]) -> list[str | Table]:
    """The command's own figure (--metric): its value, the iterations' table, why they differ."""
    figures = analysis.get("metric")
    if not figures:
        return []
    if "error" in figures:
        return [f"No figure of merit: {figures['error']}"]
    v = figures["verdict"]
    n = figures["metrics"][v["name"]]["samples"]
    out: list[str | Table] = [f"{v['name']}: {figure(v['value'])} {v['unit']} ({v['of']} of {n} samples, "
                              f"{v['better']} is better)"]  # fmt: skip
    explained = figures.get("iterations")
    if explained:
        out.append(iterations_table(explained, f"{v['name']}, iteration by iteration"))
        out += iteration_lines(explained)
    return out


def notes(analysis: dict[str, Any]) -> list[str]:
    out = [f"Sampled, not traced ({analysis['misses']})"] if analysis.get("mode") == "sampled" else []
    lost = analysis.get("lost_events", 0)
    if lost:
        by_cpu = analysis.get("lost_by_cpu") or {}
        worst = sorted(by_cpu.items(), key=lambda kv: -int(kv[1]))[:4]
        where = (
            f" (CPU {', CPU '.join(f'{c}: {int(n):,}' for c, n in worst)}{', ...' if len(by_cpu) > 4 else ''})"
            if worst
            else ""
        )
        out.append(f"warning: the kernel lost {lost:,} trace events{where} (its buffer was full between reads): the "
                   "figures are short by what they held; give --buffer-kb more")  # fmt: skip
    reader = analysis.get("reader")
    if reader:
        told = (f"; it read each CPU's buffer raw, and telling the pages as text took {reader['told_ms']:,.0f} ms "
                "after the run" if reader.get("read") == "per-CPU raw pages" else "")  # fmt: skip
        out.append(f"quietcore's trace reader took {reader['cpu_ms']:,.1f} ms of CPU ({reader['share_of_one']:.1%} of "
                   f"one), on {cpus_phrase(frozenset(reader['cpus']))}{told}")  # fmt: skip
    if analysis.get("workload_migrations"):
        out.append(f"the workload's tasks moved between CPUs {analysis['workload_migrations']:,} times")
    return out


class IntrudersKind(Kind):
    name = "intruders"
    in_report = True

    def terminal(self, out: Console, run: Run) -> None:
        for line in self.lines(run, out):
            out.print(line)

    def lines(self, run: Run, out: Console) -> list[Any]:
        analysis = run.analysis
        what = analysis.get("workload_text", "")
        shown: list[Any] = [markup(f"Who ran on CPUs {analysis['cpus_text']} besides {what}")]
        fixes: list[str] = []
        shown += tables_of(analysis, fixes)
        shown += [markup(f"[{i}] {fix}") for i, fix in enumerate(fixes, 1)]
        shown += [markup(line) for line in notes(analysis)]
        if "explained" in analysis:
            shown += [markup(line) for line in explain.lines(analysis["explained"], STRETCHES)]
        shown += [markup(line) if isinstance(line, str) else line for line in metric_lines(analysis)]
        return shown

    def section(self, b: Builder, s: Section, run: Run) -> None:
        from quietcore.report.render import grid

        analysis = run.analysis
        s.title = f"Intruders on CPUs {analysis['cpus_text']}"
        fixes: list[str] = []
        s.grids += [grid(t) for t in tables_of(analysis, fixes)]
        s.paragraphs += [f"[{i}] {fix}" for i, fix in enumerate(fixes, 1)] + notes(analysis)
        if "explained" in analysis:
            s.paragraphs += explain.lines(analysis["explained"], STRETCHES)
        for line in metric_lines(analysis):
            if isinstance(line, str):
                s.paragraphs.append(line)
            else:
                s.grids.append(grid(line))


KIND = IntrudersKind()
