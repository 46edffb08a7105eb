"""Exports of one session: JSON (everything, raw envelopes included; can be
imported back; described by schemas/results-v1.schema.json) and a flat
table as CSV or Parquet (one row per run, per run and CPU for noise runs,
with the factor values and the session fingerprint)."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from pathlib import Path
from typing import Any

from quietcore.errors import CommandError, UsageError
from quietcore.report.kinds import cell, kind_of
from quietcore.report.kinds.base import MEASURED, METRIC, RUN_COLUMNS
from quietcore.runs.model import Run, SessionRecord
from quietcore.safe import csv_cell, plain
from quietcore.store import sessions

FORMAT = "quietcore-results"
FORMAT_VERSION = 1
SESSION_FIELDS = (
    "uuid", "command", "argv", "host", "user", "started_at", "ended_at",
    "status", "tool_version", "fingerprint", "facts", "tags", "error",
)  # fmt: skip
JSON_FIELDS = ("argv", "facts", "tags")
RUN_FIELDS = ("seq", "kind", "params", "started_at", "ended_at", "status", "envelope", "context", "analysis")
CSV_SESSION = ("session_id", "session_uuid", "host", "rank", "fingerprint", "kernel_release", "virtualized",
               "hypervisor")  # fmt: skip


def session_to_json(conn: sqlite3.Connection, row: SessionRecord) -> dict[str, Any]:
    session = row.exported()
    runs = [kind_of(run).to_json(run) for run in sessions.runs_of(conn, row.id)]
    return {"format": FORMAT, "format_version": FORMAT_VERSION, "session": session, "runs": runs}


def table_rows(conn: sqlite3.Connection, row: SessionRecord) -> tuple[list[str], list[dict[str, Any]]]:
    """The flat table of a session: the rows each run's kind gives (one per
    run; per run and CPU for noise), each after the session's columns.
    Columns (documented in the README): session, run, the experiment's cell
    and every factor as factor_NAME, the workload's metric, its measured
    region, and the noise summary of a CPU."""
    facts = row.facts
    fixed = {
        "session_id": row.id,
        "session_uuid": row.uuid,
        "host": row.host,
        "fingerprint": row.fingerprint,
        "kernel_release": facts["kernel"]["release"],
        "virtualized": facts["virtualization"]["virtualized"],
        "hypervisor": facts["virtualization"]["hypervisor"],
    }
    out: list[dict[str, Any]] = []
    factors: list[str] = []
    for run in sessions.runs_of(conn, row.id):
        place = run.params.get("survey") or {}  # a survey's run is of its node: its host and rank
        where = {"host": place["host"], "rank": place["rank"]} if place else {"rank": None}
        for item in kind_of(run).rows(run):
            factors += [k for k in item if k.startswith("factor_") and k not in factors]
            out.append({**fixed, **where, **item})
    columns = [*CSV_SESSION, *RUN_COLUMNS, *cell.COLUMNS, *factors, *METRIC, *MEASURED, *sessions.NOISE_COLUMNS]
    return columns, [{c: r.get(c) for c in columns} for r in out]


def session_to_csv(conn: sqlite3.Connection, row: SessionRecord) -> str:
    columns, rows = table_rows(conn, row)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: csv_cell(v) for k, v in r.items()} for r in rows)  # no cell a spreadsheet would run
    return out.getvalue()


def session_to_parquet(conn: sqlite3.Connection, row: SessionRecord) -> bytes:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise CommandError("--format parquet needs pyarrow: pip install 'quietcore[parquet]'", exit_code=3) from exc
    columns, rows = table_rows(conn, row)
    table = pa.Table.from_pylist(rows) if rows else pa.table({c: pa.array([], pa.null()) for c in columns})
    table = table.select(columns) if rows else table
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    data: bytes = sink.getvalue().to_pybytes()
    return data


SCHEMA = Path(__file__).resolve().parent.parent / "schemas" / "results-v1.schema.json"


def schema_problems(data: Any) -> list[str]:
    """Every way `data` breaks the shipped schema, one line each (where,
    and what): an imported file is another machine's text."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text(encoding="utf-8")))
    found = sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '(top)'}: {plain(e.message[:200])}" for e in found]


def import_json(conn: sqlite3.Connection, data: Any) -> int:
    """Insert an exported session as a new session of this database."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UsageError(f'not a quietcore results export (expected "format": "{FORMAT}")')
    if data.get("format_version") != FORMAT_VERSION:
        raise UsageError(f"export format version {data.get('format_version')} is not {FORMAT_VERSION}")
    session = data["session"]
    if sessions.has_uuid(conn, session["uuid"]):
        raise UsageError(f"session {session['uuid']} is already in this database")
    with conn:
        values = {k: json.dumps(session[k], sort_keys=True) if k in JSON_FIELDS else session[k] for k in SESSION_FIELDS}
        session_id = sessions.insert(conn, "sessions", values)
        for run in data["runs"]:
            # "analysis" came with schema 2; an older export has none.
            envelope = run["envelope"]
            sessions.insert_run(conn, session_id, int(run["seq"]),
                                Run(run["kind"], run["params"], run["started_at"], run["ended_at"], envelope,
                                    json.dumps(envelope), run["status"], run.get("context") or {},
                                    run.get("analysis") or {}, list(run["summary"])))  # fmt: skip
    return session_id
