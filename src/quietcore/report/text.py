"""Text tables for people. Words are generated from the data."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from quietcore.facts.cpulist import cpus_phrase, figure_range
from quietcore.facts.virt import Virtualization
from quietcore.report.account import Account
from quietcore.runs.analysis import OUTSIDE_GUEST, CpuAnalysis
from quietcore.runs.model import SessionRecord
from quietcore.safe import plain


class SafeConsole(Console):
    """A console for text that may come from outside (a process or IRQ
    name, a stored experiment name): no markup unless a print asks for it
    with markup=True (its own words escaped), no emoji codes (a PCI address
    0000:ab:00.0 read as ":ab:", a process named ":skull:"), and control
    characters shown as \\xNN, never sent to the terminal."""

    def __init__(self, **options: Any) -> None:
        super().__init__(markup=False, highlight=False, emoji=False, **options)

    def render_str(self, text: str, **options: Any) -> Text:
        return super().render_str(plain(text), **options)


def console(**options: Any) -> Console:
    """stdout; when it is not a terminal, wide enough that tables do not wrap
    (rich would assume 80 columns) and sentences stay on one line."""
    out = SafeConsole(soft_wrap=True, **options)
    return out if out.is_terminal else SafeConsole(soft_wrap=True, width=140, **options)


def _us(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1000:,.1f}"


def noise_table(rows: Sequence[Mapping[str, Any]], title: str | None = None) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("CPU", justify="right")
    table.add_column("loop ns min/med", justify="right")
    table.add_column("available %", justify="right")
    table.add_column("events/s", justify="right")
    table.add_column("worst gap µs", justify="right")
    table.add_column("lost ms", justify="right")
    table.add_column("steal ms", justify="right")
    for row in rows:
        steal = row.get("steal_ns")
        table.add_row(
            str(row["cpu"]),
            f"{row['min_period_ns']:.1f} / {row['median_period_ns']:.1f}" if row["min_period_ns"] else "-",
            f"{row['available_pct']:.3f}",
            f"{row['events_per_s']:,.1f}",
            _us(row["max_gap_ns"]),
            f"{row['lost_ns'] / 1e6:,.2f}",
            "-" if steal is None else f"{steal / 1e6:,.0f}",
        )
    return table


def noise_notes(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Plain sentences about what the table shows, from the data."""
    notes = []
    if rows:
        threshold = rows[0]["threshold_ns"]
        notes.append(
            f"An event is a gap over {threshold:,.0f} ns in the spin loop; lost time excludes the loop's own period "
            "(every column: the docs' Glossary)."
        )
    dropped = [row for row in rows if row["events_dropped"]]
    if len(dropped) > NOTES_EACH_UP_TO:  # one line for them all: a line each was 384 at 384 CPUs
        kept = figure_range([row["gaps"] - row["events_dropped"] for row in dropped], ",")
        counts = figure_range([row["events_dropped"] for row in dropped], ",")
        notes.append(
            f"{cpus_phrase([int(row['cpu']) for row in dropped])}: {counts} of each one's gaps were over the cap of "
            f"{kept} events (--max-events) and were counted but not recorded: the periodic sources, attribution and "
            "figures cover the recorded ones."
        )
    else:
        for row in dropped:
            notes.append(
                f"CPU {row['cpu']}: {row['events_dropped']:,} of its {row['gaps']:,} gaps were over the cap of "
                f"{row['gaps'] - row['events_dropped']:,} events (--max-events) and were counted but not recorded: "
                "the periodic sources, attribution and figures cover the recorded ones."
            )
    stolen = [(row, kind) for row in rows if (kind := _steal_kind(row))]
    short = [row for row, kind in stolen if kind == "short"]
    host = [row for row, kind in stolen if kind == "host"]
    if len(stolen) <= NOTES_EACH_UP_TO:
        notes += [note for row, _ in stolen if (note := steal_note(row))]
        return notes
    # a VM of many vCPUs: one line of each kind, their ranges
    if short:
        ticks = figure_range([row["steal_ns"] / STEAL_TICK_NS for row in short], ",.0f")
        notes.append(f"{cpus_phrase([int(row['cpu']) for row in short])}: the hypervisor counted {ticks} tick(s) "
                     "of steal time each (in 10 ms ticks): a run this short is too short for that count to say how "
                     "much the host took.")  # fmt: skip
    if host:
        ms = figure_range([row["steal_ns"] / 1e6 for row in host], ",.0f")
        shares = figure_range([min(row["steal_ns"] / row["lost_ns"], 1.0) * 100 for row in host], ".0f")
        notes.append(f"{cpus_phrase([int(row['cpu']) for row in host])}: the hypervisor reported {ms} ms of steal "
                     f"time each (±10 ms: counted in 10 ms ticks), {shares} % of the time lost: host "
                     "noise.")  # fmt: skip
    return notes


#: Up to this many CPUs a note of one kind is a line each; past it, one line with their range.
NOTES_EACH_UP_TO = 4


#: /proc/stat counts steal in USER_HZ ticks: 100 a second on every Linux architecture quietcore runs on.
STEAL_TICK_NS = 10_000_000


def steal_note(row: Mapping[str, Any]) -> str | None:
    """What the hypervisor's steal count says of one CPU's run, with its
    resolution: /proc/stat counts it in 10 ms ticks, so a run of a few
    ticks reads 0 or 10 ms whatever the host took (a 0.5 s check once read
    "10 ms, 194 % of the time lost"). Never a share over what was lost."""
    kind = _steal_kind(row)
    steal, lost, measured = row.get("steal_ns") or 0.0, row.get("lost_ns") or 0.0, row.get("measured_ns") or 0.0
    if kind == "short":
        return (f"CPU {row['cpu']}: the hypervisor counted {steal / STEAL_TICK_NS:,.0f} tick(s) of steal time "
                f"({steal / 1e6:,.0f} ms, in 10 ms ticks): a {measured / 1e9:,.1f} s run is too short for that "
                "count to say how much the host took.")  # fmt: skip
    if kind == "host":
        share = "as much as all the time lost" if steal >= lost else f"{steal / lost:.0%} of the time lost"
        return (f"CPU {row['cpu']}: the hypervisor reported {steal / 1e6:,.0f} ms of steal time (±10 ms: counted "
                f"in 10 ms ticks), {share}: host noise.")  # fmt: skip
    return None


def _steal_kind(row: Mapping[str, Any]) -> str | None:
    """What a CPU's steal count says, for steal_note and the notes of many CPUs: "short" (a run under a
    second, where the count is a tick or two either way), "host" (half the time lost or more), or nothing."""
    steal, lost, measured = row.get("steal_ns"), row.get("lost_ns") or 0.0, row.get("measured_ns") or 0.0
    if not steal:
        return None
    if measured < 100 * STEAL_TICK_NS:
        return "short"
    return "host" if lost and steal >= 0.5 * lost else None


def session_header(row: SessionRecord) -> Table:
    facts = row.facts
    virt = facts.get("virtualization", {})
    kernel = facts.get("kernel", {})
    cpu = facts.get("cpu", {})
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("session", f"{row.id}  ({row.uuid})")
    table.add_row("command", " ".join(row.argv))
    table.add_row("status", row.status + (f": {row.error}" if row.error else ""))
    table.add_row("host", f"{row.host}  started {row.started_at}  ended {row.ended_at or '-'}")
    imported = facts.get("imported")
    if imported:  # a peer's file: its node is what the file says, no more
        host = f" of host {imported['host']}" if imported.get("host") else ""
        release = f", kernel {kernel['release']}" if kernel.get("release") else ""
        table.add_row("node", plain(f"imported from {imported.get('tool')} file {imported.get('file')}{host}{release}"))
    else:
        table.add_row(
            "node", f"{cpu.get('model')}, {cpu.get('count')} CPUs ({cpu.get('online')}), kernel {kernel.get('release')}"
        )
    table.add_row("fingerprint", row.fingerprint)
    if not imported:
        hypervisor = virt.get("hypervisor") or "unidentified hypervisor"
        table.add_row("virtualized", f"yes ({hypervisor})" if virt.get("virtualized") else "no")
    tags = row.tags
    if tags:
        table.add_row("tags", ", ".join(f"{k}={v}" for k, v in sorted(tags.items())))
    return table


def calibrate_line(result: Mapping[str, Any]) -> str:
    kernel = [f"{name} {fig['hz'] / 1e6:,.3f} MHz" for name, fig in result.get("kernel", {}).items() if fig.get("hz")]
    beside = f"; kernel/CPU figures: {', '.join(kernel)}" if kernel else "; no kernel or CPU figure exposed"
    invariant = {True: "invariant", False: "NOT invariant", None: "invariance unknown"}[result.get("invariant")]
    return (
        f"{result['counter']} counter: {result['hz'] / 1e6:,.4f} MHz over {len(result['trials'])} trials, "
        f"spread {result['spread_ppm']:.2f} ppm, {invariant}{beside}"
    )


def virt_warning(facts: Mapping[str, Any], hypervisor: str | None = None) -> str | None:
    """The virtualization sentence every result carries on a VM."""
    v = facts.get("virtualization", {})
    return Virtualization(bool(v.get("virtualized")), hypervisor or v.get("hypervisor")).warning()


def periodic_lines(cpu: CpuAnalysis, account: Account | None = None) -> list[str]:
    """A line per periodic source. The tick's share is the account's (its row in the
    table under it), so that one source has one figure: its periodic gaps alone gave
    32 % where the table said 28 %."""
    lines = []
    tick = account.tick() if account is not None else None
    for p in cpu.periodic:
        name = f": {p.name}" if p.name else ""
        share = f", {p.share_of_lost:.0%} of lost time" if p.share_of_lost is not None else ""
        if tick is not None and account is not None and (p.name or "").startswith("the scheduler tick"):
            share = f", {account.share(tick):.0%} of lost time ({tick.name} in the table)"
        lines.append(
            f"CPU {cpu.cpu}: periodic source at {p.frequency_hz:,.2f} Hz{name} "
            f"({p.events}/{p.expected} periods, jitter {p.jitter_ns / 1000:,.1f} µs, "
            f"{p.median_duration_ns / 1000:,.1f} µs each{share})"
        )
    if not cpu.periodic:
        lines.append(f"CPU {cpu.cpu}: no periodic source found")
    return lines


def account_verdict(cpu: CpuAnalysis, account: Account, shown: int | None = None) -> str:
    """The sentence under a CPU's account: the counters' verdict, or, traced, its
    long gaps (the host's preemptions, from the gaps and the probe's own switches)
    and the untraced share of the same table. `shown`: how many of the CPU's periodic
    sources were said above it (lab says two), of which the host's are summed."""
    verdict = cpu.attribution.verdict if cpu.attribution is not None else ""
    if not account.traced:
        return (verdict or account.rest_words() + ".") + _outside(cpu, account, shown)
    host = "vCPU" in verdict or " VM" in verdict
    # its first sentence, when it counts the long gaps the host took (attribution.counters._verdict)
    first = verdict.split(". ")[0] + "." if re.match(r"\d+ gaps? over ", verdict) else ""
    rest = account.rest_words() + (": the host's, which no guest tracer sees" if host else "")
    return f"{first} {rest}.".strip() + _outside(cpu, account, shown)


def _outside(cpu: CpuAnalysis, account: Account, shown: int | None = None) -> str:
    """What of the account's rest (the counters' unexplained, or the gaps no traced event touched) the
    periodic sources outside the guest kernel hold, in a sentence: the table said "unexplained 73 %" and
    the line above it that the host's 1 kHz train was 71 % of the lost time (the GPU node's CPU 0), two
    figures a reader had to join."""
    above = cpu.periodic[:shown] if shown is not None else cpu.periodic
    held = sum(p.share_of_lost or 0.0 for p in above if p.outside_guest)
    return "" if account.uncounted else outside_words(held, account.share(account.rest))


def outside_words(held: float, rest: float) -> str:
    """The sentence that joins an account's rest (`rest`, a share of the lost time) to the periodic sources
    outside the guest kernel said above it (`held` of the lost time): "" under 1 %."""
    if held < 0.01:
        return ""
    # trains' gaps, measured, against a rest that counts x typical costs left: past it, not said to be within it
    within = f", within those {rest:.0%}" if held <= rest + 0.005 else ""
    return f" {held:.0%} of the lost time is in the periodic sources above placed {OUTSIDE_GUEST}{within}."


def quanta_table(result: Mapping[str, Any]) -> Table:
    """fwq/ftq: the quanta per CPU."""
    mode = result["mode"]
    table = Table(
        title=f"{mode.upper()}: {'time per fixed work quantum' if mode == 'fwq' else 'work per fixed time quantum'}"
    )
    table.add_column("CPU", justify="right")
    table.add_column("quanta", justify="right")
    if mode == "fwq":
        table.add_column("min / median µs", justify="right")
    else:
        table.add_column("max / mean units", justify="right")
    table.add_column("available %", justify="right")
    for cpu in result["cpus"]:
        if mode == "fwq":
            middle = f"{cpu['min_quantum_ns'] / 1000:,.2f} / {cpu['median_quantum_ns'] / 1000:,.2f}"
        else:
            middle = f"{cpu['max_units']:,} / {cpu['mean_units']:,.1f}"
        table.add_row(str(cpu["cpu"]), f"{cpu['quanta']:,}", middle, f"{cpu['available_pct']:.3f}")
    return table


_CPU_LINE = re.compile(r"^(?P<indent>\s*)CPU (?P<cpu>\d+): (?P<rest>.*)$", re.S)


def by_cpu(lines: Sequence[str]) -> list[str]:
    """Lines `CPU N: text` that say the same text, one line `CPUs LIST: text` in the
    first one's place: on a node of many CPUs a note per CPU said one thing fifteen
    times (`tune plan`'s boot part, `check`'s host noise). Other lines stay as they are."""
    order: list[str | tuple[str, str]] = []
    cpus: dict[tuple[str, str], set[int]] = {}
    for line in lines:
        m = _CPU_LINE.match(line)
        if m is None:
            order.append(line)
            continue
        key = (m["indent"], m["rest"])
        if key not in cpus:
            cpus[key] = set()
            order.append(key)
        cpus[key].add(int(m["cpu"]))
    out = []
    for item in order:
        if isinstance(item, str):
            out.append(item)
            continue
        indent, rest = item
        mine = cpus[item]
        out.append(f"{indent}{cpus_phrase(frozenset(mine))}: {rest}")
    return out
