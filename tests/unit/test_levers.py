"""The lever journal and the THP lever: on a THP directory of files in the
kernel's format (no root needed), and on this node's own THP (root), which
the fixture puts back whatever happens."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from quietcore.errors import UsageError
from quietcore.levers.journal import Journal, recover
from quietcore.levers.thp import BASE, ThpLever
from quietcore.store import db


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    connection = db.open_db(tmp_path / "r.db")
    yield connection
    connection.close()


@pytest.fixture
def thp_dir(tmp_path: Path) -> Path:
    base = tmp_path / "thp"
    base.mkdir()
    (base / "enabled").write_text("always [madvise] never\n")
    (base / "defrag").write_text("always defer defer+madvise [madvise] never\n")
    return base


def test_change_is_journaled_before_and_undone_after(conn: sqlite3.Connection, thp_dir: Path) -> None:
    lever = ThpLever("enabled", thp_dir)
    with Journal(conn, None) as journal:
        lever.apply("never", journal)
        assert (thp_dir / "enabled").read_text() == "never"
        (state,) = conn.execute("SELECT state FROM journal").fetchone()
        assert state == "applied"
    assert (thp_dir / "enabled").read_text() == "madvise"  # the old value, exactly
    row = conn.execute("SELECT lever, old_value, new_value, state FROM journal").fetchone()
    assert tuple(row) == ("thp.enabled", "madvise", "never", "reverted")


def test_unknown_value_lists_what_the_kernel_offers(conn: sqlite3.Connection, thp_dir: Path) -> None:
    with pytest.raises(UsageError, match=r"invalid thp.defrag value 'sometimes' \(this kernel offers: always, defer"):
        ThpLever("defrag", thp_dir).apply("sometimes", Journal(conn, None))
    assert conn.execute("SELECT COUNT(*) FROM journal").fetchone()[0] == 0


def test_a_crashed_run_is_reverted_at_the_next_start(conn: sqlite3.Connection, thp_dir: Path, tmp_path: Path) -> None:
    # GIVEN a process that applies a change and dies without undoing it
    pid = os.fork()
    if pid == 0:
        child = db.open_db(tmp_path / "r.db")
        ThpLever("enabled", thp_dir).apply("always", Journal(child, None))
        os._exit(0)
    os.waitpid(pid, 0)
    assert (thp_dir / "enabled").read_text() == "always"
    # WHEN quietcore next starts THEN the change is put back
    restored = recover(conn)
    assert restored == [f"restored thp.enabled to 'madvise' ({thp_dir / 'enabled'})"]
    assert (thp_dir / "enabled").read_text() == "madvise"
    assert conn.execute("SELECT state FROM journal").fetchone()[0] == "reverted"
    assert recover(conn) == []  # nothing left to do


@pytest.fixture
def real_thp() -> Iterator[str]:
    """This node's THP setting, put back after the test whatever happens."""
    if os.geteuid() != 0 or not (BASE / "enabled").exists():
        pytest.skip("needs root and transparent huge pages")
    original = ThpLever("enabled").read()
    try:
        yield original
    finally:
        (BASE / "enabled").write_text(original)


def test_real_thp_is_changed_and_restored(conn: sqlite3.Connection, real_thp: str) -> None:
    lever = ThpLever("enabled")
    other = next(c for c in lever.choices() if c != real_thp)
    with Journal(conn, None) as journal:
        lever.apply(other, journal)
        assert lever.read() == other  # the kernel really took it
    assert lever.read() == real_thp
