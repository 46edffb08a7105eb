"""Measure OS noise: spin on the cycle counter on each CPU and record every gap.

One pinned thread per CPU reads the counter in a tight loop; every
loop-to-loop gap goes into a nanosecond histogram, and every gap over the
threshold is recorded as an event. Results are stored in the database.

example: quietcore noise --cpus 1 --duration 5
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from quietcore.commands import common
from quietcore.facts.cpus import online_cpus
from quietcore.options import cpus_option, int_in_range, positive_float
from quietcore.probes.noise import NoiseOptions
from quietcore.report import text
from quietcore.report.progress import progress_bar
from quietcore.session import Session
from quietcore.stats.percentiles import duration_summary, histogram_quantile

NAME = "noise"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cpus", required=True, metavar="LIST", help="CPUs to measure, e.g. 1 or 0-3,8")
    parser.add_argument("--duration", required=True, metavar="S", help="seconds to measure (0.001-86400)")
    parser.add_argument("--threshold-ns", metavar="N", help="a gap over N ns is an event (default: automatic)")
    parser.add_argument("--max-events", metavar="N", default="100000", help="events kept per CPU (default 100000)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    common.add_db(parser)
    common.add_tags(parser)


def options_from(args: argparse.Namespace) -> NoiseOptions:
    root = common.live_root()
    return NoiseOptions(
        cpus=cpus_option(args.cpus, online_cpus(root)),
        duration=positive_float(args.duration, "--duration", 0.001, 86400),
        threshold_ns=None if args.threshold_ns is None else positive_float(args.threshold_ns, "--threshold-ns", 1, 1e9),
        max_events=int_in_range(args.max_events, "--max-events", 0, 100_000_000),
    )


def run(args: argparse.Namespace) -> int:
    options = options_from(args)
    path, chosen = common.db_path(args)
    root = common.live_root()
    with (
        Session("noise", path, chosen, common.tags(args), root) as session,
        progress_bar(options.duration, enabled=not args.json) as update,
    ):
        rows, result = session.noise(options, lambda t: update("measuring noise", t))
    # Shown after the session is closed: a broken pipe cannot fail a stored run.
    if args.json:
        print(json.dumps(json_output(session, result, rows), indent=2))
    else:
        print_table(session, rows)
    return 0


def json_output(session: Session, result: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    by_cpu = {c["cpu"]: c for c in result["cpus"]}
    cpus = []
    for row in rows:
        probe = by_cpu[row["cpu"]]
        buckets = probe["histogram"]["buckets"]
        cpus.append(
            {
                **row,
                "events": probe["gaps"],
                "period_ns": {f"p{q * 100:g}": histogram_quantile(buckets, q) for q in (0.5, 0.99, 0.999)},
                "event_ns": duration_summary([duration for _, duration in probe["events"]]),
                "histogram": probe["histogram"],
            }
        )
    return {
        "session": session.id,
        "database": str(session.db_path),
        "fingerprint": session.fingerprint,
        "virtualization": session.facts["virtualization"],
        "counter": result["counter"],
        "threshold": result["threshold"],
        "interrupted": result["interrupted"],
        "cpus": cpus,
    }


def print_table(session: Session, rows: list[dict[str, Any]]) -> None:
    out = text.console()
    out.print(text.noise_table(rows))
    for note in text.noise_notes(rows):
        out.print(note)
    warning = text.virt_warning(session.facts)
    if warning:
        out.print(warning)
    out.print(f"Saved as session {session.id} in {session.db_path}. Next: quietcore results show {session.id}")
