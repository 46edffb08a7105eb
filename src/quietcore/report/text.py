"""Text tables for people. Words are generated from the data."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from quietcore.facts.cpulist import cpus_phrase, figure_range
from quietcore.facts.virt import Virtualization
from quietcore.report.account import UNCOUNTED, Account
from quietcore.report.screen import screen
from quietcore.runs.analysis import LONG_GAP_NS, CpuAnalysis
from quietcore.runs.model import SessionRecord
from quietcore.safe import plain


def console(**options: Any) -> Console:
    """stdout (or stderr): prose wrapped and tables fitted to the width it is read in (report.screen)."""
    return screen(**options)


def glossary() -> str:
    """Where the glossary of every term quietcore prints is, installed with it: a path a reader can open."""
    return str(Path(__file__).resolve().parent.parent / "glossary.md")


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
        steal = ("Steal comes in the kernel's 10 ms ticks, so a short run may show none. "
                 if any(row.get("steal_ns") is not None for row in rows) else "")  # fmt: skip
        notes.append(f"An event is a gap over {threshold:,.0f} ns in the spin loop. Lost time leaves out the loop's "
                     f"own period. {steal}Every column is in the glossary: {glossary()}")  # fmt: skip
    dropped = [row for row in rows if row["events_dropped"]]
    if len(dropped) > NOTES_EACH_UP_TO:  # one line for them all: a line each was 384 at 384 CPUs
        kept = figure_range([row["gaps"] - row["events_dropped"] for row in dropped], ",")
        counts = figure_range([row["events_dropped"] for row in dropped], ",")
        notes.append(f"{cpus_phrase([int(row['cpu']) for row in dropped])}: {counts} gaps each went past the cap of "
                     f"{kept} events (--max-events). They are counted, not recorded; the sources and figures are "
                     "of the recorded ones.")  # fmt: skip
    else:
        for row in dropped:
            notes.append(f"CPU {row['cpu']}: {row['events_dropped']:,} of its {row['gaps']:,} gaps went past the cap "
                         f"of {row['gaps'] - row['events_dropped']:,} events (--max-events). They are counted, not "
                         "recorded; the sources and figures are of the recorded ones.")  # fmt: skip
    stolen = [(row, kind) for row in rows if (kind := _steal_kind(row))]
    short = [row for row, kind in stolen if kind == "short"]
    host = [row for row, kind in stolen if kind == "host"]
    if len(stolen) <= NOTES_EACH_UP_TO:
        notes += [note for row, _ in stolen if (note := steal_note(row))]
        return notes
    # a VM of many vCPUs: one line of each kind, their ranges
    if short:
        ticks = figure_range([row["steal_ns"] / STEAL_TICK_NS for row in short], ",.0f")
        unit = "tick" if ticks == "1" else "ticks"
        notes.append(f"{cpus_phrase([int(row['cpu']) for row in short])}: the hypervisor counted {ticks} {unit} of "
                     "steal each. It counts in 10 ms ticks, too coarse to say what the host took in a run this "
                     "short.")  # fmt: skip
    if host:
        ms = figure_range([row["steal_ns"] / 1e6 for row in host], ",.0f")
        shares = figure_range([min(row["steal_ns"] / row["lost_ns"], 1.0) * 100 for row in host], ".0f")
        notes.append(f"{cpus_phrase([int(row['cpu']) for row in host])}: the hypervisor counted {ms} ms of steal "
                     f"each, {shares}% of the time lost, give or take a 10 ms tick. That is the host's "
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
        ticks = steal / STEAL_TICK_NS
        return (f"CPU {row['cpu']}: the hypervisor counted {ticks:,.0f} {'tick' if round(ticks) == 1 else 'ticks'} of "
                f"steal, {steal / 1e6:,.0f} ms. It counts in 10 ms ticks, too coarse to say what the host took in "
                f"{measured / 1e9:,.1f} s.")  # fmt: skip
    if kind == "host":
        share = "as much as all the time lost" if steal >= lost else f"{steal / lost:.0%} of the time lost"
        return (f"CPU {row['cpu']}: the hypervisor counted {steal / 1e6:,.0f} ms of steal, {share}, give or take a "
                "10 ms tick. That is the host's noise.")  # fmt: skip
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
    """A stored session's facts, one a row with its label."""
    facts = row.facts
    virt = facts.get("virtualization", {})
    kernel = facts.get("kernel", {})
    cpu = facts.get("cpu", {})
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("session", f"{row.id}, {row.uuid}")
    table.add_row("command", plain(" ".join(row.argv)))
    table.add_row("status", row.status + (f": {plain(row.error)}" if row.error else ""))
    table.add_row("host", plain(row.host))
    table.add_row("started", row.started_at[:19].replace("T", " ") + " UTC")
    table.add_row("took", took(row.started_at, row.ended_at))
    imported = facts.get("imported")
    if imported:  # a peer's file: its node is what the file says, no more
        host = f" of host {imported['host']}" if imported.get("host") else ""
        release = f", kernel {kernel['release']}" if kernel.get("release") else ""
        table.add_row("node", plain(f"imported from {imported.get('tool')} file {imported.get('file')}{host}{release}"))
    else:
        table.add_row("node", f"{cpu.get('model')}, {cpu.get('count')} CPUs {cpu.get('online')}, kernel "
                              f"{kernel.get('release')}")  # fmt: skip
    table.add_row("fingerprint", row.fingerprint)
    if not imported:
        hypervisor = virt.get("hypervisor") or "unidentified hypervisor"
        table.add_row("virtualized", f"yes, {hypervisor}" if virt.get("virtualized") else "no")
    tags = row.tags
    if tags:
        table.add_row("tags", plain(", ".join(f"{k}={v}" for k, v in sorted(tags.items()))))
    return table


def took(started: str, ended: str | None) -> str:
    """How long a session ran, from its stored start and end."""
    try:
        seconds = (datetime.fromisoformat(ended) - datetime.fromisoformat(started)).total_seconds() if ended else None
    except ValueError:
        return "?"
    if seconds is None:
        return "-"
    return f"{seconds:,.1f} s" if seconds < 120 else f"{seconds / 60:,.1f} min"


def calibrate_line(result: Mapping[str, Any]) -> str:
    """The counter's calibration in a line: its rate, whether it is invariant, and how sure."""
    invariant = {True: "invariant", False: "NOT invariant", None: "invariance unknown"}[result.get("invariant")]
    kernel = [f"{name} {fig['hz'] / 1e6:,.3f} MHz" for name, fig in result.get("kernel", {}).items() if fig.get("hz")]
    beside = f"; the kernel says {', '.join(kernel)}" if kernel else ""
    return (f"Counter: {result['counter']} at {result['hz'] / 1e6:,.4f} MHz, {invariant}; "
            f"{len(result['trials'])} trials, spread {result['spread_ppm']:.2f} ppm{beside}.")  # fmt: skip


def virt_warning(facts: Mapping[str, Any], hypervisor: str | None = None) -> str | None:
    """The virtualization sentence every result carries on a VM."""
    v = facts.get("virtualization", {})
    return Virtualization(bool(v.get("virtualized")), hypervisor or v.get("hypervisor")).warning()


def account_words(cpu: CpuAnalysis, account: Account, virtualized: bool, shown: int | None = None) -> str:
    """The sentences under a CPU's account: its long gaps and who took them (the host's preemptions on a
    VM, from the gaps and the probe's own switches), what the account leaves unnamed, and how much of that
    the periodic sources placed outside the guest kernel hold. `shown`: how many of the CPU's periodic
    sources the table above gave (lab gives two), of which the host's are summed."""
    if account.uncounted:
        return f"CPU {cpu.cpu}: {UNCOUNTED} (an imported trace), so nothing names where its time went."
    said = [*_long_gaps(cpu, account, virtualized), _rest(account, virtualized)]
    said.append(outside_words(_held(cpu, shown), account.share(account.rest), virtualized))
    if not virtualized and not account.traced and account.share(account.rest) > 0.5:
        said.append("A trace, as root, can name more of it; so can a count of SMIs (turbostat).")
    return f"CPU {cpu.cpu}: " + " ".join(s for s in said if s)


def _long_gaps(cpu: CpuAnalysis, account: Account, virtualized: bool) -> list[str]:
    """On a VM, the gaps longer than any interrupt the guest handles, and how many of them the host took:
    in a traced run, those no traced event touched (a guest tick with its VM exit runs past 100 µs and is
    the tick's, as the table of gaps shows it); else those no guest task's preemption explains."""
    a = cpu.attribution
    if a is None or not virtualized:
        return []
    over = f"{LONG_GAP_NS / 1000:,.0f} µs"
    first = f"{a.long_gaps:,} {_plural(a.long_gaps, 'gap')} over {over} took {a.long_gap_ns / 1e6:,.1f} ms."
    if account.traced and account.long_untraced is not None:
        host, host_ns = account.long_untraced
        if not host:
            return [first, "A traced guest source led each of them: none was the host's alone."] if a.long_gaps else []
        guest = max(a.long_gaps - host, 0)
        return [first, f"No traced event touched {host:,} of them, {host_ns / 1e6:,.1f} ms: the host preempting "
                       f"this vCPU. A traced guest source led the other {guest:,}."]  # fmt: skip
    switched = a.count_of("switch")
    host = max(a.long_gaps - switched, 0)
    if not host:
        return []
    if switched:
        who = (f"The host preempted this vCPU in {host:,} of them; a guest task preempted the probe in the other "
               f"{switched:,}.")  # fmt: skip
    else:
        who = "The host preempted this vCPU in each: no guest task preempted the probe."
    return [first, "No interrupt of the guest lasts that long.", who]


def _rest(account: Account, virtualized: bool) -> str:
    share = account.share(account.rest)
    if account.traced:
        host = ": the host's, which no guest tracer sees" if virtualized else ""
        return f"{share:.0%} of the lost time is in gaps no traced event touched{host}."
    host = " On a VM, that is mostly the host." if virtualized and share >= 0.01 else ""
    return f"{share:.0%} of the lost time is not explained by the kernel's counters.{host}"


def _held(cpu: CpuAnalysis, shown: int | None) -> float:
    above = cpu.periodic[:shown] if shown is not None else cpu.periodic
    return sum(p.share_of_lost or 0.0 for p in above if p.outside_guest)


def _plural(n: int, word: str) -> str:
    return word if n == 1 else word + "s"


def outside_words(held: float, rest: float, virtualized: bool) -> str:
    """The sentence that joins an account's rest (`rest`, a share of the lost time) to the periodic sources
    outside the guest kernel said above it (`held` of the lost time): "" under 1 %."""
    if held < 0.01:
        return ""
    who = "The host's periodic trains above" if virtualized else "The periodic sources above that the kernel cannot see"
    # trains' gaps, measured, against a rest that counts x typical costs left: past it, not said to be within it
    within = f", within those {rest:.0%}" if held <= rest + 0.005 else ""
    return f"{who} are {held:.0%} of the lost time{within}."


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
