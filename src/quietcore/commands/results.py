"""List, show, export and import stored results.

  quietcore results list [--kind KIND]
  quietcore results show ID
  quietcore results export ID [--format json|csv|parquet|trace|psnap] [--out FILE|DIR [--force]]
  quietcore results import FILE
  quietcore results import --from oslat|cyclictest|rtla-osnoise FILE
  quietcore results schema

--db PATH goes before or after the action.

ID is a session number from `results list`, the start of its UUID, last,
a tag KEY=VALUE, or job_ID: a Slurm job's record from `quietcore watch`.

import --from reads a peer's result: oslat's or cyclictest's --json file, or
rtla osnoise top's or hist's text. Each becomes a session of one run of its
own kind, which `results show`, `compare` and `report` put beside
quietcore's own (compare sets the figures both give side by side per CPU).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from pathlib import Path
from typing import Any

from rich.table import Table

from quietcore import inputs, outputs
from quietcore.commands import common
from quietcore.errors import UsageError
from quietcore.facts.cpulist import brief_cpulist, counted, cpus_phrase, format_cpulist, parse_cpulist
from quietcore.facts.snapshot import open_root
from quietcore.facts.topology import places, read_topology
from quietcore.options import positive_float
from quietcore.peers import FORMATS
from quietcore.report import account, changes, export, text
from quietcore.report.kinds import kind_of
from quietcore.report.kinds.base import heading
from quietcore.report.kinds.noise import KIND as NOISE
from quietcore.runs.model import SessionRecord, params_text
from quietcore.safe import plain, write_atomic
from quietcore.store import db, sessions

NAME = "results"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    common.add_db(parser)
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=type(parser))
    ls = sub.add_parser("list", help="one line per stored session")
    ls.add_argument("--kind", metavar="KIND", help="only sessions with a run of this kind (job: what `watch` "
                    "stored of each job)")  # fmt: skip
    show = sub.add_parser("show", help="a session's node, runs and per-CPU results")
    show.add_argument("id", metavar="ID")
    common.add_detail(show)
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
    again = sub.add_parser("analyse", help="analyse a session's noise runs again with this quietcore, stored as a "
                           "new session that names its source")  # fmt: skip
    again.add_argument("id", metavar="ID")
    imp = sub.add_parser("import", help="add a session from a JSON export (from another node, say), or from a "
                         "peer's result file (--from)")  # fmt: skip
    imp.add_argument("file", metavar="FILE")
    imp.add_argument("--from", dest="peer", choices=(*FORMATS, "trace"), metavar="TOOL",
                     help="a peer's file: oslat or cyclictest --json, rtla-osnoise top or hist text; or trace: a "
                          "directory of HOST-rankR-cpuC.trace files (results export --format trace, netgauge, "
                          "LogGOPSim)")  # fmt: skip
    imp.add_argument(
        "--duration",
        metavar="S",
        help="--from trace: the span every CPU measured, in seconds (default: the latest gap's end)",
    )
    imp.add_argument("--root", metavar="DIR",
                     help="--from trace: the traced node's snapshot (quietcore snapshot: a directory or .tar.gz), "
                          "whose sockets, NUMA nodes and L3 groups group its CPUs")  # fmt: skip
    common.add_tags(imp)
    for action in (ls, show, exp, imp, again):
        # `results list --db X` as well as `results --db X list`: SUPPRESS keeps the
        # action's missing --db from hiding the one given before it.
        common.add_db(action, default=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    if args.action == "schema":
        print(export.SCHEMA.read_text(encoding="utf-8"), end="")
        return 0
    if args.action == "import" and args.peer != "trace":
        for option, value in (("--duration", args.duration), ("--root", args.root)):
            if value is not None:
                raise UsageError(f"{option} is for --from trace alone (a directory of traces)")
    path, chosen = common.db_path(args)
    writes = args.action in ("import", "analyse")
    conn = db.open_db(path, create=args.action == "import", chosen=chosen, write=writes)
    try:
        if args.action == "list":
            list_(conn, args.kind)
        elif args.action == "show":
            show(conn, args.id, common.detail(args))
        elif args.action == "export":
            export_(conn, args)
        elif args.action == "analyse":
            analyse(conn, args.id)
        elif args.peer == "trace":
            import_traces(conn, Path(args.file), args.duration, common.tags(args), args.root)
        elif args.peer is not None:
            import_peer(conn, args.peer, Path(args.file), common.tags(args))
        else:
            import_(conn, Path(args.file))
    finally:
        conn.close()
    return 0


def list_(conn: sqlite3.Connection, kind: str | None = None) -> None:
    if kind is not None:
        have = sessions.kinds(conn)
        if kind not in have and kind != "job":
            raise UsageError(f"invalid --kind {kind!r} (valid: {', '.join(have) if have else 'none yet'})")
    rows = sessions.list_sessions(conn, kind)
    out = text.console()
    if not rows:
        out.print("No job's record yet: `quietcore watch` stores one as each job ends." if kind == "job"
                  else "No results yet: run `quietcore lab`.")  # fmt: skip
        return
    if kind == "job":
        _list_jobs(conn, rows)
        return
    table = Table()
    for name in ("ID", "started (UTC)", "took", "command and tags", "host", "runs", "status", "fingerprint"):
        table.add_column(name, justify="right" if name in ("ID", "took", "runs") else "left")
    for row in rows:
        # the command as it was typed: its CPUs and duration tell two noise sessions apart; its tags on a line
        # of their own under it, where a column of them, empty in most rows, took a table of its own at 100
        typed = " ".join(row.argv[1:]) if row.argv[1:] else row.command
        tags = " ".join(f"{k}={v}" for k, v in sorted(row.tags.items()))
        said = plain(typed) + (f"\ntags {plain(tags)}" if tags else "")
        table.add_row(str(row.id), row.started_at[:19].replace("T", " "), text.took(row.started_at, row.ended_at),
                      said, plain(row.host), str(row.n_runs), row.status, row.fingerprint)  # fmt: skip
    out.print(table)


def _list_jobs(conn: sqlite3.Connection, rows: list[SessionRecord]) -> None:
    """A line a job: its record's session, when it ended, its CPUs and what the OS took."""
    table = Table()
    for name in ("ID", "ended (UTC)", "job", "CPUs", "watched", "OS took", "of its CPUs", "largest"):
        table.add_column(name, justify="right" if name in ("ID", "watched", "OS took", "of its CPUs") else "left")
    for row in rows:
        run = next((r for r in sessions.runs_of(conn, row.id) if r.kind == "job"), None)
        a = run.analysis if run is not None else {}
        traced, taken = float(a.get("traced_ns") or 0), float(a.get("taken_ns") or 0)
        cpus = [c for c in a.get("cpus", []) if type(c) is int]
        largest = next((s for s in a.get("sources", []) if isinstance(s, dict)), None)
        table.add_row(str(row.id), (row.ended_at or "")[:19].replace("T", " "), plain(str(a.get("job", "?"))),
                      brief_cpulist(cpus) if cpus else "-", f"{traced / 1e9:,.1f} s", f"{taken / 1e6:,.1f} ms",
                      f"{taken / traced:.2%}" if traced else "-",
                      plain(str(largest.get("name"))) if largest else "-")  # fmt: skip
    text.console().print(table)
    text.console().print("\"watched\" is CPU-seconds: its CPUs' time summed. `quietcore results show job_ID` gives "
                         "a job's sources.")  # fmt: skip


def show(conn: sqlite3.Connection, ident: str, detail: tuple[int | None, bool] = (None, False)) -> None:

    row = sessions.find_session(conn, ident)
    runs = sessions.runs_of(conn, row.id, lazy_events=True)  # the trace is read only if a run needs it
    # An experiment's table stands for its cells' runs.
    summaries = [run for run in runs if run.kind == "experiment"]
    shown = summaries or runs
    only = detail[0]
    if only is not None:
        # Checked against the whole session before anything is said: a lab measures its CPUs in rounds, one
        # noise run each, and --cpu N (which the lab's own output suggests) names a CPU of one of them.
        have = frozenset(c for run in shown for c in run.spin_cpus or ())
        if only not in have:
            valid = format_cpulist(have) if have else "none: the session has no noise run of CPUs"
            raise UsageError(f"invalid --cpu {only}: not in session {row.id} (valid: {valid})")
    out = text.console()
    out.print(text.session_header(row))
    for run in shown:
        out.print(heading(run))
        params = params_text(run.params, _brief_cpus)
        if params:
            out.print(f"  {params}")
        if run.kind == "noise" and only is not None and only not in (run.spin_cpus or [only]):
            out.print(f"CPU {only} is not in this run.")
        elif run.kind == "noise":  # many CPUs grouped, by the session's facts; --cpu N, --per-cpu
            NOISE.view(out, run, row.facts, *detail)
        else:
            kind_of(run).terminal(out, run)
    if summaries:
        out.print(f"Its {len(runs) - len(summaries)} runs are stored: `quietcore results export {row.id}` lists them.")
    accounts = [a for run in shown if run.kind == "noise" for a in account.of_run(run).values()]
    if accounts and only is None:  # the session's one figure of each, as lab, audit and the report give it
        virtual = bool((row.facts.get("virtualization") or {}).get("virtualized"))
        share = changes.shares(accounts, virtual)
        if share.known:  # an imported trace's: each group's account already says nothing was counted
            out.print(share.line(cpus_phrase(frozenset(a.cpu for a in accounts)), row.id))
    warning = text.virt_warning(row.facts)
    if warning:
        out.print(warning)


def _brief_cpus(value: Any) -> str | None:
    """A run's CPUs in brief (a list of numbers, or a kernel list as stored): a lab's round of every
    other CPU of 384 made a title's parameters 789 characters, and an intruders run's list of 384
    numbers 1,849. None for anything else, said as stored (stored text: a run imported, or written by
    hand)."""
    if isinstance(value, list) and value and all(type(c) is int and c >= 0 for c in value):
        return brief_cpulist(value)
    if isinstance(value, str):
        try:
            return brief_cpulist(parse_cpulist(value)) or None
        except ValueError:
            return None
    return None


def export_(conn: sqlite3.Connection, args: argparse.Namespace) -> None:
    from quietcore.report.nodes import psnap, write_traces  # numpy: deferred (quietcore.lazy)

    row = sessions.find_session(conn, args.id)
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
    out = outputs.file(out, "--out")
    try:
        write_atomic(out, data)
    except OSError as exc:
        raise UsageError(f"cannot write --out {out}: {exc.strerror}") from exc


def import_(conn: sqlite3.Connection, path: Path) -> None:
    data = inputs.read_json(path, inputs.EXPORT, "results import")
    problems = export.schema_problems(data)
    if len(problems) == 1:  # one line, as every bad input is said
        raise UsageError(f"{path} is not a valid quietcore results export, nothing imported: {problems[0]}")
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


def analyse(conn: sqlite3.Connection, ident: str) -> None:
    """The session's noise runs analysed again by this quietcore (measure.reanalysed),
    stored as a new session whose runs name their source; the source is left as it is."""
    from quietcore.measure import reanalysed  # numpy and the analysis: deferred

    began = sessions.now_iso()
    row = sessions.find_session(conn, ident)
    runs = [r for r in sessions.runs_of(conn, row.id) if r.kind == "noise" and r.trace is not None]
    if not runs:
        raise UsageError(f"session {row.id} has no spin-mode noise run to analyse (valid: a noise, lab, check, survey "
                         "or imported trace session)")  # fmt: skip
    again = [reanalysed(r, row.facts, {"session": row.id, "uuid": row.uuid, "run": r.seq}) for r in runs]
    session_id = sessions.create_session(conn, "analyse", ["quietcore", "results", "analyse", str(row.id)],
                                         row.facts, row.fingerprint, {**row.tags, "analysed_from": str(row.id)},
                                         began, runs=again)  # fmt: skip
    print(plain(f"Analysed session {row.id}'s {counted(len(again), 'noise run')} again as session {session_id}. Next: "
                f"`quietcore results show {session_id}`, or `quietcore compare {row.id} {session_id}`."))  # fmt: skip


def import_traces(conn: sqlite3.Connection, directory: Path, duration: str | None, tags: dict[str, str],
                  root: str | None = None) -> None:  # fmt: skip
    """A directory of traces as one session of noise runs (a node and rank each),
    analysed as `noise` analyses its probe's (measure.analyse_noise); refused with
    the file and line named, and nothing stored, when one does not read."""
    from quietcore.measure import imported_noise  # numpy and the analysis: deferred, `results list` reads only
    from quietcore.peers.traces import read_dir

    began = sessions.now_iso()
    span = positive_float(duration, "--duration", 1e-3, 1e6) if duration is not None else None
    gaps, span_ns = read_dir(directory, span)
    where: dict[str, dict[str, int]] = {}
    if root is not None:
        with open_root(root) as node:
            where = places(read_topology(node), frozenset(g.cpu for g in gaps))
        if not where:
            raise UsageError(f"invalid --root {root}: no CPU topology in it (sys/devices/system/cpu/cpuN/topology)")
    runs = imported_noise(gaps, span_ns, directory.name)
    for _, _, run in runs:
        if where:
            run.context["topology"] = where
    argv = ["quietcore", "results", "import", "--from", "trace", str(directory)]
    facts = {"imported": {"tool": "trace", "file": directory.name, "host": runs[0][0] if len(runs) == 1 else ""}}
    session_id = sessions.create_session(conn, "import", argv, facts, "imported", tags, began,
                                         runs=[run for _, _, run in runs])  # fmt: skip
    cpus, nodes = (f"{n} {word}{'' if n == 1 else 's'}" for n, word in ((len(gaps), "CPU"), (len(runs), "node")))
    print(plain(f"Imported {cpus} of {nodes}, {sum(g.starts.size for g in gaps):,} gaps over {span_ns / 1e9:g} s "
                f"each, from {directory} as session {session_id}. Next: `quietcore results show "
                f"{session_id}`."))  # fmt: skip


def import_peer(conn: sqlite3.Connection, tool: str, path: Path, tags: dict[str, str]) -> None:
    """A peer's file as a session of one run of its kind (nothing stored if it does not parse)."""
    from quietcore.peers.read import parse  # numpy (the histograms' quantiles): deferred, `results list` reads only

    content = inputs.read_text(path, inputs.PEER, f"invalid --from {tool}")
    got = parse(tool, content, path.name)
    argv = ["quietcore", "results", "import", "--from", tool, str(path)]
    session_id = sessions.create_session(conn, "import", argv, got.facts, "imported", tags, runs=[got.run])
    cpus = cpus_phrase([int(c["cpu"]) for c in got.run.result["cpus"]])  # in brief: a list of 384 numbers was
    print(plain(f"Imported {path} ({tool}, {cpus}) as session {session_id}. Next: `quietcore results show "
                f"{session_id}`, or `quietcore compare {session_id} ID`."))  # fmt: skip
