"""Write a report of stored sessions: HTML with figures, and Markdown.

DIR/index.html is self-contained (figures inline as SVG, no network, no
script) and prints well; DIR/report.md is the same in Markdown; every
figure is also in DIR/figures/ as SVG and PNG. Sections: the node and its
fingerprint, the audit (when one is stored), every probe and experiment of
the sessions with its figures, and each later session against the first.

Without --out it writes to the reports folder beside the database
(DATA/reports/session-N, as `lab` does), replacing a report quietcore
wrote there before, and prints where.

examples:
  quietcore report                         (the latest session, in the data folder)
  quietcore report --out report            (the latest session, into ./report)
  quietcore report 4 7 --out before-after
  quietcore report --tag boot=after --out after --format md
"""

from __future__ import annotations

import argparse
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

from quietcore import outputs
from quietcore.commands import common
from quietcore.errors import UsageError
from quietcore.options import tags_option
from quietcore.report.progress import progress_bar
from quietcore.runs.model import SessionRecord
from quietcore.store import db, sessions

NAME = "report"
FORMATS = {"html": ("html",), "md": ("md",), "both": ("html", "md")}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sessions", nargs="*", metavar="SESSION", help="session IDs (default: the latest)")
    parser.add_argument("--tag", action="append", metavar="KEY=VALUE", help="every session with this tag")
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="directory to write (must not exist; default: reports/session-N beside the database)",
    )
    parser.add_argument("--format", choices=tuple(FORMATS), default="both", help="html, md or both (default both)")
    parser.add_argument("--force", action="store_true", help="replace DIR if it exists")
    common.add_db(parser)


def select(conn: sqlite3.Connection, ids: list[str], tag_items: list[str] | None) -> list[SessionRecord]:
    rows = [sessions.find_session(conn, i) for i in ids]
    for key, value in tags_option(tag_items).items():
        tagged = sessions.tagged(conn, key, value)
        if not tagged:
            raise UsageError(f"no session is tagged {key}={value} (see `quietcore results list`)")
        rows += tagged
    if not ids and not tag_items:
        last = sessions.last_id(conn)
        if last is None:
            raise UsageError("the database has no sessions yet: run `quietcore lab` first")
        rows = [sessions.get_session(conn, last)]
    unique = {r.id: r for r in rows}
    for row in unique.values():
        if not sessions.runs_of(conn, row.id):
            raise UsageError(f"session {row.id} has no runs to report (status {row.status})")
    return list(unique.values())


def write_report(conn: sqlite3.Connection, rows: list[SessionRecord], out: Path | None, formats: tuple[str, ...],
                 force: bool, db_path: Path, option: str = "--out") -> list[Path]:  # fmt: skip
    """The report of `rows` into `out` (`option`'s value), or, with none,
    into reports/session-N beside the database (replaced there if quietcore
    wrote it), where a directory another user could change is refused with
    a word on `option`."""
    from quietcore.report import build, document  # matplotlib and jinja2: only for a report

    if out is None:
        out, force = default_out(db_path, rows), True
        option, hint = "the default report directory", f"give {option} DIR"
    else:
        hint = ""
    try:
        out = document.prepare(out, force, option, hint)
    except FileExistsError as exc:
        raise UsageError(f"{option} {out} exists: choose a new directory, or add --force to replace it") from exc
    except NotADirectoryError as exc:
        raise UsageError(f"invalid {option}: {exc} (valid: a new directory, or one quietcore wrote)") from exc
    except OSError as exc:
        raise UsageError(f"cannot create {option} {out}: {exc.strerror}") from exc

    with progress_bar(1.0) as update:
        done = [0]

        def progress(steps: int) -> Callable[[str], None]:
            def step(what: str) -> None:
                update(what, done[0] / max(steps, 1))
                done[0] += 1

            return step

        report = build.build(conn, rows, out, progress)
        update("writing the files", 1.0)
        return document.write(report, out, formats)


def check_out(out: Path | None, db_path: Path, option: str) -> None:
    """Refuse, before anything is measured, a report directory quietcore
    could not write (its parent, made here), with or without `option`."""
    if out is None:
        outputs.directory(db_path.parent / "reports", "the default report directory", hint=f"give {option} DIR")
    else:
        outputs.directory(Path(os.path.abspath(out)).parent, option, leaf=True)


def default_out(db_path: Path, rows: list[SessionRecord]) -> Path:
    """reports/session-4 (or session-4-7 for several) beside the database."""
    ids = "-".join(str(r.id) for r in sorted(rows, key=lambda r: r.id))
    return db_path.parent / "reports" / f"session-{ids}"


def run(args: argparse.Namespace) -> int:
    path, chosen = common.db_path(args)
    out = Path(args.out) if args.out else None
    if out is not None and out.exists() and not args.force:
        raise UsageError(f"--out {out} exists: choose a new directory, or add --force to replace it")
    conn = db.open_db(path, create=False, chosen=chosen, write=False)
    try:
        rows = select(conn, args.sessions, args.tag)
        # the default folder is quietcore's own: a report written there before is replaced (marker checked)
        written = write_report(conn, rows, out, FORMATS[args.format], args.force, path)
    finally:
        conn.close()
    for file in written:
        print(f"wrote {file}")
    return 0
