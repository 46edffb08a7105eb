"""Exports of one session: JSON (everything, raw envelopes included; can be
imported back) and CSV (one row per run and CPU with the fingerprint)."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from typing import Any

from quietcore.errors import UsageError
from quietcore.store import sessions

FORMAT = "quietcore-results"
FORMAT_VERSION = 1
SESSION_FIELDS = (
    "uuid", "command", "argv", "host", "user", "started_at", "ended_at",
    "status", "tool_version", "fingerprint", "facts", "tags", "error",
)  # fmt: skip
JSON_FIELDS = ("argv", "facts", "tags")
RUN_JSON = ("params", "envelope", "context", "analysis")
RUN_FIELDS = ("seq", "kind", "params", "started_at", "ended_at", "status", "envelope", "context", "analysis")
CSV_SESSION = ("session_id", "session_uuid", "host", "fingerprint", "kernel_release", "virtualized", "hypervisor")
CSV_RUN = ("run_id", "seq", "kind", "run_status", "started_at")


def session_to_json(conn: sqlite3.Connection, row: sqlite3.Row) -> dict[str, Any]:
    session = {k: row[k] for k in SESSION_FIELDS}
    for key in JSON_FIELDS:
        session[key] = json.loads(session[key])
    session["id"] = row["id"]
    runs = []
    for run in sessions.runs_of(conn, row["id"]):
        item: dict[str, Any] = {k: run[k] for k in RUN_FIELDS}
        for key in RUN_JSON:
            item[key] = json.loads(item[key])
        item["id"] = run["id"]
        item["summary"] = sessions.noise_rows(conn, run["id"])
        runs.append(item)
    return {"format": FORMAT, "format_version": FORMAT_VERSION, "session": session, "runs": runs}


def session_to_csv(conn: sqlite3.Connection, row: sqlite3.Row) -> str:
    facts = json.loads(row["facts"])
    fixed = {
        "session_id": row["id"],
        "session_uuid": row["uuid"],
        "host": row["host"],
        "fingerprint": row["fingerprint"],
        "kernel_release": facts["kernel"]["release"],
        "virtualized": facts["virtualization"]["virtualized"],
        "hypervisor": facts["virtualization"]["hypervisor"],
    }
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=[*CSV_SESSION, *CSV_RUN, *sessions.NOISE_COLUMNS], lineterminator="\n")
    writer.writeheader()
    for run in sessions.runs_of(conn, row["id"]):
        per_run = {"run_id": run["id"], "seq": run["seq"], "kind": run["kind"], "run_status": run["status"],
                   "started_at": run["started_at"]}  # fmt: skip
        for summary in sessions.noise_rows(conn, run["id"]):
            writer.writerow({**fixed, **per_run, **summary})
    return out.getvalue()


def import_json(conn: sqlite3.Connection, data: Any) -> int:
    """Insert an exported session as a new session of this database."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UsageError(f'not a quietcore results export (expected "format": "{FORMAT}")')
    if data.get("format_version") != FORMAT_VERSION:
        raise UsageError(f"export format version {data.get('format_version')} is not {FORMAT_VERSION}")
    session = data["session"]
    if conn.execute("SELECT 1 FROM sessions WHERE uuid = ?", (session["uuid"],)).fetchone():
        raise UsageError(f"session {session['uuid']} is already in this database")
    with conn:
        values = {k: json.dumps(session[k], sort_keys=True) if k in JSON_FIELDS else session[k] for k in SESSION_FIELDS}
        session_id = sessions.insert(conn, "sessions", values)
        for run in data["runs"]:
            # "analysis" came with schema 2; an older export has none.
            run_values = {k: json.dumps(run.get(k, {})) if k in RUN_JSON else run[k] for k in RUN_FIELDS}
            run_id = sessions.insert(conn, "runs", {"session_id": session_id, **run_values})
            sessions.add_noise_rows(conn, run_id, run["summary"])
    return session_id
