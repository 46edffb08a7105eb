"""The lever journal. A change is recorded as 'pending' before the write,
'applied' after it, and 'reverted' when undone; undo runs in reverse order
when the work ends, on Ctrl-C and SIGTERM too (through the context manager
and cli's SIGTERM handler). A process that died with changes applied leaves
them in the journal, and `recover` puts them back at the next start.
Unlike pyperf's reset, which writes fixed defaults, this restores exactly
what was there before."""

from __future__ import annotations

import os
import socket
import sqlite3
import sys
from pathlib import Path
from types import TracebackType

from quietcore.errors import CommandError, UsageError
from quietcore.store import sessions


def _write(target: Path, value: str) -> None:
    try:
        target.write_text(value)
    except PermissionError as exc:
        raise CommandError(f"cannot write {target}: needs root", exit_code=3) from exc
    except OSError as exc:
        raise CommandError(f"cannot write {value!r} to {target}: {exc.strerror}", exit_code=1) from exc


class Journal:
    def __init__(self, conn: sqlite3.Connection, session_id: int | None) -> None:
        self.conn = conn
        self.session_id = session_id
        self.open: list[int] = []  # entry ids applied by this journal, in order

    def change(self, lever: str, target: Path, old: str, new: str) -> None:
        """Set target to new, having recorded old first."""
        with self.conn:
            values = {"session_id": self.session_id, "host": socket.gethostname(), "pid": os.getpid()}
            values |= {"lever": lever, "target": str(target), "old_value": old, "new_value": new}
            entry = sessions.insert(
                self.conn, "journal", {**values, "state": "pending", "changed_at": sessions.now_iso()}
            )
        try:
            _write(target, new)
        except CommandError:
            self._mark(entry, "failed", "the write was refused")
            raise
        self._mark(entry, "applied")
        self.open.append(entry)

    def choose(self, lever: str, target: Path, value: str, offered: list[str], current: str) -> None:
        """Set a selector file (THP, the preemption model) to one of the
        values the kernel offers; a value it does not offer is bad input."""
        if value not in offered:
            raise UsageError(f"invalid {lever} value {value!r} (this kernel offers: {', '.join(offered) or 'none'})")
        if current != value:
            self.change(lever, target, current, value)

    def _mark(self, entry: int, state: str, note: str | None = None) -> None:
        with self.conn:
            reverted = sessions.now_iso() if state == "reverted" else None
            self.conn.execute(
                "UPDATE journal SET state = ?, reverted_at = COALESCE(?, reverted_at), note = COALESCE(?, note)"
                " WHERE id = ?",
                (state, reverted, note, entry),
            )

    def undo(self) -> list[str]:
        """Put back every change of this journal, newest first; returns the
        problems met (a lever that could not be restored is reported, and
        stays 'applied' so that `recover` tries again)."""
        problems = []
        for entry in reversed(self.open):
            row = self.conn.execute("SELECT target, old_value FROM journal WHERE id = ?", (entry,)).fetchone()
            try:
                _write(Path(row["target"]), row["old_value"])
                self._mark(entry, "reverted")
            except CommandError as exc:
                problems.append(str(exc))
        self.open.clear()
        return problems

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        for problem in self.undo():
            print(f"quietcore: {problem} (left in the journal: the next start tries again)", file=sys.stderr)


def recover(conn: sqlite3.Connection) -> list[str]:
    """Revert what dead quietcore processes of this host left applied (or
    pending: the write may have happened). Returns what was restored."""
    host = socket.gethostname()
    rows = conn.execute(
        "SELECT id, pid, lever, target, old_value FROM journal WHERE state IN ('pending', 'applied') AND host = ?"
        " ORDER BY id DESC",
        (host,),
    ).fetchall()
    restored = []
    for row in rows:
        if Path(f"/proc/{row['pid']}").exists() and row["pid"] != os.getpid():
            continue  # still running: its own undo will do it
        try:
            _write(Path(row["target"]), row["old_value"])
        except CommandError as exc:
            restored.append(f"could not restore {row['lever']} ({row['target']}): {exc}")
            continue
        with conn:
            conn.execute(
                "UPDATE journal SET state = 'reverted', reverted_at = ?, note = ? WHERE id = ?",
                (sessions.now_iso(), f"restored at the next start (pid {row['pid']} had ended)", row["id"]),
            )
        restored.append(f"restored {row['lever']} to {row['old_value']!r} ({row['target']})")
    return restored
