"""Options several commands share, added and read the same way."""

from __future__ import annotations

import argparse
import os
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from quietcore import outputs
from quietcore.attribution import instances
from quietcore.errors import StoreError, UsageError
from quietcore.facts.root import Root
from quietcore.levers.journal import recover
from quietcore.lock import NodeLock
from quietcore.options import positive_float, tags_option
from quietcore.report.screen import screen
from quietcore.statedir import StateError, default_path
from quietcore.store import db, legacy, sessions
from quietcore.store import journal as node

if TYPE_CHECKING:
    from quietcore.fleet.verdict import Verdict
    from quietcore.lock import NodeLock
    from quietcore.runs.reference import CpuNoise


def add_db(parser: argparse.ArgumentParser, default: object = None) -> None:
    parser.add_argument(
        "--db",
        metavar="PATH",
        default=default,
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


def add_prometheus(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prometheus", metavar="DIR",
                        help="also write DIR/quietcore.prom for node_exporter's textfile collector")  # fmt: skip


def prometheus_dir(args: argparse.Namespace) -> Path | None:
    """--prometheus DIR: an existing directory (node_exporter's
    --collector.textfile.directory), refused before anything is measured."""
    if getattr(args, "prometheus", None) is None:
        return None
    where = Path(args.prometheus)
    if not where.is_dir():
        raise UsageError(f"--prometheus {args.prometheus}: not a directory (give node_exporter's "
                         "--collector.textfile.directory, e.g. /var/lib/prometheus/node-exporter)")  # fmt: skip
    return outputs.directory(where, "--prometheus", make=False)


def publish(where: Path, command: str, facts: Mapping[str, Any], fingerprint: str, cpus: Iterable[CpuNoise],
            verdict: Verdict | None = None) -> str:  # fmt: skip
    """Write the metrics file of these CPUs (fleet.baseline.cpu_noise, with their gaps); say where."""
    from quietcore.fleet import prometheus  # prometheus_client: see quietcore.lazy

    written = prometheus.write(where, prometheus.snapshot(command, facts, fingerprint, cpus, verdict))
    return f"Metrics for node_exporter: {written}"


def add_wait(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--wait", metavar="S", default="0", help="wait up to S seconds for another quietcore using these CPUs or levers"
    )


def wait_s(args: argparse.Namespace) -> float:
    return positive_float(args.wait, "--wait", 0, 86400)


def node_lock(args: argparse.Namespace, cpus: Iterable[int], levers: Iterable[str] = ()) -> NodeLock:
    """The node lock on what this command measures (its CPUs) and changes
    (its levers), honouring --wait."""

    return NodeLock(cpus, levers, wait_s(args))


def say(line: str) -> None:
    """A line for a person on stderr, wrapped to the width it is read in."""
    screen(stderr=True).print(line)


def recover_node(args: argparse.Namespace) -> None:
    """What every command does first: the tracefs instances and the
    temporary knob changes that ended quietcore processes left behind are
    removed and put back, saying so;
    sessions of dead processes in the results database are closed as
    interrupted. Nothing in a results database is ever replayed: open
    entries of an older quietcore's journal there are moved to the node
    journal only from a database that root alone can write (see legacy)."""

    verbose = bool(getattr(args, "verbose", False))
    if os.geteuid() == 0:
        for name in instances.remove_stale():
            if verbose:
                say(f"quietcore: removed the tracefs instance {name}, left tracing every CPU by a quietcore that was "
                    "killed.")  # fmt: skip
    path, _ = db.resolve_path(getattr(args, "db", None))
    try:
        present = path.is_file()
    except OSError:  # a directory on the way this user may not search: the command says what it can
        present = False
    if present and not _survey_rank_above_0(args):
        try:
            conn = db.open_db(path, create=False, write=db.why_untrusted(path) is None or os.geteuid() != 0)
        except StoreError:
            conn = None
        if conn is not None:
            try:
                for line in legacy.move_open_entries(conn, path):
                    if verbose or not line.startswith("moved "):  # one that was not moved is for a person to see
                        say(f"quietcore: {line}")
                sessions.mark_stale(conn)
            except (sqlite3.Error, StateError):
                pass  # a locked or read-only database: the command will say what it can
            finally:
                conn.close()
    try:
        journal = node.open_node(create=False)
    except (StateError, sqlite3.Error) as exc:
        say(f"quietcore: {exc}")
        return
    if journal is None:
        return
    try:
        for settled in recover(journal):
            if settled.failed or verbose:  # the rest is the journal's own housekeeping
                say(f"quietcore: {settled.text}")
    except sqlite3.Error as exc:
        say(f"quietcore: cannot use the node journal: {exc}")
    finally:
        journal.close()


def _survey_rank_above_0(args: argparse.Namespace) -> bool:
    """A survey's ranks other than 0 never open a results database (on a
    cluster the default one is often $HOME on NFS, and rank 0 writes)."""
    if getattr(args, "command", None) != "survey":
        return False
    for name in ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"):
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value) != 0
    return False


def journal_of(root: Root) -> tuple[list[dict[str, object]] | None, str]:
    """quietcore's changes still in force on `root`, and where they were
    read: the node journal on a live node, the manifest of a snapshot
    (None when it has none)."""
    if not root.is_live:
        entries = root.manifest().get("journal")
        return (entries if isinstance(entries, list) else None), "quietcore-snapshot.json journal"

    where = str(default_path() / node.FILE)
    try:
        conn = node.open_node(create=False)
    except (StateError, sqlite3.Error):
        return None, where
    if conn is None:
        return [], where
    try:
        return node.outstanding(conn), where
    except sqlite3.Error:
        return None, where
    finally:
        conn.close()


def add_detail(parser: argparse.ArgumentParser) -> None:
    """--cpu N and --per-cpu: a noise run of many CPUs is shown grouped (report.summary)."""
    parser.add_argument("--cpu", metavar="N", help="one CPU's detail")
    parser.add_argument("--per-cpu", action="store_true", help="every CPU's detail, however many (summed up above 4)")


def detail(args: argparse.Namespace) -> tuple[int | None, bool]:
    """(--cpu, --per-cpu), the CPU a number."""
    cpu = getattr(args, "cpu", None)
    if cpu is not None and not str(cpu).isdigit():
        raise UsageError(f"invalid --cpu {cpu!r} (valid: a CPU number)")
    return (int(cpu) if cpu is not None else None), bool(getattr(args, "per_cpu", False))
