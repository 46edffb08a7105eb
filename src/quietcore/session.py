"""A measuring session: the store opened first (so a bad database fails
before anything is measured), the node fingerprinted, each run stored as it
finishes, and the session closed as complete, failed or interrupted. The
measuring itself is quietcore.measure's; a session only owns the writing."""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from quietcore.errors import Interrupted
from quietcore.facts.root import Root
from quietcore.measure import Measurer, recorded
from quietcore.runs.model import Run
from quietcore.store import db, sessions


class Session:
    def __init__(self, command: str, db_path: Path, chosen: bool, tags: Mapping[str, str], root: Root) -> None:
        self.command = command
        self.db_path = db_path
        self.conn: sqlite3.Connection = db.open_db(db_path, chosen=chosen)
        self.node = Measurer(root)
        self.facts = self.node.facts
        self.fingerprint = self.node.fingerprint
        self.id = sessions.create_session(
            self.conn, command, ["quietcore", *sys.argv[1:]], self.facts, self.fingerprint, tags
        )

    def __enter__(self) -> Session:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if kind in (KeyboardInterrupt, Interrupted):
            sessions.finish_session(self.conn, self.id, "interrupted", "stopped by the user")
        elif kind is not None:
            sessions.finish_session(self.conn, self.id, "failed", str(exc))
        else:
            sessions.finish_session(self.conn, self.id, "complete")
        self.conn.close()

    @property
    def virtualized(self) -> bool:
        return self.node.virtualized

    def add(self, run: Run) -> Run:
        """Store a finished run (measured here or handed over by another
        process). An interrupted one is stored first, then the interrupt
        goes on: no further runs."""
        sessions.add_run(self.conn, self.id, run)
        if run.interrupted:
            raise Interrupted(f"interrupted: what was measured is stored as session {self.id} in {self.db_path}")
        return run

    def record(self, kind: str, params: dict[str, Any], started: str, envelope: dict[str, Any],
               analysis: dict[str, Any] | None = None) -> Run:  # fmt: skip
        return self.add(recorded(kind, params, started, envelope, analysis))

    def stored_runs(self) -> int:
        return sessions.count_runs(self.conn, self.id)
