"""`quietcore intruders`: per watched CPU, every source that ran there
besides the workload, with how it came and what would keep it away; from
ONE_TABLE_FROM CPUs one table for them all, each source with the CPUs it
hit. The remedies are long, so the table numbers them and lists them below
it."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from quietcore.attribution.intruders import Came, came_of
from quietcore.facts.cpulist import brief_cpulist, cpus_phrase, parse_cpulist
from quietcore.report import came, explained
from quietcore.report.iterations import figure, iteration_lines, iterations_table
from quietcore.report.kinds.base import Kind
from quietcore.runs.model import Run
from quietcore.safe import plain

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


def _named(source: dict[str, Any]) -> str:
    """A source's name without its kind, which the table's first column says: "RCU", not "softirq RCU"."""
    return str(source["name"]).removeprefix(f"{source['kind']} ")


def _came(ways: Sequence[tuple[Came, int, frozenset[int] | None]]) -> str:
    """The two commonest ways a source came, with their counts, one a line."""
    parts = [came.words(c, cpus) + (f", {n} times" if n > 1 else "") for c, n, cpus in ways[:2]]
    more = len(ways) - 2
    return "\n".join(parts) + (f"\nand {more} more {'way' if more == 1 else 'ways'}" if more > 0 else "")


def table(cpu: dict[str, Any], fixes: list[str]) -> Table:
    """`fixes` gathers the remedies: a row shows its number in that list."""
    out = Table(title=heading(cpu), title_justify="left")
    # the source first: it names the row, and a narrow terminal repeats it in front of the columns it moves
    for header in ("source", "what", "count", "time", "longest", "how it came", "fix"):
        out.add_column(header, justify="right" if header in ("count", "time", "longest") else "left")
    sources = [s for s in cpu["sources"] if s["count"] or s["ns"]]  # a task seen with nothing run: not a row
    for source in sources[:SHOWN]:
        fix = source.get("fix", "")
        if fix and fix not in fixes:
            fixes.append(fix)
        name = _named(source) + (f" ({source['pid']})" if source.get("pid") is not None else "")
        counted = source["kind"] in ("irq", "softirq", "vector") and not source["ns"]  # sampled: a count alone
        time_ = "-" if counted else ms(source["ns"])
        ways = [(c, n, None) for c, n in came_of(source["came"])]
        out.add_row(plain(name), KIND_NAMES.get(source["kind"], source["kind"]), f"{source['count']:,}",
                    time_, ms(source["longest_ns"]) if source["kind"] == "task" else "",
                    _came(ways), f"[{fixes.index(fix) + 1}]" if fix else "")  # fmt: skip
    if len(sources) > SHOWN:
        out.caption = f"{len(sources) - SHOWN} smaller sources not shown (--json has them)"
    return out


#: From this many CPUs the intruders are one table, each row with the CPUs it hit (as noise's summary).
ONE_TABLE_FROM = 5
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
            for way, n in came_of(source["came"]):
                # woken by watchdog_timer_fn on CPU 4, on CPU 5: one way it came, from the CPUs it did
                seen = row["came"].setdefault(came.key(way), [0, set()])
                seen[0] += n
                if way.cpu is not None:
                    seen[1].add(way.cpu)
            row["cpus"].add(int(cpu["cpu"]))
    traced = sum(c["traced_ns"] for c in cpus)
    others = sum(c["intruded_ns"] for c in cpus)
    share = f" ({others / traced:.1%})" if traced else ""
    title = (f"{cpus_phrase(frozenset(int(c['cpu']) for c in cpus))}: {ms(traced)} traced in all; the "
             f"workload {ms(sum(c['workload_ns'] for c in cpus))}, idle {ms(sum(c['idle_ns'] for c in cpus))}, "
             f"others {ms(others)}{share}")  # fmt: skip
    for row in rows.values():
        ways = sorted(row["came"].items(), key=lambda kv: -kv[1][0])
        row["came"] = [(way, n, frozenset(cpus) if cpus else None) for way, (n, cpus) in ways]
    return title, sorted(rows.values(), key=lambda r: (-r["ns"], -r["count"]))


def one_table(cpus: list[dict[str, Any]], fixes: list[str]) -> Table:
    """Every watched CPU's intruders in one table, each row with the CPUs it hit."""
    title, rows = merged(cpus)
    out = Table(title=title, title_justify="left")
    for header in ("source", "what", "CPUs", "count", "time", "longest", "how it came", "fix"):
        out.add_column(header, justify="right" if header in ("count", "time", "longest") else "left")
    rows = [r for r in rows if r["count"] or r["ns"]]
    for row in rows[:SHOWN]:
        fix = row["fix"]
        if fix and fix not in fixes:
            fixes.append(fix)
        pid = f" ({next(iter(row['pids']))})" if len(row["pids"]) == 1 else ""
        counted = row["kind"] in ("irq", "softirq", "vector") and not row["ns"]
        out.add_row(plain(_named(row) + pid), KIND_NAMES.get(row["kind"], row["kind"]),
                    brief_cpulist(frozenset(row["cpus"])), f"{row['count']:,}", "-" if counted else ms(row["ns"]),
                    ms(row["longest_ns"]) if row["kind"] == "task" else "", _came(row["came"]),
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
    out = [f"Sampled, not traced: {analysis['misses']}."] if analysis.get("mode") == "sampled" else []
    lost = analysis.get("lost_events", 0)
    if lost:
        by_cpu = analysis.get("lost_by_cpu") or {}
        worst = sorted(by_cpu.items(), key=lambda kv: -int(kv[1]))[:4]
        where = "; ".join(f"CPU {c} {int(n):,}" for c, n in worst)
        more = f" and {len(by_cpu) - 4} more CPUs" if len(by_cpu) > 4 else ""
        out.append(f"warning: the kernel lost {lost:,} trace events, its buffer full between reads"
                   f"{f': {where}{more}' if where else ''}. The figures are short by what they held; more "
                   "--buffer-kb keeps them.")  # fmt: skip
    reader = analysis.get("reader")
    if reader:
        told = (f" Decoding the trace took {reader['told_ms']:,.0f} ms more, after the run."
                if reader.get("read") == "per-CPU raw pages" else "")  # fmt: skip
        on = cpus_phrase(frozenset(reader["cpus"]))
        out.append(f"quietcore's trace reader took {reader['cpu_ms']:,.1f} ms of CPU on {on}, "
                   f"{reader['share_of_one']:.1%} of one CPU.{told}")  # fmt: skip
    moved = int(analysis.get("workload_migrations") or 0)
    if moved:
        out.append(f"The workload's tasks moved between CPUs {'once' if moved == 1 else f'{moved:,} times'}.")
    return out


def _cpus(text: str) -> str:
    """The watched CPUs as stored (a kernel list) in a phrase: "CPU 1", "CPUs 4-15"."""
    try:
        return cpus_phrase(parse_cpulist(text))
    except ValueError:
        return f"CPUs {plain(text)}"


class IntrudersKind(Kind):
    name = "intruders"
    in_report = True

    def terminal(self, out: Console, run: Run) -> None:
        for line in self.lines(run, out):
            out.print(line)

    def lines(self, run: Run, out: Console) -> list[Any]:
        analysis = run.analysis
        what = analysis.get("workload_text", "")
        shown: list[Any] = [f"Who ran on {_cpus(analysis['cpus_text'])} besides {what}:"]
        fixes: list[str] = []
        shown += tables_of(analysis, fixes)
        shown += [f"[{i}] {fix}" for i, fix in enumerate(fixes, 1)]
        shown += notes(analysis)
        if "explained" in analysis:
            shown += explained.items(analysis["explained"], STRETCHES)
        shown += metric_lines(analysis)
        return shown

    def section(self, b: Builder, s: Section, run: Run) -> None:
        from quietcore.report.render import grid

        analysis = run.analysis
        s.title = f"Intruders on {_cpus(analysis['cpus_text'])}"
        fixes: list[str] = []
        s.grids += [grid(t) for t in tables_of(analysis, fixes)]
        s.paragraphs += [f"[{i}] {fix}" for i, fix in enumerate(fixes, 1)] + notes(analysis)
        for item in explained.items(analysis["explained"], STRETCHES) if "explained" in analysis else ():
            s.screen.append(item if isinstance(item, str) else grid(item))
        for line in metric_lines(analysis):
            if isinstance(line, str):
                s.paragraphs.append(line)
            else:
                s.grids.append(grid(line))


KIND = IntrudersKind()
