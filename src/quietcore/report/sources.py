"""Periodic sources as a table: a row each, with its rate, what it is, the
evidence it was named on, how long each of its gaps is and its share of the
lost time; what each basis means in a note under the table, once. The tick's
share is its row's in the account (report.account), so that the tick has
one figure in both tables."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from rich.table import Table

from quietcore.facts.cpulist import ordinal
from quietcore.report.account import Account
from quietcore.runs.analysis import (
    AT_TICK_RATE,
    DEVICE,
    OPEN,
    OUTSIDE,
    SECOND,
    TICK,
    TICK_MULTIPLE,
    TICK_TIMER,
    TURNS,
    CpuAnalysis,
    Named,
    Periodic,
)
from quietcore.safe import plain


def label(named: Named | None) -> str:
    """What the source is, in a table's few words; "a second train" of a kind the CPU has twice."""
    if named is None:
        return "not named"
    train = f", {ordinal(named.train)} train" if named.train > 1 else ""
    return plain(named.label) + train


def basis(named: Named | None, rates: str | None = None) -> str:
    """The evidence it was named on, with its count (`rates`: a counted rate over several CPUs, "230-260")."""
    if named is None:
        return "no counter was read"
    if named.by == "trace":
        what = f"traced: {plain(named.event)}" if named.event else "untraced"
        return f"{what}, {named.held:,} of {named.of:,} gaps"
    rate = f"{_counter(plain(named.counter))} {rates or format(named.rate, ',.0f')}/s"
    if named.kind == TURNS:
        return f"the probe preempted {named.held:,} times"
    if named.kind == OUTSIDE:
        return {"faster": f"faster than any counter ({rate})" if named.counter else "no interrupt counted",
                "no-room": f"no counter has room ({rate})",
                "tick-rate": f"one tick only ({rate})"}.get(named.why, f"counted: {rate}")  # fmt: skip
    if named.kind == OPEN:
        return "could be " + " or ".join(plain(c) for c in named.could) if named.could else "not told"
    if named.kind == SECOND:
        return "no device that often"
    return f"counted: {rate}"


def _counter(label: str) -> str:
    """A counter as a cell names it: an architecture row by its code ("LOC", where /proc/interrupts also
    says "Local timer interrupts"), a device's by its name ("virtio3-rx", not "38 (virtio3-rx)")."""
    code, _, said = label.partition(" (")
    if not said.endswith(")"):
        return label
    return code if not code.isdigit() else said[:-1]


#: What each basis means, said once under the table: by the kind or the reason it was told by.
NOTES = {
    "untraced": "untraced: no traced event touched its gaps. On a VM, that is the host: its timer, or its "
                "scheduling of this vCPU, which no guest tracer sees.",
    "faster": "faster than any counter: this CPU counted no interrupt that often, so it is not the guest kernel's.",
    "no-room": "no counter has room: no interrupt row counted enough beyond what it already holds to hold it, so it "
               "is not the guest kernel's.",
    "tick-rate": "one tick only: a second train at the tick's rate, where LOC counted one interrupt a tick.",
    OPEN: "could be: the counters cannot tell which of these holds it; a trace, as root, can.",
    TURNS: "another task's time slices: a task shared the CPU with the probe; its turns are not noise.",
    "firmware": "firmware or SMIs: check the SMI count with turbostat, or perf stat -e msr/smi/.",
}  # fmt: skip
#: The kinds that need no note: what their basis says is all there is.
_PLAIN = (TICK, DEVICE, TICK_TIMER, TICK_MULTIPLE, AT_TICK_RATE, SECOND)


def notes(found: Iterable[Named | None]) -> list[str]:
    """The notes the rows of `found` need, each once, in NOTES' order."""
    keys = set()
    for n in found:
        if n is None or n.kind in _PLAIN:
            continue
        if n.kind == OUTSIDE:
            keys.add(n.why or "untraced")
            if not n.host:
                keys.add("firmware")
        else:
            keys.add(n.kind)
    return [text for key, text in NOTES.items() if key in keys]


def share(p: Periodic, account: Account | None) -> float | None:
    """Of the CPU's lost time: the tick's as its row in the account says it, another's by its own gaps."""
    if p.named is not None and p.named.kind == TICK and account is not None and (tick := account.tick()) is not None:
        return account.share(tick)
    return p.share_of_lost


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def table(cpus: Sequence[CpuAnalysis], accounts: Mapping[int, Account], limit: int | None = None) -> Table:
    """A row per periodic source of each CPU (the first `limit` of each), strongest first."""
    t = Table(title="Periodic sources", title_justify="left")
    for name, justify in (("CPU", "right"), ("Hz", "right"), ("source", "left"), ("basis", "left"),
                          ("µs each", "right"), ("share of lost", "right")):  # fmt: skip
        t.add_column(name, justify=justify)  # type: ignore[arg-type]
    for cpu in cpus:
        mine = cpu.periodic[:limit] if limit is not None else cpu.periodic
        if not mine:
            t.add_row(str(cpu.cpu), "-", "none found", "", "", "")
        for p in mine:
            t.add_row(str(cpu.cpu), f"{p.frequency_hz:,.2f}", label(p.named), basis(p.named),
                      f"{p.median_duration_ns / 1000:,.1f}", _share(share(p, accounts.get(cpu.cpu))))  # fmt: skip
    return t


def shown(cpus: Sequence[CpuAnalysis], limit: int | None = None) -> list[Named | None]:
    """The Named of every row table() gives, for notes()."""
    return [p.named for c in cpus for p in (c.periodic[:limit] if limit is not None else c.periodic)]
