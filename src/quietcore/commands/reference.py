"""Keep the reference noise `quietcore check` compares with, per configuration.

  quietcore reference set SESSION [--name N]
  quietcore reference list
  quietcore reference show [NAME]

`set` takes every CPU of a noise, lab or survey session (a survey's per
node) that measured at least 5 s with every gap recorded, and keeps it with
the session's configuration fingerprint and facts; a session too short, or
of another command, is refused with the reason. NAME defaults to the
fingerprint, so each configuration keeps its own and setting it again
replaces it. `show` without NAME shows the one `check --reference auto`
would take here.
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import statistics
from typing import Any

from rich.table import Table

from quietcore.commands import common
from quietcore.errors import CommandError, UsageError
from quietcore.facts.cpulist import brief_cpulist, figure_range, figure_spread
from quietcore.report import text
from quietcore.runs.reference import CpuNoise, Periodic, Reference
from quietcore.safe import plain
from quietcore.stats.said import lost_pct as pct
from quietcore.store import db, references, sessions

NAME = "reference"
#: Up to this many CPUs `show` is a row a CPU (as `results show`'s table); above, summed up (--per-cpu: each).
FULL_UP_TO = 32


def add_arguments(parser: argparse.ArgumentParser) -> None:
    common.add_db(parser)
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=type(parser))
    put = sub.add_parser("set", help="keep a session's noise as the reference for its configuration")
    put.add_argument("session", metavar="SESSION", help="an ID, a UUID prefix, last (the newest), or a tag KEY=VALUE "
                     "(the newest with it), as compare takes them")  # fmt: skip
    put.add_argument("--name", metavar="N", help="name it (default: the configuration fingerprint)")
    sub.add_parser("list", help="one line per reference")
    show = sub.add_parser("show", help="a reference's CPUs: lost time, windows, periodic sources")
    show.add_argument("name", metavar="NAME", nargs="?")
    show.add_argument("--json", action="store_true", help="print it as JSON")
    show.add_argument("--per-cpu", action="store_true", help=f"a row per CPU, however many (summed up above "
                      f"{FULL_UP_TO})")  # fmt: skip
    for action in sub.choices.values():
        common.add_db(action, default=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    path, chosen = common.db_path(args)
    conn = db.open_db(path, create=False, chosen=chosen, write=args.action == "set")
    try:
        if args.action == "set":
            set_(conn, args.session, args.name)
        elif args.action == "list":
            list_(conn)
        else:
            show(conn, args.name, args.json, args.per_cpu)
    finally:
        conn.close()
    return 0


def set_(conn: Any, ident: str, name: str | None) -> None:
    if name is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", name):
        raise UsageError(f"invalid --name {name!r} (valid: letters, digits, '.', '_', '-', up to 64)")
    row = sessions.find_session(conn, ident)
    if row.status != "complete":
        raise UsageError(f"session {row.id} is {row.status}: a reference needs a complete session")
    from quietcore.fleet.baseline import from_session  # numpy: deferred, `list` and `show NAME` only read

    taken = from_session(row.command, sessions.runs_of(conn, row.id), row.host)
    if not taken.hosts:
        why = "; ".join(taken.refused) or f"session {row.id} ({row.command}) has no spin-mode noise run"
        raise UsageError(f"session {row.id} cannot serve as a reference: {why}")
    out = text.console()
    for host, cpus in sorted(taken.hosts.items()):
        facts = row.facts if host == row.host else {}
        fingerprint = row.fingerprint if host == row.host else _node_fingerprint(conn, row.id, host)
        chosen = name or fingerprint
        references.put(conn, chosen, host, fingerprint, row.id, facts, cpus)
        out.print(plain(f"Saved reference {chosen} of {host}, from session {row.id}."), highlight=False)
        if chosen != fingerprint:
            out.print(plain(f"  fingerprint  {fingerprint}"), highlight=False)
        out.print(plain(f"  CPUs         {brief_cpulist([c.cpu for c in cpus])}, "
                        f"{min(c.measured_s for c in cpus):.3g} s each"), highlight=False)  # fmt: skip
        out.print(plain(f"  lost         {_lost(cpus)}"), highlight=False)
    for why in taken.refused:
        out.print(plain(f"  left out     {why}"), highlight=False)


#: Up to this many CPUs `reference set` gives each one's figure; past it, their range and the most's CPU.
EACH_UP_TO = 8


def _lost(cpus: list[CpuNoise]) -> str:
    """Each CPU's figure as the check's line gives it ("reference 1.4 %": it said "at most 1.7 % lost"); at
    384 CPUs that was 5,546 characters of one line (its CPUs 1,425 more), so past EACH_UP_TO their range,
    median and the most's CPU."""
    ordered = sorted(cpus, key=lambda c: c.cpu)
    if len(ordered) <= EACH_UP_TO:
        return ", ".join(f"CPU {c.cpu} {pct(c.lost_ratio)}" for c in ordered)
    ratios = sorted(c.lost_ratio for c in ordered)
    most = max(ordered, key=lambda c: c.lost_ratio)
    return (f"{pct(ratios[0])} to {pct(ratios[-1])}, median {pct(statistics.median(ratios))}, the most on CPU "
            f"{most.cpu}; `reference show` gives each")  # fmt: skip


def _node_fingerprint(conn: Any, session_id: int, host: str) -> str:
    """A survey's other nodes: the fingerprint each rank's run carries."""
    for run in sessions.runs_of(conn, session_id):
        place = run.params.get("survey") or {}
        if place.get("host") == host and place.get("fingerprint"):
            return str(place["fingerprint"])
    return "unknown"


def list_(conn: Any) -> None:
    rows = references.all_references(conn)
    out = text.console()
    if not rows:
        out.print("No references yet: `quietcore reference set SESSION` (a noise, lab or survey session).")
        return
    table = Table()
    for name in ("name", "host", "fingerprint", "session", "set (UTC)", "CPUs", "lost (max)"):
        table.add_column(name)
    for r in rows:
        table.add_row(plain(r.name), plain(r.host), r.fingerprint, str(r.session_id), r.created_at[:19],
                      brief_cpulist(list(r.cpus)),
                      f"{max(c.lost_ratio for c in r.cpus.values()) * 100:.2g} %")  # fmt: skip
    out.print(table)


def show(conn: Any, name: str | None, as_json: bool, per_cpu: bool = False) -> None:
    host = socket.gethostname()
    if name is not None:
        ref = references.named(conn, name, host)
    else:
        from quietcore.measure import Measurer  # numpy: deferred, as above

        here = Measurer(common.live_root()).fingerprint
        found = references.for_node(conn, here, host)
        if found is None:
            raise CommandError("no reference for this node yet: `quietcore reference set SESSION`", 1)
        ref = found
    if as_json:
        print(json.dumps(_json(ref), indent=2))
        return
    out = text.console()
    out.print(f"Reference {plain(ref.name)} of {plain(ref.host)}, from session {ref.session_id}, set "
              f"{ref.created_at[:19].replace('T', ' ')} UTC.")  # fmt: skip
    if ref.name != ref.fingerprint:
        out.print(f"  fingerprint  {plain(ref.fingerprint)}")
    if len(ref.cpus) > FULL_UP_TO and not per_cpu:
        _summed(out, list(ref.cpus.values()))
        return
    table = Table()
    for col in ("CPU", "measured", "lost", "windows p50 / p90 / max", "events/s", "max gap", "periodic sources"):
        table.add_column(col, justify="left" if col == "periodic sources" else "right")
    for c in sorted(ref.cpus.values(), key=lambda c: c.cpu):
        w = sorted(c.windows)
        spread = " / ".join(f"{w[min(len(w) - 1, int(q * len(w)))] * 100:.2g}%" for q in (0.5, 0.9)) + (
            f" / {w[-1] * 100:.2g}%"
        )
        table.add_row(str(c.cpu), f"{c.measured_s:.3g} s", f"{c.lost_ratio * 100:.2g}%", spread,
                      f"{c.events_per_s:,.0f}", f"{c.max_gap_s * 1e6:,.0f} µs",
                      _sources(c))  # fmt: skip
    out.print(table)


def _summed(out: Any, cpus: list[CpuNoise]) -> None:
    """Many CPUs: one row of their min / median / max, and a line per periodic source with the CPUs that have
    it (at 384 CPUs, each with the GPU node's tick and host timer, the table was
    1,541 lines of 200 columns)."""

    table = Table(title="The CPUs (min / median / max)", title_justify="left")
    for col in ("CPUs", "measured s", "lost %", "events/s", "max gap µs"):
        table.add_column(col, justify="left" if col == "CPUs" else "right")
    table.add_row(f"{brief_cpulist([c.cpu for c in cpus])} ({len(cpus)})",
                  figure_spread([c.measured_s for c in cpus], ".3g"),
                  figure_spread([c.lost_ratio * 100 for c in cpus], ".2g"),
                  figure_spread([c.events_per_s for c in cpus], ".0f"),
                  figure_spread([c.max_gap_s * 1e6 for c in cpus], ".0f"))  # fmt: skip
    out.print(table)
    # one source on many CPUs as the screen takes it (report.summary.shared_sources): its name, and
    # runs.analysis.same_source; by its rounded label alone, a planted 100 Hz x 200 µs and a host's 100 Hz x
    # 17 µs would be one line
    found: list[tuple[Periodic, list[tuple[int, float]]]] = []  # (first, [(CPU, burst s)])
    for c in cpus:
        for p in c.periodic:
            same = next((f for f in found if f[0].name == p.name and f[0].alike(p)), None)
            if same is None:
                found.append((p, [(c.cpu, p.median_duration_s)]))
            else:
                same[1].append((c.cpu, p.median_duration_s))
    if found:
        sources = Table(title="Periodic sources", title_justify="left")
        for col, justify in (("CPUs", "left"), ("rate", "right"), ("µs each", "right"), ("source", "left")):
            sources.add_column(col, justify=justify)  # type: ignore[arg-type]
        for first, seen in sorted(found, key=lambda f: -len(f[1])):
            lengths = figure_range([d * 1e6 for _, d in seen], ".3g")
            sources.add_row(brief_cpulist([c for c, _ in seen]), first.label().split(" x ")[0], lengths,
                            plain(first.name or "not named"))  # fmt: skip
        out.print(sources)
    out.print(f"{len(cpus)} CPUs. --per-cpu gives a row each, --json everything.")


def _sources(c: CpuNoise) -> str:
    return plain(", ".join(f"{p.label()} {p.name or ''}".strip() for p in c.periodic) or "none")


def _json(ref: Reference) -> dict[str, Any]:
    return {"id": ref.id, "name": ref.name, "host": ref.host, "fingerprint": ref.fingerprint,
            "session": ref.session_id, "created_at": ref.created_at,
            "cpus": [c.to_json() for c in sorted(ref.cpus.values(), key=lambda c: c.cpu)]}  # fmt: skip
