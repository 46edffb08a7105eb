"""The lever journal's rows: every change to the node, written before the
change is made. SQL for the journal lives here and nowhere else."""

from __future__ import annotations

import sqlite3
from typing import Any

from quietcore.owner import Owner, alive
from quietcore.store.sessions import insert, now_iso

#: States: 'pending' (recorded, the write may or may not have happened),
#: then 'temporary' (undone when its command ends, or by the next command
#: after a crash) or 'kept' (until `quietcore tune revert`), and at the end
#: 'reverted' or 'failed' (the reason in note).
OPEN = ("pending", "temporary", "kept")


def add(conn: sqlite3.Connection, session_id: int | None, owner: Owner, entry: dict[str, Any]) -> int:
    values = {"session_id": session_id, "host": owner.host, "pid": owner.pid, "pid_start": owner.started,
              "command": owner.command, "state": "pending", "changed_at": now_iso(), **entry}  # fmt: skip
    with conn:
        return insert(conn, "journal", values)


def mark(conn: sqlite3.Connection, entry: int, state: str, note: str | None = None) -> None:
    with conn:
        reverted = now_iso() if state == "reverted" else None
        conn.execute(
            "UPDATE journal SET state = ?, reverted_at = COALESCE(?, reverted_at), note = COALESCE(?, note)"
            " WHERE id = ?",
            (state, reverted, note, entry),
        )


def get(conn: sqlite3.Connection, entry: int) -> sqlite3.Row:
    row: sqlite3.Row = conn.execute("SELECT * FROM journal WHERE id = ?", (entry,)).fetchone()
    return row


def open_entries(conn: sqlite3.Connection, host: str, states: tuple[str, ...] = OPEN) -> list[sqlite3.Row]:
    """This host's changes still in force, newest first (the order to undo them)."""
    marks = ", ".join("?" for _ in states)
    return conn.execute(
        f"SELECT * FROM journal WHERE host = ? AND state IN ({marks}) ORDER BY id DESC", (host, *states)
    ).fetchall()


def outstanding(conn: sqlite3.Connection, host: str) -> list[dict[str, Any]]:
    """This host's changes still in force, as plain data for the audit (and
    a snapshot's manifest), each saying whether its owner still runs."""
    found = []
    for row in open_entries(conn, host):
        entry = {k: row[k] for k in ("id", "lever", "kind", "target", "old_value", "new_value", "lasting", "state",
                                     "pid", "command", "changed_at")}  # fmt: skip
        entry["running"] = alive(int(row["pid"]), row["pid_start"])
        found.append(entry)
    return found


def states(conn: sqlite3.Connection) -> list[str]:
    return [row[0] for row in conn.execute("SELECT state FROM journal ORDER BY id")]
