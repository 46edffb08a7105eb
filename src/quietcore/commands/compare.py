"""Compare two sessions: what changed in the node, then every common cell.

A and B are session IDs (or UUID prefixes), `last`, a tag KEY=VALUE, or a list
of IDs (1,2,3). First the facts behind the fingerprint that differ (kernel, boot
parameters such as nohz_full, THP, governors...), between each side's latest
session; then each experiment cell both measured: B's median over A's with a
95 % bootstrap interval, Mann-Whitney U, Holm across the table, and a verdict.
Noise is compared with the session as the unit: a tag or a list gives a side
every session it names, and B's shift is judged against the spread of
repeated sessions (report.noisecompare).

example: quietcore compare boot=before boot=after
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.table import Table

from quietcore.commands import common
from quietcore.facts.cpulist import brief_cpulist, cpus_phrase, figure_range, format_cpulist
from quietcore.report import text
from quietcore.report.experiment import fmt, interval, shown_unit
from quietcore.report.side import figure_rows
from quietcore.safe import plain
from quietcore.stats.sessions import MOST_NEEDED
from quietcore.store import db, sessions

NAME = "compare"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", metavar="A", help="the reference: a session (ID, UUID prefix or last), or every "
                        "session of a tag KEY=VALUE or a list of IDs 1,2,3")  # fmt: skip
    parser.add_argument("b", metavar="B", help="the sessions compared with it, named as A is")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    common.add_db(parser)


#: Above this many CPUs, the noise table shows only the CPUs that differ, and a line for the rest.
ALL_ROWS_UP_TO = 32


def noise_table(rows: list[dict[str, Any]]) -> Table | str:
    """B's noise against A's per CPU (report.noisecompare); above ALL_ROWS_UP_TO CPUs
    only those with a verdict or a source that changed (64 like rows read as 200 lines),
    the rest summed up in the table's caption. --json has every CPU."""
    table = Table(title="Noise, B against A, per CPU. Lost: of the whole run, as `noise` gives it. Shift: B's "
                  "median 100 ms window less A's, averaged over a side's sessions. It is tested against the spread "
                  "of repeated sessions, their run-to-run SD (Student t, Holm over the CPUs).",
                  title_justify="left")  # fmt: skip
    for name in ("CPU", "A lost", "B lost", "shift", "95% CI", "p (Holm)", "verdict", "run-to-run SD",
                 "B's costliest source", "periodic sources changed", "sessions A, B"):  # fmt: skip
        left = name in ("verdict", "B's costliest source", "periodic sources changed")
        table.add_column(name, justify="left" if left else "right")
    shown = rows
    if len(rows) > ALL_ROWS_UP_TO:
        shown = [r for r in rows if r["verdict"].startswith("B ") or r["sources"]]
        unknown = all(r["spread"] is None for r in rows if r not in shown)
        unjudged = sorted(r["cpu"] for r in rows if r not in shown and r["verdict"].startswith("no verdict"))
        alike = sorted(r["cpu"] for r in rows if r not in shown and (unknown or r["cpu"] not in unjudged))
        if alike:
            said = f"CPUs {format_cpulist(frozenset(alike))}: no difference shown, no source changed"
            if unknown:
                said += " (no repeated runs to judge a shift by)"
            elif unjudged:  # a CPU whose repeated runs did not vary has no verdict: said so, not as no difference
                said += f"; no verdict on {cpus_phrase(unjudged)}, whose repeated runs did not vary"
            if not shown:
                return f"Noise, B against A: {said}. Sessions as the unit, Student t, Holm over the CPUs; --json."
            table.caption, table.caption_justify = said, "left"
    if len(shown) > ALL_ROWS_UP_TO:  # many CPUs that differ alike: a row for them (384 were 2,573 lines)
        groups: dict[tuple[str, tuple[str, ...]], list[dict[str, Any]]] = {}
        for r in shown:
            groups.setdefault((r["verdict"], _changes(r["sources"])), []).append(r)
        for (verdict, changes), mine in groups.items():
            if len(mine) == 1:
                _row(table, mine[0])
                continue
            a, b = [r["a_lost"] * 100 for r in mine], [r["b_lost"] * 100 for r in mine]
            shift = sorted(r["shift"] * 100 for r in mine)
            table.add_row(brief_cpulist([r["cpu"] for r in mine]), f"{figure_range(a, '.3f')}%",
                          f"{figure_range(b, '.3f')}%", f"{shift[0]:+.3f}% to {shift[-1]:+.3f}%", "",
                          _p_most(mine), verdict, "", "",
                          "\n".join(changes) or "none", "")  # fmt: skip
        return table
    for r in shown:
        _row(table, r)
    return table


def _row(table: Table, r: dict[str, Any]) -> None:
    from quietcore.report.noisecompare import change_words  # numpy: as compare_noise, in run

    top = r.get("b_top")
    if top:
        was = f"{top['a_share']:.0%}" if top.get("a_share") is not None else "none"
        costliest = f"{plain(top['name'])}: {top['share']:.0%} of B's lost time, {was} of A's"
    else:
        costliest = "-"
    ci = f"[{r['ci_low'] * 100:+.3f}%, {r['ci_high'] * 100:+.3f}%]" if r["ci_low"] is not None else "-"
    table.add_row(str(r["cpu"]), f"{r['a_lost'] * 100:.3f}%", f"{r['b_lost'] * 100:.3f}%", f"{r['shift'] * 100:+.3f}%",
                  ci, f"{r['p_adjusted']:.3g}" if r["p_adjusted"] is not None else "-", r["verdict"], _spread(r),
                  costliest, "\n".join(change_words(c) for c in r["sources"]) or "none",
                  f"{r['a_sessions']}, {r['b_sessions']}")  # fmt: skip


def _p_most(rows: list[dict[str, Any]]) -> str:
    known = [r["p_adjusted"] for r in rows if r["p_adjusted"] is not None]
    return f"{max(known):.3g} at most" if known else "-"


def _spread(r: dict[str, Any]) -> str:
    """The run-to-run SD of a session's median window, and, where no difference is shown, the sessions a side a
    shift this size would need: "0.337%; 4 a side to tell"."""
    if r["spread"] is None:
        return "unknown: measure each side 3 times"
    said = f"{r['spread'] * 100:.3f}%"
    if not r["verdict"].startswith("B ") and r["needed"] is not None:
        many = f"over {MOST_NEEDED}" if r["needed"] > MOST_NEEDED else str(r["needed"])
        said += f"; {many} a side to tell"
    return said


def _changes(sources: list[dict[str, Any]]) -> tuple[str, ...]:
    """A CPU's source changes by kind and rate, their figures left out, so that CPUs alike are one row:
    "dearer in B: 250 Hz", "new in B: 100 Hz, 2 of them"."""
    counted: dict[str, int] = {}
    for c in sources:
        key = f"{c['change']}: {c['label'].split(' x ')[0]}"
        counted[key] = counted.get(key, 0) + 1
    return tuple(f"{k}, {n} of them" if n > 1 else k for k, n in counted.items())


def run(args: argparse.Namespace) -> int:
    # Imported here, as in every command: `quietcore --help` loads no statistics or tables.

    from quietcore.report.crosscheck import compare_sessions
    from quietcore.report.noisecompare import compare_noise

    path, chosen = common.db_path(args)
    conn = db.open_db(path, create=False, chosen=chosen, write=False)
    try:
        side_a, side_b = sessions.find_group(conn, args.a), sessions.find_group(conn, args.b)
        a, b = side_a[-1], side_b[-1]
        result = compare_sessions(conn, a, b) | {"figures": figure_rows(conn, a, b),
                                                 "noise": compare_noise(conn, side_a, side_b)}  # fmt: skip
    finally:
        conn.close()
    if args.json:
        print(json.dumps(result, indent=2, default=str))
        return 0
    out = text.console()
    for name, side in (("A", side_a), ("B", side_b)):
        latest = side[-1]
        when = f"{latest.command}, {latest.started_at[:19].replace('T', ' ')} UTC"
        if len(side) == 1:
            out.print(f"{name}: session {latest.id}, {when}")
        else:
            ids = format_cpulist(frozenset(r.id for r in side))
            out.print(f"{name}: sessions {ids}, {len(side)} of them; the latest {when}")
    if result["same_fingerprint"]:
        out.print(f"Same node configuration, fingerprint {a.fingerprint}.")
    elif not result["changes"]:  # a peer's file: it says next to nothing of its node
        out.print(f"Other fingerprints, {a.fingerprint} and {b.fingerprint}; no fact both sessions hold differs.")
    else:
        changes = Table(title="What changed in the node", title_justify="left")
        for name in ("fact", "A", "B"):
            changes.add_column(name)
        for change in result["changes"]:
            changes.add_row(change["fact"], str(change["a"]), str(change["b"]))
        out.print(changes)
    if result["noise"]:
        out.print(noise_table(result["noise"]))
    # where both are quietcore's noise, the noise table says it: these are for a peer's figure beside one
    shown = [r for r in result["figures"] if not result["noise"] or "noise" not in (r["a_from"], r["b_from"])
             or r["cpu"] not in {n["cpu"] for n in result["noise"]}]  # fmt: skip
    if shown:
        figures = Table(title="Per CPU, the figures both sessions give", title_justify="left")
        for name in ("CPU", "figure", "A", "B", "B/A"):
            figures.add_column(name, justify="left" if name == "figure" else "right")
        for row in shown:
            ratio = f"{row['b'] / row['a']:.2f}" if row["a"] else "-"
            figures.add_row(str(row["cpu"]), row["figure"], f"{row['a']:,.2f}, {row['a_from']}",
                            f"{row['b']:,.2f}, {row['b_from']}", ratio)  # fmt: skip
        out.print(figures)
    if not result["cells"]:
        if not result["figures"] and not result["noise"]:
            out.print("No experiment cell was measured in both sessions; nothing to compare run by run.")
        return 0
    table = Table(title="B against A, per cell", title_justify="left")
    for name in ("experiment", "cell", "A median", "B median", "B/A", "95% CI", "verdict", "p (Holm)", "n A, B"):
        table.add_column(name, justify="left" if name in ("experiment", "cell", "verdict") else "right")
    for row in result["cells"]:
        unit = row["metric"]["unit"]
        c = row.get("comparison")
        table.add_row(
            row["experiment"], row["cell"],
            f"{fmt(row['a']['median'], unit)} {shown_unit(unit)}",
            f"{fmt(row['b']['median'], unit)} {shown_unit(unit)}",
            f"{c['ratio']:.3f}" if c else "-", interval(f"{c['ci_low']:.3f}", f"{c['ci_high']:.3f}") if c else "",
            c["verdict"] if c else "too few runs", f"{c['p_adjusted']:.3g}" if c else "",
            f"{row['a']['n']}, {row['b']['n']}",
        )  # fmt: skip
    out.print(table)
    if result["unmatched"]:
        out.print(f"Measured in only one of the sessions: {', '.join(result['unmatched'])}.")
    return 0
