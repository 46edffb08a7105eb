"""List, show, export and import stored results.

  quietcore results list
  quietcore results show ID
  quietcore results export ID [--format json|csv|parquet|trace|psnap] [--out FILE|DIR [--force]]
  quietcore results import FILE
  quietcore results schema

--db PATH goes before or after the action.

ID is a session number from `results list`, or the start of its UUID.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from pathlib import Path

from rich.table import Table

from quietcore.commands import common
from quietcore.errors import UsageError
from quietcore.report import export, text
from quietcore.report.kinds import kind_of
from quietcore.safe import plain, write_atomic
from quietcore.store import db, sessions

NAME = "results"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    common.add_db(parser)
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=type(parser))
    ls = sub.add_parser("list", help="one line per stored session")
    show = sub.add_parser("show", help="a session's node, runs and per-CPU results")
    show.add_argument("id", metavar="ID")
    exp = sub.add_parser(
        "export",
        help="write a session as JSON (everything), CSV or Parquet (a row per run and CPU), "
        "noise traces or PSNAP histograms",
    )
    exp.add_argument("id", metavar="ID")
    exp.add_argument("--format", choices=("json", "csv", "parquet", "trace", "psnap"), default="json",
                     help="json, csv, parquet; trace (a directory of start_ns<TAB>duration_ns files per node and "
                     "CPU, as netgauge and LogGOPSim read), psnap (rank bin_us count host)")  # fmt: skip
    exp.add_argument("--out", metavar="FILE", help="write here instead of standard output")
    exp.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    sub.add_parser("schema", help="print the JSON schema of the export (its path is in the package)")
    imp = sub.add_parser("import", help="add a session from a JSON export (from another node, say)")
    imp.add_argument("file", metavar="FILE")
    for action in (ls, show, exp, imp):
        # `results list --db X` as well as `results --db X list`: SUPPRESS keeps the
        # action's missing --db from hiding the one given before it.
        common.add_db(action, default=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    if args.action == "schema":
        print(export.SCHEMA.read_text(encoding="utf-8"), end="")
        return 0
    path, chosen = common.db_path(args)
    conn = db.open_db(path, create=args.action == "import", chosen=chosen, write=args.action == "import")
    try:
        if args.action == "list":
            list_(conn)
        elif args.action == "show":
            show(conn, args.id)
        elif args.action == "export":
            export_(conn, args)
        else:
            import_(conn, Path(args.file))
    finally:
        conn.close()
    return 0


def list_(conn: sqlite3.Connection) -> None:
    rows = sessions.list_sessions(conn)
    out = text.console()
    if not rows:
        out.print("No results yet: run `quietcore lab`.")
        return
    table = Table()
    for name in ("ID", "started (UTC)", "command", "host", "runs", "status", "fingerprint", "tags"):
        table.add_column(name)
    for row in rows:
        tags = ", ".join(f"{k}={v}" for k, v in sorted(row.tags.items()))
        table.add_row(str(row.id), row.started_at[:19], row.command, row.host, str(row.n_runs), row.status,
                      row.fingerprint, tags)  # fmt: skip
    out.print(table)


def show(conn: sqlite3.Connection, ident: str) -> None:
    row = sessions.get_session(conn, ident)
    out = text.console()
    out.print(text.session_header(row))
    runs = sessions.runs_of(conn, row.id)
    # An experiment's table stands for its cells' runs.
    summaries = [run for run in runs if run.kind == "experiment"]
    for run in summaries or runs:
        out.print(run.title())
        kind_of(run).terminal(out, run)
    if summaries:
        out.print(f"{len(runs) - len(summaries)} runs stored; `quietcore results export {row.id}` lists them all.")
    warning = text.virt_warning(row.facts)
    if warning:
        out.print(warning)


def export_(conn: sqlite3.Connection, args: argparse.Namespace) -> None:
    from quietcore.report.nodes import psnap, write_traces  # numpy: deferred (quietcore.lazy)

    row = sessions.get_session(conn, args.id)
    data: str | bytes
    if args.format == "trace":
        if not args.out:
            raise UsageError("--format trace writes a file per node and CPU: give --out DIR")
        written = write_traces(conn, row, Path(args.out), args.force)
        print(f"wrote {len(written)} traces in {args.out}")
        return
    if args.format == "psnap":
        data = psnap(conn, row)
    elif args.format == "json":
        data = json.dumps(export.session_to_json(conn, row), indent=1) + "\n"
    elif args.format == "csv":
        data = export.session_to_csv(conn, row)
    else:
        data = export.session_to_parquet(conn, row)
        if not args.out:
            raise UsageError("--format parquet is binary: give --out FILE")
    if not args.out:
        assert isinstance(data, str)
        print(data, end="")
        return
    out = Path(args.out)
    if out.exists() and not args.force:
        raise UsageError(f"{out} exists, will not overwrite without --force")
    try:
        write_atomic(out, data)
    except OSError as exc:
        raise UsageError(f"cannot write --out {out}: {exc.strerror}") from exc


def import_(conn: sqlite3.Connection, path: Path) -> None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path} is not JSON: {exc}") from exc
    problems = export.schema_problems(data)
    if problems:
        shown = "\n".join(f"quietcore: error: {path}: {p}" for p in problems[:20])
        more = f"\n... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise UsageError(f"{path} is not a valid quietcore results export ({len(problems)} bad field"
                         f"{'s' if len(problems) > 1 else ''}, nothing imported):\n{shown}{more}")  # fmt: skip
    try:
        session_id = export.import_json(conn, data)
    except (KeyError, TypeError) as exc:
        raise UsageError(f"{path} is a malformed quietcore export (missing or wrong {exc})") from exc
    print(plain(f"Imported {path} as session {session_id}."))
