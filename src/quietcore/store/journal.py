"""The journal of knob changes: every change to the node, written before the
change is made, and the identity of the helpers quietcore leaves running
(the PM QoS holder). It lives in the node's state directory
(quietcore.statedir), never in a results database: what it says is acted
on as root. SQL for the journal lives here and nowhere else."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from quietcore import statedir
from quietcore.owner import Owner, alive
from quietcore.store.sessions import insert, now_iso

FILE = "journal.db"

#: States: 'pending' (recorded, the write may or may not have happened),
#: then 'temporary' (undone when its command ends, or by the next command
#: after a crash) or 'kept' (until `quietcore tune revert`), and at the end
#: 'reverted', 'failed' (the reason in note), 'gone' (its target no longer
#: exists) or 'rebooted' (made in an earlier boot, which reset the knob).
OPEN = ("pending", "temporary", "kept")

SCHEMA = """
CREATE TABLE IF NOT EXISTS journal (
    id INTEGER PRIMARY KEY,
    session_id INTEGER,
    host TEXT NOT NULL,
    boot_id TEXT NOT NULL,
    pid INTEGER NOT NULL,
    pid_start TEXT,
    command TEXT,
    lever TEXT NOT NULL,
    kind TEXT NOT NULL,
    root TEXT NOT NULL DEFAULT '/',
    target TEXT NOT NULL,
    old_value TEXT NOT NULL,
    new_value TEXT NOT NULL,
    lasting TEXT NOT NULL CHECK (lasting IN ('temporary', 'kept')),
    state TEXT NOT NULL CHECK (state IN ('pending', 'temporary', 'kept', 'reverted', 'failed', 'gone', 'rebooted')),
    changed_at TEXT NOT NULL,
    reverted_at TEXT,
    note TEXT
);
CREATE INDEX IF NOT EXISTS journal_open ON journal(state);
CREATE TABLE IF NOT EXISTS holders (
    name TEXT PRIMARY KEY,
    boot_id TEXT NOT NULL,
    pid INTEGER NOT NULL,
    pid_start TEXT NOT NULL,
    value TEXT NOT NULL
);
"""


def boot_id() -> str:
    """This boot's id (/proc/sys/kernel/random/boot_id): a knob written in
    another boot was reset by the reboot."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


def open_node(create: bool = True) -> sqlite3.Connection | None:
    """The node journal, in the checked state directory; None when there
    is none yet and `create` is false. Raises statedir.StateError when the
    directory or the file is not safe."""
    try:
        state = statedir.StateDir.open(create=create)
    except FileNotFoundError:
        return None
    with state:
        path = state.file_path(FILE)
        if path is None:
            if not create:
                return None
            os.close(state.open_file(FILE, os.O_RDWR | os.O_CREAT, 0o600))
            path = state.file_path(FILE)
        assert path is not None
        # The directory is writable by its owner alone, so the file checked
        # above is the one SQLite opens, and so are its rollback journals.
        conn = sqlite3.connect(path, timeout=30)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA trusted_schema = OFF")
    conn.execute("PRAGMA synchronous = FULL")  # the old value is on disk before the write it guards
    conn.executescript(SCHEMA)
    return conn


def add(conn: sqlite3.Connection, session_id: int | None, owner: Owner, entry: dict[str, Any]) -> int:
    values = {"session_id": session_id, "host": owner.host, "boot_id": boot_id(), "pid": owner.pid,
              "pid_start": owner.started, "command": owner.command, "state": "pending", "changed_at": now_iso(),
              **entry}  # fmt: skip
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


def open_entries(conn: sqlite3.Connection, states: tuple[str, ...] = OPEN) -> list[sqlite3.Row]:
    """The changes still in force, newest first (the order to undo them)."""
    marks = ", ".join("?" for _ in states)
    return conn.execute(f"SELECT * FROM journal WHERE state IN ({marks}) ORDER BY id DESC", states).fetchall()


def close_other_boots(conn: sqlite3.Connection) -> int:
    """Entries of an earlier boot are closed as ended with it: the kernel
    reset those knobs, and an IRQ number then may name another device now."""
    marks = ", ".join("?" for _ in OPEN)
    with conn:
        cur = conn.execute(
            f"UPDATE journal SET state = 'rebooted', note = 'ended with boot ' || boot_id WHERE state IN ({marks})"
            " AND boot_id != ?",
            (*OPEN, boot_id()),
        )
        conn.execute("DELETE FROM holders WHERE boot_id != ?", (boot_id(),))
    return cur.rowcount


def outstanding(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """The changes still in force, as plain data for the audit (and a
    snapshot's manifest), each saying whether its owner still runs."""
    found = []
    for row in open_entries(conn):
        entry = {k: row[k] for k in ("id", "lever", "kind", "target", "old_value", "new_value", "lasting", "state",
                                     "pid", "command", "changed_at")}  # fmt: skip
        entry["running"] = alive(int(row["pid"]), row["pid_start"])
        found.append(entry)
    return found


def states(conn: sqlite3.Connection) -> list[str]:
    return [row[0] for row in conn.execute("SELECT state FROM journal ORDER BY id")]


def set_holder(conn: sqlite3.Connection, name: str, pid: int, started: str, value: str) -> None:
    with conn:
        conn.execute("INSERT OR REPLACE INTO holders VALUES (?, ?, ?, ?, ?)", (name, boot_id(), pid, started, value))


def get_holder(conn: sqlite3.Connection, name: str) -> tuple[int, str, str] | None:
    """(pid, start time, value) of this boot's helper `name`, as recorded."""
    row = conn.execute("SELECT pid, pid_start, value FROM holders WHERE name = ? AND boot_id = ?",
                       (name, boot_id())).fetchone()  # fmt: skip
    return (int(row[0]), str(row[1]), str(row[2])) if row else None


def clear_holder(conn: sqlite3.Connection, name: str) -> None:
    with conn:
        conn.execute("DELETE FROM holders WHERE name = ?", (name,))
