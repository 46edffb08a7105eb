"""Opening the results database: where it lives, migrating it, and turning
SQLite's failures into one-line errors that say what to do."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from quietcore.errors import StoreError
from quietcore.store.schema import MIGRATIONS, SCHEMA_VERSION

ENV_VAR = "QUIETCORE_DB"


def default_path() -> Path:
    """$QUIETCORE_DB, else $XDG_DATA_HOME/quietcore/results.db (XDG Base
    Directory spec: ~/.local/share when XDG_DATA_HOME is unset or relative)."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env)
    data_home = os.environ.get("XDG_DATA_HOME", "")
    base = Path(data_home) if os.path.isabs(data_home) else Path.home() / ".local" / "share"
    return base / "quietcore" / "results.db"


def resolve_path(option: str | None) -> tuple[Path, bool]:
    """The database path and whether the user chose it (--db or the env var)."""
    if option:
        return Path(option), True
    return default_path(), ENV_VAR in os.environ


def _hint(path: Path) -> str:
    return f"results database {path}"


def open_db(path: Path, *, create: bool = True, chosen: bool = True) -> sqlite3.Connection:
    """Open (creating and migrating as needed) the database at `path`.

    With create=False a missing file is an error rather than a new database,
    for commands that only read."""
    if not path.exists():
        if not create:
            raise StoreError(
                f"no {_hint(path)} yet: run `quietcore lab` or `quietcore noise` first, or choose one with --db"
            )
        if not chosen:
            path.parent.mkdir(parents=True, exist_ok=True)
        elif not path.parent.is_dir():
            raise StoreError(f"cannot create {_hint(path)}: directory {path.parent} does not exist")
    try:
        conn = sqlite3.connect(path, timeout=30)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA foreign_keys = ON")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            conn.close()
            raise StoreError(
                f"{_hint(path)} has schema version {version}, newer than this quietcore "
                f"understands ({SCHEMA_VERSION}): upgrade quietcore"
            )
        if version < SCHEMA_VERSION:
            _migrate(conn, version)
        # WAL: readers (a report) never block the writer (a long lab run).
        conn.execute("PRAGMA journal_mode = WAL")
        # FULL, whatever this SQLite's default: each commit is fsync'd, so a
        # lever's old value is on disk before the write it guards (a power
        # loss, not only a kill -9, leaves the journal able to revert).
        conn.execute("PRAGMA synchronous = FULL")
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"cannot use {_hint(path)}: {exc} (choose another with --db or {ENV_VAR})") from exc
    return conn


def _migrate(conn: sqlite3.Connection, version: int) -> None:
    for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
        # executescript commits first; wrap each step so a failure leaves the
        # database at the previous version, not half-way.
        try:
            conn.executescript(f"BEGIN;\n{script}\nPRAGMA user_version = {number};\nCOMMIT;")
        except sqlite3.DatabaseError:
            if conn.in_transaction:
                conn.rollback()
            raise
