"""Opening the results database: where it lives, migrating it, and turning
SQLite's failures into one-line errors that say what to do."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path
from urllib.parse import quote

from quietcore.errors import NotADatabase, StoreError
from quietcore.store.schema import MIGRATIONS, SCHEMA_VERSION

#: SQLite's result code for a file that is not a database (random bytes, a text file)
SQLITE_NOTADB = 26

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


NETWORK_FS = ("nfs", "nfs4", "cifs", "smb3", "lustre", "gpfs", "beegfs", "fuse.sshfs", "9p", "ceph")


def fs_type(directory: Path) -> str:
    """The file system `directory` lives on ("ext4", "tmpfs", "nfs4"...), from
    the longest mount point above it in /proc/self/mounts; "" if unknown."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return ""
    where = os.path.realpath(directory)
    best, kind = "", ""
    for line in mounts:
        fields = line.split()
        if len(fields) > 2:
            point = fields[1].replace("\\040", " ")
            if (where == point or where.startswith(point.rstrip("/") + "/")) and len(point) > len(best):
                best, kind = point, fields[2]
    return kind


def on_network_fs(path: Path) -> bool:
    """Whether the file `path` lives on a network file system."""
    return fs_type(path.parent) in NETWORK_FS


def _hint(path: Path) -> str:
    return f"results database {path}"


def why_untrusted(path: Path) -> str | None:
    """None when only we (and root) could have written the database: its
    file and its directory, neither a link (a sticky directory, as /tmp, is
    fine for a file we own)."""
    me = os.geteuid()
    for what in (path, path.parent):
        try:
            st = os.lstat(what)
        except FileNotFoundError:
            continue  # a database not made yet: its directory decides
        except OSError as exc:
            return f"cannot inspect {what}: {exc.strerror}"
        if stat.S_ISLNK(st.st_mode):
            return f"{what} is a symbolic link"
        if st.st_uid not in (0, me):
            return f"{what} is owned by uid {st.st_uid}"
        sticky_dir = what == path.parent and st.st_mode & stat.S_ISVTX
        if st.st_mode & 0o022 and not sticky_dir:
            return f"{what} is writable by others"
    return None


def open_db(path: Path, *, create: bool = True, chosen: bool = True, write: bool = True) -> sqlite3.Connection:
    """Open (creating and migrating as needed) the database at `path`.

    With create=False a missing file is an error rather than a new database,
    for commands that only read. As root, a database that another user
    could have written (or whose directory they could write: SQLite would
    follow a link planted as its -wal or -journal file) is opened read-only
    and immutable (no side files) when `write` is false, and refused when
    it is true."""
    _regular_or_missing(path)
    untrusted = why_untrusted(path) if os.geteuid() == 0 else None
    if untrusted and write:
        raise StoreError(
            f"refusing to write {_hint(path)} as root: {untrusted}, so another user could turn the "
            "write against another file (choose a --db only root can write, or run as that user)"
        )
    if untrusted:
        if not path.is_file():
            raise StoreError(f"no {_hint(path)} yet: run `quietcore lab` or `quietcore noise` first, or choose one "
                             "with --db")  # fmt: skip
        return _open_immutable(path)
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
        # WAL: readers (a report) never block the writer (a long lab run);
        # but not on a network file system, where WAL's shared memory does
        # not work across hosts (a cluster's $HOME on NFS).
        conn.execute("PRAGMA journal_mode = DELETE" if on_network_fs(path) else "PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA trusted_schema = OFF")  # a database file is input: its schema runs no function
        # FULL, whatever this SQLite's default: each commit is fsync'd, so a
        # lever's old value is on disk before the write it guards (a power
        # loss, not only a kill -9, leaves the journal able to revert).
        conn.execute("PRAGMA synchronous = FULL")
    except sqlite3.DatabaseError as exc:
        error = _error_of(exc)
        raise error(f"cannot use {_hint(path)}: {exc} (choose another with --db or {ENV_VAR})") from exc
    return conn


def _error_of(exc: sqlite3.DatabaseError) -> type[StoreError]:
    """A file that is not a database is bad input (exit 2); any other failure of SQLite's is the store's."""
    return NotADatabase if getattr(exc, "sqlite_errorcode", None) == SQLITE_NOTADB else StoreError


def _regular_or_missing(path: Path) -> None:
    """A database is a regular file, or none yet: SQLite opening a FIFO blocked, for good where the
    FIFO could be read but not written, and /dev/zero looked like an empty database."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StoreError(f"cannot use {_hint(path)}: {exc.strerror}") from None
    if not stat.S_ISREG(mode):
        raise NotADatabase(f"cannot use {_hint(path)}: not a regular file (choose another with --db or {ENV_VAR})")


def _open_immutable(path: Path) -> sqlite3.Connection:
    try:
        conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro&immutable=1", uri=True)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA trusted_schema = OFF")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        error = _error_of(exc)
        raise error(f"cannot use {_hint(path)}: {exc}") from exc
    if version != SCHEMA_VERSION:
        conn.close()
        raise StoreError(f"{_hint(path)} has schema version {version}, not {SCHEMA_VERSION}, and is not root's to "
                         "migrate: open it as its owner first")  # fmt: skip
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
