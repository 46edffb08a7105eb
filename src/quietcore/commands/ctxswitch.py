"""Measure what a context switch costs, cross-CPU wake-up latency and time slices.

- same CPU: two processes on CPU A pass a byte over pipes (lmbench lat_ctx),
  less the same pipe traffic without a switch; and a sched_yield pair;
- cross-CPU (with --cpus A,B): wake-up latency from A to B over a pipe and
  over a futex;
- time slice: two spinners sharing CPU A, the run each gets under
  SCHED_OTHER and SCHED_RR (beside sched_rr_get_interval).
Each figure is the median of --reps repetitions with a 95 % bootstrap CI.

example: quietcore ctxswitch --cpus 1,0
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from quietcore.commands import common
from quietcore.errors import UsageError
from quietcore.facts.cpus import online_cpus
from quietcore.options import USABLE, cpu_pair_option, int_in_range, usable_cpus
from quietcore.report import text
from quietcore.report.progress import progress_bar
from quietcore.report.tables import ctxswitch_table, slice_lines
from quietcore.session import Session
from quietcore.stats.bootstrap import median_ci

NAME = "ctxswitch"
TESTS = ("pipe", "yield", "cross", "slice")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cpus", metavar="A[,B]", help="CPU A for same-CPU tests, B for cross-CPU ones "
                        "(default: the last online CPU and the first)")  # fmt: skip
    parser.add_argument("--iterations", metavar="N", default="20000", help="round trips per repetition")
    parser.add_argument("--reps", metavar="R", default="10", help="repetitions for the interval (2-1000)")
    parser.add_argument("--slice-ms", metavar="MS", default="400", help="time-slice test length per policy")
    parser.add_argument("--tests", metavar="LIST", default=",".join(TESTS), help="of pipe,yield,cross,slice")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    common.add_wait(parser)
    common.add_db(parser)
    common.add_tags(parser)


def _cpus(text_value: str | None, online: frozenset[int]) -> list[int]:
    usable = usable_cpus(online)
    if text_value is None:
        ordered = sorted(usable)
        return [ordered[-1], ordered[0]] if len(ordered) > 1 else ordered
    return cpu_pair_option(text_value, usable, what=USABLE)


def analyze(result: dict[str, Any]) -> dict[str, Any]:
    return {name: median_ci(series) for name, series in result["series_ns"].items()}


def run(args: argparse.Namespace) -> int:
    cpus = _cpus(args.cpus, online_cpus(common.live_root()))
    iterations = int_in_range(args.iterations, "--iterations", 100, 10_000_000)
    reps = int_in_range(args.reps, "--reps", 2, 1000)
    slice_ms = int_in_range(args.slice_ms, "--slice-ms", 10, 60_000)
    tests = [t.strip() for t in args.tests.split(",")]
    if not tests or any(t not in TESTS for t in tests):
        raise UsageError(f"invalid --tests {args.tests!r} (valid: {', '.join(TESTS)})")
    argv = ["--cpus", ",".join(map(str, cpus)), "--iterations", str(iterations), "--reps", str(reps),
            "--slice-ms", str(slice_ms), "--tests", ",".join(tests)]  # fmt: skip
    params = {"cpus": cpus, "iterations": iterations, "reps": reps, "slice_ms": slice_ms, "tests": tests}
    expected = reps * iterations * 4e-5 + (2 * slice_ms / 1000 if "slice" in tests else 0)
    path, chosen = common.db_path(args)
    with (
        common.node_lock(args, cpus),
        Session("ctxswitch", path, chosen, common.tags(args), common.live_root()) as session,
        progress_bar(expected, enabled=not args.json) as update,
    ):
        run = session.add(
            session.node.probe(
                "ctxswitch", argv, params, expected, lambda t: update("switching", t), analyze, away=frozenset(cpus)
            )
        )
    result = {**run.result, "analysis": run.analysis}
    if args.json:
        print(json.dumps({"session": session.id, **result}, indent=2))
        return 0
    out = text.console()
    out.print(ctxswitch_table(result))
    for line in slice_lines(result):
        out.print(line)
    warning = text.virt_warning(session.facts)
    if warning:
        out.print(warning)
    out.print(f"Saved as session {session.id} in {session.db_path}. Next: `quietcore results show {session.id}`.")
    return 0
