"""Measure wake-up latency per CPU, as cyclictest does.

On each CPU a thread sleeps with clock_nanosleep(TIMER_ABSTIME) to the next
interval and records how late it woke, in nanoseconds. /dev/cpu_dma_latency
is left alone unless --dma-latency asks to hold a limit for the run (it is
released, so the old limit returns, when the run ends).

example: quietcore latency --cpus 1 --duration 10 --policy fifo --priority 80
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from quietcore.commands import common
from quietcore.facts.cpulist import format_cpulist, parse_cpulist
from quietcore.facts.cpus import online_cpus
from quietcore.options import USABLE, cpus_option, duration_option, int_in_range, sched_option, usable_cpus
from quietcore.report import text
from quietcore.report.progress import progress_bar
from quietcore.report.tables import latency_table
from quietcore.sched import NAMES as POLICIES
from quietcore.session import Session

NAME = "latency"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cpus", required=True, metavar="LIST", help="CPUs to measure")
    parser.add_argument("--duration", required=True, metavar="S", help="seconds (0.001-86400)")
    parser.add_argument("--interval-us", metavar="N", default="1000", help="sleep interval (50-1000000, default 1000)")
    parser.add_argument("--threshold-us", metavar="N", default="100", help="wake-ups later than this are events")
    parser.add_argument("--policy", choices=POLICIES, default="other", help="scheduling policy (default other)")
    parser.add_argument("--priority", metavar="N", default="0", help="1-99 with fifo or rr")
    parser.add_argument("--force", action="store_true", help="allow fifo/rr on every online CPU")
    parser.add_argument("--dma-latency", metavar="US", help="hold this /dev/cpu_dma_latency limit during the run")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    common.add_wait(parser)
    common.add_db(parser)
    common.add_tags(parser)


def probe_args(args: argparse.Namespace) -> tuple[list[str], dict[str, Any], float]:
    online = online_cpus(common.live_root())
    cpus = cpus_option(args.cpus, usable_cpus(online), what=USABLE)
    priority = sched_option(args.policy, args.priority, cpus, online, args.force)
    duration = duration_option(args.duration)
    params: dict[str, Any] = {
        "cpus": format_cpulist(cpus),
        "duration_s": duration,
        "interval_us": int_in_range(args.interval_us, "--interval-us", 50, 1_000_000),
        "threshold_us": int_in_range(args.threshold_us, "--threshold-us", 1, 10_000_000),
        "policy": args.policy,
        "priority": priority,
        "dma_latency_us": None
        if args.dma_latency is None
        else int_in_range(args.dma_latency, "--dma-latency", 0, 2_000_000),
    }
    argv = ["--cpus", params["cpus"], "--duration", repr(duration)]
    for key in ("interval_us", "threshold_us", "policy", "priority"):
        argv += ["--" + key.replace("_", "-"), str(params[key])]
    if params["dma_latency_us"] is not None:
        argv += ["--dma-latency", str(params["dma_latency_us"])]
    if args.force:
        argv.append("--force")
    return argv, params, duration


def run(args: argparse.Namespace) -> int:
    argv, params, duration = probe_args(args)
    path, chosen = common.db_path(args)
    with (
        common.node_lock(args, parse_cpulist(params["cpus"])),
        Session("latency", path, chosen, common.tags(args), common.live_root()) as session,
        progress_bar(duration, enabled=not args.json) as update,
    ):
        run = session.add(
            session.node.probe(
                "latency",
                argv,
                params,
                duration + 0.1,
                lambda t: update("measuring latency", t),
                away=parse_cpulist(params["cpus"]),
            )
        )
    result = run.result
    if args.json:
        cpus = [{k: v for k, v in c.items() if k != "events"} for c in result["cpus"]]
        print(
            json.dumps(
                {"session": session.id, **{k: v for k, v in result.items() if k != "cpus"}, "cpus": cpus}, indent=2
            )
        )
        return 0
    out = text.console()
    out.print(latency_table(result))
    warning = text.virt_warning(session.facts)
    if warning:
        out.print(warning)
    out.print(f"Saved as session {session.id} in {session.db_path}. Next: `quietcore results show {session.id}`.")
    return 0
