"""Journals of older quietcores, kept in the results database: their open
entries move to the node journal only from a database that no one but us
(root, for root) could have written, file and directory both. From any
other database nothing is replayed or moved: what was found is said, and
nothing is written. An entry made before this boot is moved as ended with
that boot: the reboot reset its knob."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from quietcore.store import journal as node
from quietcore.store.db import why_untrusted

OPEN = ("pending", "temporary", "kept")
COLUMNS = ("session_id", "host", "pid", "pid_start", "command", "lever", "kind", "target", "old_value", "new_value",
           "lasting", "state", "changed_at", "note")  # fmt: skip


def _boot_time_iso() -> str | None:
    try:
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("btime "):
                return datetime.fromtimestamp(int(line.split()[1]), UTC).isoformat(timespec="seconds")
    except (OSError, ValueError):
        pass
    return None


def move_open_entries(conn: sqlite3.Connection, path: Path) -> list[str]:
    """Move (or report) the open entries of a results database's old journal."""
    try:
        found = conn.execute(f"SELECT * FROM journal WHERE state IN ({', '.join('?' for _ in OPEN)}) ORDER BY id",
                             OPEN).fetchall()  # fmt: skip
    except sqlite3.OperationalError:
        return []  # no journal table: nothing to move
    if not found:
        return []
    why = why_untrusted(path)
    if why:
        entries = f"{len(found)} open journal entr{'ies' if len(found) > 1 else 'y'}"
        return [f"{path} holds {entries} of an older quietcore. They are not replayed: {why}. A results database is "
                "never a reason to write a knob; check those knobs by hand with `quietcore audit`."]  # fmt: skip
    journal = node.open_node()
    assert journal is not None
    booted = _boot_time_iso()
    try:
        with journal, conn:
            for row in found:
                names = set(row.keys())  # sqlite3.Row's `in` looks at values, not names
                values = {c: row[c] for c in COLUMNS if c in names}
                values.setdefault("kind", "sysfs")
                values.setdefault("lasting", "temporary")
                before_boot = booted is not None and str(row["changed_at"]) < booted
                values["boot_id"] = "before-" + (booted or "unknown") if before_boot else node.boot_id()
                values["root"] = "/"
                columns = ", ".join(values)
                journal.execute(f"INSERT INTO journal ({columns}) VALUES ({', '.join('?' for _ in values)})",
                                tuple(values.values()))  # fmt: skip
                conn.execute("DELETE FROM journal WHERE id = ?", (row["id"],))
    finally:
        journal.close()
    return [f"moved {len(found)} open journal entr{'ies' if len(found) > 1 else 'y'} of an older quietcore from "
            f"{path} to the node journal"]  # fmt: skip
