"""Knobs quietcore itself left changed: the journal's entries still in
force on the node (temporary ones of a running or crashed command, kept
ones of a tuning), each with the action that puts it back."""

from __future__ import annotations

from quietcore.audit.context import AuditContext
from quietcore.audit.finding import Finding, Status
from quietcore.facts.cpulist import counted
from quietcore.knobs import KINDS
from quietcore.safe import plain

SHOWN = 6
FIELDS = ("id", "lever", "kind", "target", "old_value", "new_value", "lasting", "state", "pid", "command")


def _entry(raw: object) -> dict[str, object] | None:
    """An entry as the journal writes it, its text made plain; None for
    anything else (a snapshot's manifest is another machine's input)."""
    if not isinstance(raw, dict) or any(k not in raw for k in FIELDS) or raw["kind"] not in KINDS:
        return None
    return {k: plain(v) if isinstance(v, str) else v for k, v in raw.items()}


def _how_back(entry: dict[str, object]) -> str:
    if entry["lasting"] == "kept":
        return "kept on purpose: it stays until reverted"
    if entry["running"]:
        return f"put back when pid {entry['pid']} ends"
    return "any quietcore command run as root puts it back"


def journal(ctx: AuditContext) -> Finding:
    if ctx.journal is None:
        f = Finding("quietcore.journal", Status.INFO, "quietcore's journal is not part of this root")
        return f.see("quietcore-snapshot.json", "no journal recorded (a snapshot by an older quietcore, or a fixture)")
    checked = [_entry(e) for e in ctx.journal]
    entries = [e for e in checked if e is not None]
    if not entries:
        f = Finding("quietcore.journal", Status.OK, "no knob changed by quietcore is outstanding")
        f.see(ctx.journal_source, "no pending, temporary or kept entry for this host")
        if len(checked) > len(entries):
            f.see(ctx.journal_source, f"{len(checked) - len(entries)} malformed entries ignored")
        return f
    words = ", ".join(f"{e['lever']}={e['new_value']} (was {e['old_value']})" for e in entries[:SHOWN])
    f = Finding("quietcore.journal", Status.WARN, f"{counted(len(entries), 'knob')} left changed by quietcore: {words}")
    for e in entries:
        state = "running" if e["running"] else "ended"
        f.see(f"{ctx.journal_source} #{e['id']}", f"{e['target']}: {e['new_value']} (was {e['old_value']}), "
              f"{e['state']}, by pid {e['pid']} (`{e['command']}`, {state})")  # fmt: skip
        f.act(str(e["kind"]), str(e["target"]), str(e["old_value"]), note=_how_back(e))
    return f
