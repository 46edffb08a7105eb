from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from quietcore.errors import StoreError, UsageError
from quietcore.runs.model import Run
from quietcore.store import db, sessions
from quietcore.store.schema import SCHEMA_VERSION

ROW = dict.fromkeys(sessions.NOISE_COLUMNS, 1.0) | {"cpu": 0, "steal_ns": None}


def _session(conn: sqlite3.Connection) -> int:
    return sessions.create_session(conn, "noise", ["quietcore", "noise"], {"a": 1}, "abc", {"k": "v"})


def test_new_database_is_migrated_and_in_wal_mode(tmp_path: Path) -> None:
    conn = db.open_db(tmp_path / "r.db")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"sessions", "runs", "noise_cpu"} <= tables


def _run(params: dict[str, Any], summary: list[dict[str, Any]] | None = None) -> Run:
    return Run("noise", params, sessions.now_iso(), sessions.now_iso(), {"result": {}}, "{}", summary=summary or [])


def test_run_is_committed_when_added(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    conn = db.open_db(path)
    sid = _session(conn)
    sessions.add_run(conn, sid, _run({"cpus": "0"}, [ROW]))
    # GIVEN a second connection, WHEN it reads before the first closes, THEN the run is there.
    other = sqlite3.connect(path)
    assert other.execute("SELECT COUNT(*) FROM noise_cpu").fetchone()[0] == 1
    assert other.execute("SELECT status FROM sessions").fetchone()[0] == "running"


def test_seq_counts_up_per_session(tmp_path: Path) -> None:
    conn = db.open_db(tmp_path / "r.db")
    sid = _session(conn)
    for _ in range(3):
        sessions.add_run(conn, sid, _run({}))
    runs = sessions.runs_of(conn, sid)
    assert [r.seq for r in runs] == [1, 2, 3]
    assert all(r.kind == "noise" and r.session_id == sid and r.trace is None for r in runs)


def test_corrupt_file_is_one_clear_error_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    path.write_bytes(b"this is not sqlite" * 100)
    before = path.read_bytes()
    with pytest.raises(StoreError, match="not a database"):
        db.open_db(path)
    assert path.read_bytes() == before


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    raw = sqlite3.connect(path)
    raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    raw.close()
    with pytest.raises(StoreError, match="newer than this quietcore"):
        db.open_db(path)


def test_chosen_path_in_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="does not exist"):
        db.open_db(tmp_path / "nope" / "r.db", chosen=True)
    assert not (tmp_path / "nope").exists()


def test_default_path_directory_is_created(tmp_path: Path) -> None:
    path = tmp_path / "data" / "quietcore" / "results.db"
    db.open_db(path, chosen=False).close()
    assert path.exists()


def test_read_only_commands_do_not_create(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no results database"):
        db.open_db(tmp_path / "r.db", create=False)
    assert not (tmp_path / "r.db").exists()


def test_default_path_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("QUIETCORE_DB", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert db.default_path() == tmp_path / "quietcore" / "results.db"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/ignored")
    assert db.default_path() == Path.home() / ".local" / "share" / "quietcore" / "results.db"
    monkeypatch.setenv("QUIETCORE_DB", "/x/y.db")
    assert db.default_path() == Path("/x/y.db")


def test_unknown_id_names_the_valid_range(tmp_path: Path) -> None:
    conn = db.open_db(tmp_path / "r.db")
    with pytest.raises(UsageError, match="no sessions yet"):
        sessions.get_session(conn, "1")
    _session(conn)
    with pytest.raises(UsageError, match=r"valid: 1-1"):
        sessions.get_session(conn, "7")
    row = sessions.get_session(conn, "1")
    assert sessions.get_session(conn, row.uuid[:8]).id == 1
    # A UUID whose prefix is all digits (one in about 40 is) is still found by that prefix.
    conn.execute("UPDATE sessions SET uuid = ? WHERE id = 1", ("90394997-" + row.uuid[9:],))
    assert sessions.get_session(conn, "90394997").id == 1


def test_stale_running_session_of_a_dead_process_is_marked_interrupted(tmp_path: Path) -> None:
    conn = db.open_db(tmp_path / "r.db")
    sid = _session(conn)
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    conn.execute("UPDATE sessions SET pid = ? WHERE id = ?", (pid, sid))
    conn.commit()
    live = _session(conn)
    sessions.mark_stale(conn)
    statuses = {r.id: r.status for r in sessions.list_sessions(conn)}
    assert statuses == {sid: "interrupted", live: "running"}


def test_tags_and_facts_are_json_decoded_once_by_the_store(tmp_path: Path) -> None:
    conn = db.open_db(tmp_path / "r.db")
    sid = _session(conn)
    stored = conn.execute("SELECT tags, facts FROM sessions WHERE id = ?", (sid,)).fetchone()
    assert json.loads(stored[0]) == {"k": "v"} and json.loads(stored[1]) == {"a": 1}
    row = sessions.get_session(conn, sid)
    assert row.tags == {"k": "v"} and row.facts == {"a": 1} and row.argv == ["quietcore", "noise"]


def test_a_files_file_system_is_read_off_the_longest_mount_above_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Which file system a path is on (the results database on NFS takes the
    rollback journal; the tests' files go to tmpfs): the longest mount point
    above it wins, and a mount point's escaped space is a space."""
    mounts = "\n".join([
        "/dev/vda / ext4 rw 0 0",
        "server:/home /home nfs4 rw 0 0",
        "tmpfs /home/a\\040b tmpfs rw 0 0",
        "tmpfs /home2 tmpfs rw 0 0",
    ])  # fmt: skip
    real_read = Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda p, *a, **k: mounts if str(p) == "/proc/self/mounts"
                        else real_read(p, *a, **k))  # fmt: skip
    monkeypatch.setattr(os.path, "realpath", lambda p: str(p))
    assert db.fs_type(Path("/home/u/data")) == "nfs4" and db.on_network_fs(Path("/home/u/data/results.db"))
    assert db.fs_type(Path("/home/a b/x")) == "tmpfs" and db.fs_type(Path("/home2")) == "tmpfs"
    assert db.fs_type(Path("/home22")) == "ext4" and not db.on_network_fs(Path("/srv/results.db"))


def test_a_session_is_named_the_same_way_by_every_command(tmp_path: Path) -> None:
    """`reference set` took only a number ('reference set ux=a': "no result with ID") where
    compare took tags; and after a fresh run on a database with history, 'reference set 1'
    picked the wrong one. find_session takes an ID, a UUID prefix, `last` and KEY=VALUE."""
    conn = db.open_db(tmp_path / "r.db")
    with pytest.raises(UsageError, match="no sessions yet"):
        sessions.find_session(conn, "last")
    first = sessions.create_session(conn, "noise", ["quietcore", "noise"], {}, "abc", {"ux": "a"})
    second = sessions.create_session(conn, "noise", ["quietcore", "noise"], {}, "abc", {"ux": "a"})
    third = sessions.create_session(conn, "lab", ["quietcore", "lab"], {}, "abc", {"ux": "b"})
    assert sessions.find_session(conn, "last").id == third
    assert sessions.find_session(conn, "ux=a").id == second  # the newest with the tag
    assert sessions.find_session(conn, str(first)).id == first
    uuid = sessions.get_session(conn, first).uuid
    assert sessions.find_session(conn, uuid[:8]).id == first
    with pytest.raises(UsageError, match=r"no session 'nope' \(valid: an ID 1-3, a UUID prefix, last, or a tag"):
        sessions.find_session(conn, "nope")
    with pytest.raises(UsageError, match="no session is tagged 'ux=c'"):
        sessions.find_session(conn, "ux=c")
