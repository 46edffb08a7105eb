"""Writing and reading sessions and runs. Each run is committed as soon as it
finishes, so a later failure or Ctrl-C loses nothing already measured."""

from __future__ import annotations

import datetime as dt
import getpass
import json
import os
import socket
import sqlite3
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from quietcore._version import __version__
from quietcore.errors import UsageError
from quietcore.runs.model import Run, SessionRecord

NOISE_COLUMNS = (
    "cpu",
    "measured_ns",
    "loops",
    "min_period_ns",
    "median_period_ns",
    "threshold_ns",
    "gaps",
    "total_gap_ns",
    "max_gap_ns",
    "lost_ns",
    "available_pct",
    "events_per_s",
    "events_dropped",
    "ctxsw_voluntary",
    "ctxsw_involuntary",
    "steal_ns",
)


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")


def _user() -> str | None:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None


def create_session(
    conn: sqlite3.Connection,
    command: str,
    argv: list[str],
    facts: Mapping[str, Any],
    fingerprint: str,
    tags: Mapping[str, str],
    started_at: str | None = None,
    runs: Iterable[Run] | None = None,
) -> int:
    """A new session, running; or, given its `runs` (an import, an analysis: work already done), stored
    complete with them in one transaction: all or nothing, a SIGTERM between two runs included (an import
    committed the session, then each run, and an interrupt left a session of half its runs). `started_at`:
    when the command began (now_iso), where it stores nothing until its work is done: its time is what
    `results list` gives it, not the storing's."""
    with conn:
        cur = conn.execute(
            "INSERT INTO sessions (uuid, command, argv, host, user, pid, started_at, status,"
            " tool_version, fingerprint, facts, tags) VALUES (?, ?, ?, ?, ?, ?, ?, 'running', ?, ?, ?, ?)",
            (
                str(uuid.uuid4()),
                command,
                json.dumps(argv),
                socket.gethostname(),
                _user(),
                os.getpid(),
                started_at or now_iso(),
                __version__,
                fingerprint,
                json.dumps(facts, sort_keys=True),
                json.dumps(dict(tags), sort_keys=True),
            ),
        )
        assert cur.lastrowid is not None
        session_id = cur.lastrowid
        if runs is not None:
            for seq, run in enumerate(runs, start=1):
                run.id, run.seq, run.session_id = insert_run(conn, session_id, seq, run), seq, session_id
            conn.execute("UPDATE sessions SET status = 'complete', ended_at = ? WHERE id = ?", (now_iso(), session_id))
    return session_id


def finish_session(conn: sqlite3.Connection, session_id: int, status: str, error: str | None = None) -> None:
    with conn:
        conn.execute(
            "UPDATE sessions SET status = ?, ended_at = ?, error = ? WHERE id = ?",
            (status, now_iso(), error, session_id),
        )


def insert(conn: sqlite3.Connection, table: str, values: Mapping[str, Any]) -> int:
    """INSERT one row from a column -> value mapping; returns its rowid."""
    columns = ", ".join(values)
    marks = ", ".join("?" for _ in values)
    cur = conn.execute(f"INSERT INTO {table} ({columns}) VALUES ({marks})", list(values.values()))
    assert cur.lastrowid is not None
    return cur.lastrowid


def add_noise_rows(conn: sqlite3.Connection, run_id: int, rows: Iterable[Mapping[str, Any]]) -> None:
    for row in rows:
        insert(conn, "noise_cpu", {"run_id": run_id, **{c: row.get(c) for c in NOISE_COLUMNS}})


def _events_apart(run: Run) -> tuple[str, dict[int, bytes]]:
    """A noise run's envelope text without its events' pairs, and its events
    as the store keeps them (runs.events), one blob a CPU."""
    if run.load_stored is not None and not run.stored:  # a stored run stored again: its events first
        run.stored = run.load_stored()
    stored = dict(run.stored)
    cpus = run.result.get("cpus") if run.kind == "noise" else None
    pairs = isinstance(cpus, list) and any(isinstance(c, dict) and c.get("events") for c in cpus)
    if not pairs and not run.arrays:
        return run.text, stored
    from quietcore.runs.events import encode_many  # numpy: see quietcore.lazy

    try:
        trace = run.trace  # the probe's arrays (probes.noise.run_noise), else the envelope's pairs
    except (ValueError, TypeError, KeyError):
        return run.text, stored  # not pairs (an edited import): kept as given, refused where it is read
    if trace is None:
        return run.text, stored
    stored = encode_many({c.cpu: (c.start_ns, c.duration_ns) for c in trace.cpus if c.cpu not in stored}) | stored
    if not pairs:  # the events came apart from the envelope: its text holds none
        return run.text, stored
    assert isinstance(cpus, list)
    kept = [{**c, "events": []} if isinstance(c, dict) and "events" in c else c for c in cpus]
    return json.dumps({**run.envelope, "result": {**run.result, "cpus": kept}}), stored


def add_run(conn: sqlite3.Connection, session_id: int, run: Run) -> int:
    """Store one finished run and its per-CPU summary in one transaction;
    the run gets its id and number in the session."""
    with conn:
        seq = conn.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM runs WHERE session_id = ?", (session_id,)).fetchone()
        run_id = insert_run(conn, session_id, int(seq[0]), run)
    run.id, run.seq, run.session_id = run_id, int(seq[0]), session_id
    return run_id


def insert_run(conn: sqlite3.Connection, session_id: int, seq: int, run: Run) -> int:
    """INSERT a run as number `seq` of a session, with its per-CPU summary;
    a noise run's events go to run_events, out of its envelope. In the
    caller's transaction."""
    text, stored = _events_apart(run)
    run_id = insert(
        conn,
        "runs",
        {
            "session_id": session_id,
            "seq": seq,
            "kind": run.kind,
            "params": json.dumps(run.params),
            "started_at": run.started,
            "ended_at": run.ended,
            "status": run.status,
            "envelope": text,
            "context": json.dumps(run.context),
            "analysis": json.dumps(run.analysis),
        },
    )
    add_noise_rows(conn, run_id, run.summary)
    conn.executemany("INSERT INTO run_events (run_id, cpu, events, data) VALUES (?, ?, ?, ?)",
                     [(run_id, cpu, _count(blob), blob) for cpu, blob in sorted(stored.items())])  # fmt: skip
    run.stored = stored
    return run_id


def _count(blob: bytes) -> int:
    return int.from_bytes(blob[4:8], "little") if len(blob) >= 8 else 0


def count_runs(conn: sqlite3.Connection, session_id: int) -> int:
    return int(conn.execute("SELECT COUNT(*) FROM runs WHERE session_id = ?", (session_id,)).fetchone()[0])


def mark_stale(conn: sqlite3.Connection) -> None:
    """Sessions left 'running' by a process of this host that no longer exists
    were killed or crashed: say so instead of leaving them running forever."""
    host = socket.gethostname()
    rows = conn.execute("SELECT id, pid FROM sessions WHERE status = 'running' AND host = ?", (host,)).fetchall()
    for row in rows:
        if row["pid"] and not _alive(int(row["pid"])):
            finish_session(conn, int(row["id"]), "interrupted", "the process ended without finishing the session")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def has_uuid(conn: sqlite3.Connection, uuid_text: str) -> bool:
    return conn.execute("SELECT 1 FROM sessions WHERE uuid = ?", (uuid_text,)).fetchone() is not None


def last_id(conn: sqlite3.Connection) -> int | None:
    value = conn.execute("SELECT MAX(id) FROM sessions").fetchone()[0]
    return int(value) if value is not None else None


def list_sessions(conn: sqlite3.Connection, kind: str | None = None) -> list[SessionRecord]:
    """Every session, oldest first; with `kind`, those with a run of that kind."""
    where = " WHERE EXISTS (SELECT 1 FROM runs k WHERE k.session_id = s.id AND k.kind = ?)" if kind else ""
    rows = conn.execute(
        "SELECT s.*, (SELECT COUNT(*) FROM runs r WHERE r.session_id = s.id) AS n_runs FROM sessions s"
        f"{where} ORDER BY s.id",
        (kind,) if kind else (),
    ).fetchall()
    return [SessionRecord.from_row(row) for row in rows]


def kinds(conn: sqlite3.Connection) -> list[str]:
    return [str(r[0]) for r in conn.execute("SELECT DISTINCT kind FROM runs ORDER BY kind")]


def tagged(conn: sqlite3.Connection, key: str, value: str) -> list[SessionRecord]:
    """The sessions tagged key=value, oldest first."""
    return [r for r in list_sessions(conn) if r.tags.get(key) == value]


def get_session(conn: sqlite3.Connection, session_id: str | int) -> SessionRecord:
    """A session by number or (a unique prefix of) its UUID; UsageError if none."""
    text = str(session_id).strip()
    row: sqlite3.Row | None = None
    if text.isdigit():
        row = conn.execute("SELECT * FROM sessions WHERE id = ?", (int(text),)).fetchone()
    # A UUID prefix may be all digits ("90394997"): one in about 40 of eight characters is.
    if row is None and len(text) >= 4:
        rows = conn.execute("SELECT * FROM sessions WHERE uuid LIKE ?", (text + "%",)).fetchall()
        row = rows[0] if len(rows) == 1 else None
    if row is None:
        last = last_id(conn)
        valid = f"valid: 1-{last}" if last else "the database has no sessions yet"
        raise UsageError(f"no result with ID {text!r} ({valid}; see `quietcore results list`)")
    return SessionRecord.from_row(row)


def find_session(conn: sqlite3.Connection, ident: str) -> SessionRecord:
    """A session as a user names it, the same for every command that takes one:
    its number, a UUID prefix, `last` (the newest), KEY=VALUE (the newest
    session with that tag), or job_ID (a job's record from `watch`, as its
    Slurm cgroup is named: job=ID)."""
    text = ident.strip()
    if text.startswith("job_") and text[4:].isdigit():
        text = f"job={text[4:]}"
    if text == "last":
        newest = last_id(conn)
        if newest is None:
            raise UsageError("no session to call last: the database has no sessions yet")
        return get_session(conn, newest)
    if "=" in text:
        key, _, value = text.partition("=")
        rows = tagged(conn, key, value)
        if not rows:
            raise UsageError(f"no session is tagged {text!r} (see `quietcore results list`)")
        return rows[-1]
    try:
        return get_session(conn, text)
    except UsageError:
        newest = last_id(conn)
        if newest is None:
            raise UsageError(f"no session {text!r}: the database has no sessions yet") from None
        raise UsageError(f"no session {text!r} (valid: an ID 1-{newest}, a UUID prefix, last, or a tag KEY=VALUE; "
                         "see `quietcore results list`)") from None  # fmt: skip


def find_group(conn: sqlite3.Connection, ident: str) -> list[SessionRecord]:
    """The sessions a side of `compare` names, oldest first: every session of a tag KEY=VALUE, each of a
    list 1,2,3, or the one session any other name gives (find_session)."""
    text = ident.strip()
    if "," in text:
        picked = [find_session(conn, one) for one in text.split(",") if one.strip()]
        if not picked:
            raise UsageError(f"no session in {text!r} (valid: IDs as 1,2,3)")
        return sorted({r.id: r for r in picked}.values(), key=lambda r: r.id)
    if "=" in text:
        key, _, value = text.partition("=")
        rows = tagged(conn, key, value)
        if not rows:
            raise UsageError(f"no session is tagged {text!r} (see `quietcore results list`)")
        return rows
    return [find_session(conn, text)]


def runs_of(conn: sqlite3.Connection, session_id: int, lazy_events: bool = False) -> list[Run]:
    """A session's runs in order, each decoded once, with its noise summary and
    its events (run_events); with `lazy_events`, those are read when its trace is
    first wanted, on this connection, which must then be open (`results show` of
    27 million events needs none of them)."""
    summaries: dict[int, list[dict[str, Any]]] = {}
    query = (f"SELECT n.run_id, {', '.join('n.' + c for c in NOISE_COLUMNS)} FROM noise_cpu n JOIN runs r"
             " ON r.id = n.run_id WHERE r.session_id = ? ORDER BY n.run_id, n.cpu")  # fmt: skip
    for row in conn.execute(query, (session_id,)):
        summaries.setdefault(row["run_id"], []).append({c: row[c] for c in NOISE_COLUMNS})
    rows = conn.execute("SELECT * FROM runs WHERE session_id = ? ORDER BY seq", (session_id,)).fetchall()
    out = [Run.from_row(row, summaries.get(row["id"], [])) for row in rows]
    for run in out:
        if run.kind == "noise" and run.id is not None:
            run.load_stored = _events_of(conn, run.id)
            if not lazy_events:
                run.stored, run.load_stored = run.load_stored(), None
    return out


def _events_of(conn: sqlite3.Connection, run_id: int) -> Callable[[], dict[int, bytes]]:
    def load() -> dict[int, bytes]:
        rows = conn.execute("SELECT cpu, data FROM run_events WHERE run_id = ?", (run_id,))
        return {int(row["cpu"]): bytes(row["data"]) for row in rows}

    return load
