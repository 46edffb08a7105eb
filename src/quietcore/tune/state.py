"""Applying a plan's run-time part, checking it is still in force, and
putting everything back. Every write goes through the journal as a `kept`
change: its old value is recorded (and committed) before the write, so a
`kill -9` at any point leaves each knob at its old or its new value and the
journal able to restore it. Unlike tuned, which keeps the originals in
memory, and tuna and pyperf, which forget them or write defaults, `tune
revert` restores exactly what was there, also after a crash."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from quietcore import knobs
from quietcore.actions import Action
from quietcore.errors import CommandError
from quietcore.facts.cpulist import format_cpulist, parse_cpulist, parse_cpumask
from quietcore.facts.irqs import read_irqs
from quietcore.facts.root import Root
from quietcore.facts.tasks import read_tasks
from quietcore.knobs import FILE_KINDS, THREAD_KINDS
from quietcore.levers.cpuset import partition_refused
from quietcore.levers.journal import Journal, get, held_signals, put
from quietcore.safe import plain
from quietcore.store import journal as rows

LEVER = "tune"


@dataclass(frozen=True)
class Outcome:
    knob: str
    old: str | None
    new: str
    result: str  # "set", "refused: ...", "pending: ..." (written, not yet in effect)


def shown(kind: str, target: str, value: str | None) -> str | None:
    """A value as a person reads it: masks as CPU lists, selectors as the word."""
    return knobs.kind(kind).shown(target, value)


def same(kind: str, target: str, now: str | None, wanted: str) -> bool:
    """The kernel's value against the one written, as its kind compares them."""
    return knobs.kind(kind).same(target, now, wanted)


def restorable(root: Root, kind: str, target: str) -> str | None:
    """A knob's value now, as a revert writes it back."""
    return knobs.kind(kind).restorable(root, target)


def _effective(root: Root, action: Action) -> str | None:
    """For an IRQ, where it really goes now, when that is not where it was
    sent: the write can succeed while the effective affinity stays put."""
    number = action.target.split("/")[3]
    eff = root.read_line(f"proc/irq/{number}/effective_affinity_list")
    if eff is None:
        return None
    try:
        if parse_cpulist(eff) <= parse_cpumask(action.value):
            return None
    except ValueError:
        return None
    return f"pending: the IRQ still goes to CPU {eff} (effective_affinity_list); it moves at its next interrupt"


def missing(root: Root, actions: list[Action]) -> list[str]:
    """The files the actions write that this node lacks (a plan made on
    another node or kernel, a device gone since), but for those in a cpuset
    the actions make first."""
    made = {a.target for a in actions if a.kind == "cpuset-dir" and a.value == "present"}
    gone = []
    for a in actions:
        if a.kind not in FILE_KINDS or a.target.rsplit("/", 1)[0] in made:
            continue
        if get(a.kind, root, a.target) is None:
            gone.append(f"{a.target} ({root.read(a.target)[1] or 'unreadable'})")
    return gone


def check(root: Root, actions: list[Action]) -> None:
    """Every action's kind, target and value allowed (TargetError, exit 2,
    naming the first that is not): before anything is written."""
    for a in actions:
        knob = knobs.kind(a.kind)
        knob.check(root, a.target)
        knob.check_value(root, a.target, a.value)


def apply(conn: sqlite3.Connection, root: Root, actions: list[Action]) -> list[Outcome]:
    """Journal and write each action as a kept change, then read it back.
    A file missing is found before any write, and nothing is changed; a
    write that fails for another reason than a per-IRQ or per-thread
    refusal (a read-only file system) stops there, the changes before it
    kept for revert."""
    check(root, actions)
    gone = missing(root, actions)
    if gone:
        raise CommandError(f"this node lacks {len(gone)} of the plan's files, first {gone[0]}: nothing changed "
                           "(plan again on this node: `quietcore tune plan`)", exit_code=2)  # fmt: skip
    journal = Journal(conn, None, lasting="kept")
    outcomes: list[Outcome] = []
    for action in actions:
        rel = action.target
        old = restorable(root, action.kind, rel)
        try:
            refusal = journal.apply(LEVER, action, root, old)
        except CommandError as exc:
            done = sum(not o.result.startswith("refused") for o in outcomes)
            raise CommandError(f"{exc}; stopped there: the {done} changes before it are kept, and "
                               "`quietcore tune revert` puts them back", exit_code=exc.exit_code) from exc  # fmt: skip
        knob = action.note or rel
        if refusal:
            why = refusal.rsplit(": ", 1)[-1]
            if action.kind == "irq-affinity" and ("EIO" in why or "EPERM" in why):
                why += ": a managed IRQ, placed by the kernel itself (EIO before 6.12, EPERM since)"
            new = shown(action.kind, rel, action.value) or action.value
            outcomes.append(Outcome(knob, shown(action.kind, rel, old), new, f"refused: {why}"))
            continue
        now = get(action.kind, root, rel)
        refused = partition_refused(rel, now)
        if refused:
            result = refused
        elif not same(action.kind, rel, now, action.value):
            result = f"drifted at once: reads {shown(action.kind, rel, now)!r}"
        elif action.kind == "irq-affinity":
            result = _effective(root, action) or "set"
        else:
            result = "set"
        new = shown(action.kind, rel, action.value) or action.value
        outcomes.append(Outcome(knob, shown(action.kind, rel, old), new, result))
    return outcomes


@dataclass(frozen=True)
class Drift:
    entry: int
    target: str
    wanted: str | None
    now: str | None
    blame: str


def _blame(root: Root, kind: str, target: str) -> str:
    if kind == "pm-qos":  # quietcore's own holder: nobody else holds it
        return "quietcore's PM QoS holder is no longer running (killed, or the node rebooted)"
    tasks = read_tasks(root)
    names = {t.comm for t in tasks if not t.kthread}
    if "tuned" in names:
        return "tuned is running and sets the same knobs"
    if "irqbalance" in names and "/proc/irq/" in target:
        return "irqbalance is running and moves IRQs (ban the targets: IRQBALANCE_BANNED_CPULIST)"
    return "another actor changed it (an administrator, a service, a driver reload)"


def kept(conn: sqlite3.Connection) -> list[sqlite3.Row]:
    """The tuning still in force (or maybe: pending), newest first."""
    return [r for r in rows.open_entries(conn, ("pending", "kept")) if r["lasting"] == "kept"]


def verify(conn: sqlite3.Connection, root: Root) -> tuple[int, list[Drift], list[str]]:
    """(kept changes checked, the ones no longer in force, IRQs that appeared
    since and may reach the targets)."""
    entries = [r for r in kept(conn) if r["state"] == "kept"]
    drifts = []
    for row in entries:
        target, kind = row["target"], row["kind"]
        now = get(kind, Root(row["root"]), target)
        if now is None and kind in THREAD_KINDS:
            continue  # a thread that exited took its affinity with it: nothing drifted
        if not same(kind, target, now, row["new_value"]):
            blame = "it no longer exists" if now is None else _blame(root, kind, target)
            drifts.append(Drift(int(row["id"]), target, shown(kind, target, row["new_value"]), shown(kind, target, now),
                                blame))  # fmt: skip
    tuned_irqs = {r["target"] for r in entries if r["kind"] == "irq-affinity"}
    masks = [parse_cpumask(r["new_value"]) for r in entries if r["kind"] == "irq-affinity"]
    new_irqs = []
    if masks:
        keep = masks[0]
        for irq in read_irqs(root):
            if (
                f"/proc/irq/{irq.number}/smp_affinity" not in tuned_irqs
                and irq.requested is not None
                and not irq.requested <= keep
            ):
                new_irqs.append(f"IRQ {irq.number} ({irq.device}) reaches CPUs {format_cpulist(irq.requested)}: "
                                "not in the tuning (new since, or refused then)")  # fmt: skip
    return len(entries), drifts, new_irqs


def revert(conn: sqlite3.Connection, to: int | None = None) -> list[str]:
    """Put back every kept change (those after entry `to` with --to), newest
    first, exactly as it was. Pending ones too: the write may have happened
    before a crash. A target that is gone is reported, not fatal."""
    lines = []
    for row in kept(conn):
        if to is not None and int(row["id"]) <= to:
            continue
        target, old, kind, where = row["target"], row["old_value"], row["kind"], Root(row["root"])
        name = knobs.kind(kind).describe(target)
        if knobs.kind(kind).gone(where, target):
            rows.mark(conn, int(row["id"]), "gone", "its target no longer exists")
            lines.append(f"{name}: gone, nothing to put back")
            continue
        with held_signals():  # the knob and its entry agree before a signal ends the revert
            try:
                put(kind, where, target, old)
            except CommandError as exc:
                if row["state"] == "pending":  # never written: the kernel refused it then too
                    rows.mark(conn, int(row["id"]), "failed", f"not written before: {exc}")
                    continue
                raise CommandError(f"cannot put back {old!r} to {name}: {exc}", exit_code=1) from exc
            rows.mark(conn, int(row["id"]), "reverted", "put back by quietcore tune revert")
        lines.append(f"{name}: back to {plain(shown(kind, target, old) or '')}")
    return lines
