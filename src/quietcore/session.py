"""A measuring session: open the store first (so a bad database fails before
anything is measured), fingerprint the node, record each run as it finishes,
and close the session as complete, failed or interrupted."""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from quietcore.errors import Interrupted
from quietcore.facts.fingerprint import collect_facts, fingerprint
from quietcore.facts.procstat import parse_proc_stat, steal_delta_ns
from quietcore.facts.root import Root
from quietcore.probes.calibrate import run_calibrate
from quietcore.probes.noise import NoiseOptions, run_noise, summary_rows
from quietcore.probes.runner import ProbeResult
from quietcore.store import db, sessions


class Session:
    def __init__(self, command: str, db_path: Path, chosen: bool, tags: Mapping[str, str], root: Root) -> None:
        self.command = command
        self.db_path = db_path
        self.root = root
        self.conn: sqlite3.Connection = db.open_db(db_path, chosen=chosen)
        sessions.mark_stale(self.conn)
        self.facts: dict[str, Any] = collect_facts(root)
        self.fingerprint = fingerprint(self.facts)
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

    def _user_hz(self) -> int:
        return os.sysconf("SC_CLK_TCK")

    def noise(
        self, options: NoiseOptions, on_tick: Callable[[float], None] | None = None
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Measure, with /proc/stat read around the run for steal time.
        Returns the per-CPU summary rows and the probe's full result."""
        started = sessions.now_iso()
        before = parse_proc_stat(self.root.read_text("proc/stat") or "")
        probe = run_noise(options, on_tick)
        after = parse_proc_stat(self.root.read_text("proc/stat") or "")
        steal = steal_delta_ns(before, after, self._user_hz())
        rows = summary_rows(probe.result, steal)
        context = {"steal_ns": {str(k): v for k, v in steal.items()}, "user_hz": self._user_hz()}
        self._store("noise", options.params(), started, probe, context, rows)
        return rows, probe.result

    def calibrate(self, trials: int = 5, trial_ms: int = 100) -> dict[str, Any]:
        started = sessions.now_iso()
        probe = run_calibrate(trials, trial_ms)
        self._store("calibrate", {"trials": trials, "trial_ms": trial_ms}, started, probe, {}, [])
        return probe.result

    def _store(
        self,
        kind: str,
        params: dict[str, Any],
        started: str,
        probe: ProbeResult,
        context: dict[str, Any],
        rows: list[dict[str, Any]],
    ) -> None:
        status = "interrupted" if probe.interrupted else "complete"
        sessions.add_run(self.conn, self.id, kind, params, started, status, probe.text, context, rows)
        if probe.interrupted:
            # Stored first, then the interrupt goes on: no further runs.
            raise Interrupted(f"interrupted: what was measured is stored as session {self.id} in {self.db_path}")
