"""References in the results database: a node's noise per CPU for one
configuration, named, one per name and host (setting a name again replaces
it). Decoded by quietcore.runs.reference, once."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from typing import Any

from quietcore.errors import UsageError
from quietcore.runs.reference import CpuNoise, Reference
from quietcore.store.sessions import now_iso


def put(conn: sqlite3.Connection, name: str, host: str, fingerprint: str, session_id: int, facts: dict[str, Any],
        cpus: Iterable[CpuNoise]) -> int:  # fmt: skip
    data = json.dumps({"facts": facts, "cpus": [c.to_json() for c in sorted(cpus, key=lambda c: c.cpu)]})
    with conn:
        conn.execute("DELETE FROM refs WHERE name = ? AND host = ?", (name, host))
        cur = conn.execute(
            "INSERT INTO refs (name, host, fingerprint, session_id, created_at, data) VALUES (?, ?, ?, ?, ?, ?)",
            (name, host, fingerprint, session_id, now_iso(), data),
        )
    assert cur.lastrowid is not None
    return cur.lastrowid


def all_references(conn: sqlite3.Connection) -> list[Reference]:
    """Every reference, oldest first."""
    return [Reference.from_row(r) for r in conn.execute("SELECT * FROM refs ORDER BY id")]


def named(conn: sqlite3.Connection, name: str, host: str) -> Reference:
    """The reference `name` of this host (or, if the host has none, of the one host that has it)."""
    rows = [r for r in all_references(conn) if r.name == name]
    mine = [r for r in rows if r.host == host]
    if mine:
        return mine[0]
    if len(rows) == 1:
        return rows[0]
    known = sorted({r.name for r in all_references(conn)})
    valid = ", ".join(known) if known else "none yet: quietcore reference set SESSION"
    where = f" for host {host}" if rows else ""
    raise UsageError(f"no reference named {name!r}{where} (valid: {valid})")


def for_node(conn: sqlite3.Connection, fingerprint: str, host: str) -> Reference | None:
    """What --reference auto takes: the newest reference of this configuration (this
    host's first); else this host's newest of any configuration (the check names the
    drift); else None."""
    rows = all_references(conn)
    for same_config, same_host in ((True, True), (True, False), (False, True)):
        hits = [r for r in rows
                if (r.fingerprint == fingerprint or not same_config) and (r.host == host or not same_host)]  # fmt: skip
        if hits:
            return hits[-1]
    return None
