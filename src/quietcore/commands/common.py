"""Options several commands share, added and read the same way."""

from __future__ import annotations

import argparse
import socket
import sqlite3
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from quietcore.errors import StoreError
from quietcore.facts.root import Root
from quietcore.options import positive_float, tags_option
from quietcore.store import db

if TYPE_CHECKING:
    from quietcore.lock import NodeLock


def add_db(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        metavar="PATH",
        help=f"results database (default: ${db.ENV_VAR}, else $XDG_DATA_HOME/quietcore/results.db)",
    )


def add_tags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tag", action="append", metavar="KEY=VALUE", help="label the session (repeatable)")


def db_path(args: argparse.Namespace) -> tuple[Path, bool]:
    return db.resolve_path(args.db)


def tags(args: argparse.Namespace) -> dict[str, str]:
    return tags_option(args.tag)


def live_root() -> Root:
    """Measuring commands read the node they run on."""
    return Root("/")


def add_wait(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--wait", metavar="S", default="0", help="wait up to S seconds for another quietcore using these CPUs or levers"
    )


def wait_s(args: argparse.Namespace) -> float:
    return positive_float(args.wait, "--wait", 0, 86400)


def node_lock(args: argparse.Namespace, cpus: Iterable[int], levers: Iterable[str] = ()) -> NodeLock:
    """The node lock on what this command measures (its CPUs) and changes
    (its levers), honouring --wait."""
    from quietcore.lock import NodeLock

    return NodeLock(cpus, levers, wait_s(args))


def recover_node(args: argparse.Namespace) -> None:
    """What every command does first: sessions of dead processes are closed
    as interrupted, and the temporary lever changes they left are put back,
    saying so. A database that cannot be opened is left to the command."""
    path, _ = db.resolve_path(getattr(args, "db", None))
    if not path.is_file():
        return
    from quietcore.levers.journal import recover
    from quietcore.store import sessions

    try:
        conn = db.open_db(path, create=False)
    except StoreError:
        return
    try:
        sessions.mark_stale(conn)
        for line in recover(conn):
            print(f"quietcore: {line}", file=sys.stderr)
    except sqlite3.Error:
        pass  # a locked or read-only database: the command will say what it can
    finally:
        conn.close()


def journal_of(root: Root, db_option: str | None) -> tuple[list[dict[str, object]] | None, str]:
    """quietcore's changes still in force on `root`, and where they were
    read: the journal of the results database on a live node, the manifest
    of a snapshot (None when it has none)."""
    if not root.is_live:
        entries = root.manifest().get("journal")
        return (entries if isinstance(entries, list) else None), "quietcore-snapshot.json journal"
    path, _ = db.resolve_path(db_option)
    if not path.is_file():
        return [], str(path)
    from quietcore.store import journal as journal_rows

    try:
        conn = db.open_db(path, create=False)
        try:
            return journal_rows.outstanding(conn, socket.gethostname()), str(path)
        finally:
            conn.close()
    except (StoreError, sqlite3.Error):
        return None, str(path)
