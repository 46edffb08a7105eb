"""What the OS took from every job on this node, charged to each job by source.

Each job's CPUs are traced. Every stretch on them that is neither the job's own threads nor idle is
charged to the job, by source: IRQs, softirqs, kernel threads, timers, other tasks. A Slurm job is found
by its cgroup, job_<id>, on cgroup v1's cpuset hierarchy or on v2, with no change to the job; --cgroup
names any other cgroup. The CPUs no job holds are "no job"'s. Every CPU is traced, in a tracefs instance
of its own, as `intruders` traces. Needs root.

examples:
  quietcore watch --once 10
  quietcore watch --once 30 --prometheus /var/lib/prometheus/node-exporter
  quietcore watch --once 10 --cgroup system.slice/myapp.service
"""

from __future__ import annotations

import argparse
import json
import time

from quietcore.attribution import intruders, tracer
from quietcore.commands import common
from quietcore.errors import CommandError, UsageError
from quietcore.facts.cpulist import format_cpulist
from quietcore.facts.cpus import online_cpus
from quietcore.facts.devices import irq_owners
from quietcore.options import int_in_range, positive_float
from quietcore.owner import own_threads
from quietcore.report import text
from quietcore.safe import plain
from quietcore.watch import jobs as jobs_
from quietcore.watch.charge import Charge, charge

NAME = "watch"
#: Sources named in a job's row of the table
SHOWN = 3
#: The kernel's buffer per CPU, as `intruders`' default: read once a quarter of it is full
BUFFER_KB = 1024


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--once", metavar="S", required=True,
                        help="look for S seconds, then print what the OS took from each job (0.1-3600)")  # fmt: skip
    parser.add_argument("--cgroup", action="append", metavar="PATH", default=[],
                        help="also watch this cgroup: a path below the cpuset hierarchy's mount "
                             "(repeatable)")  # fmt: skip
    parser.add_argument("--buffer-kb", metavar="KB", default=str(BUFFER_KB),
                        help="the kernel's trace buffer per CPU (4-1048576)")  # fmt: skip
    parser.add_argument("--top", metavar="N", default="10", help="sources kept a job in --json (1-1000)")
    parser.add_argument("--prometheus", metavar="DIR",
                        help="also write DIR/quietcore-watch.prom for node_exporter's textfile collector")  # fmt: skip
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace) -> int:
    seconds = positive_float(args.once, "--once", 0.1, 3600)
    buffer_kb = int_in_range(args.buffer_kb, "--buffer-kb", 4, 1 << 20)
    top = int_in_range(args.top, "--top", 1, 1000)
    where = common.prometheus_dir(args)
    root = common.live_root()
    h = jobs_.hierarchy(root)
    if h is None and args.cgroup:
        raise UsageError("--cgroup: this node has no cpuset cgroup hierarchy (valid: a path below it)")
    try:
        named = [jobs_.named(root, h, c) for c in args.cgroup] if h is not None else []
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    ok, why = tracer.usable()
    if not ok:
        raise CommandError(f"watch needs the tracer: {why}", exit_code=3)
    found = (jobs_.slurm_jobs(root, h) if h is not None else []) + named
    online = online_cpus(root)
    charges, lost = _look(found, online, seconds, buffer_kb)
    owners = irq_owners(root)
    for c in charges:
        for s in c.sources.values():
            if s.kind == "irq" and owners:
                s.name = _device(s.name, owners)
    if args.json:
        print(json.dumps({"seconds": seconds, "lost_events": lost, "jobs": [c.to_json(top) for c in charges]},
                         indent=2))  # fmt: skip
    else:
        _show(charges, seconds, h is not None, lost)
    if where is not None:
        from quietcore.watch import metrics  # prometheus_client: see quietcore.lazy

        written = metrics.write(where, charges, seconds)
        if not args.json:
            text.console().print(f"Metrics for node_exporter: {written}")
    return 0


def _device(name: str, owners: dict[int, str]) -> str:
    head = name.split(" ", 2)
    if len(head) >= 2 and head[0] == "irq" and head[1].isdigit() and int(head[1]) in owners:
        return f"irq {head[1]} ({owners[int(head[1])]})"
    return name


def _look(found: list[jobs_.Job], online: frozenset[int], seconds: float, buffer_kb: int) -> tuple[
        list[Charge], int]:  # fmt: skip
    """Trace every CPU for `seconds`, then charge each job. quietcore's own threads are named as itself."""
    with tracer.TraceSession(None, intruders.EVENTS, buffer_kb) as trace:
        with tracer.Stream(trace) as stream:
            time.sleep(seconds)
        raw = stream.text()
        lost = sum(stream.lost_by_cpu.values())
        try:
            to_ns, window = tracer.marked_clock(raw, trace.clock)
        except ValueError as exc:
            fix = f"{lost:,} events were lost: give --buffer-kb more" if lost else "look for fewer seconds"
            raise CommandError(f"watch: {exc} ({fix})") from None
        lines = raw.splitlines()
        return charge(lines, to_ns, window, found, online, own_threads() | {stream.tid}), lost


def _show(charges: list[Charge], seconds: float, has_cgroups: bool, lost: int) -> None:
    from rich.table import Table

    out = text.console()
    table = Table(title=None)
    for name, justify in (("job", "left"), ("CPUs", "left"), ("its threads", "right"), ("OS took", "right"),
                          ("of its CPUs", "right"), ("largest", "left")):  # fmt: skip
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for c in charges:
        share = c.taken_ns / c.traced_ns if c.traced_ns else 0.0
        largest = ", ".join(f"{plain(s.name)} {s.ns / 1e6:,.1f} ms" for s in c.ranked()[:SHOWN]) or "-"
        table.add_row(plain(c.job), format_cpulist(c.cpus), f"{c.job_ns / 1e9:,.2f} s", f"{c.taken_ns / 1e6:,.1f} ms",
                      f"{share:.2%}", largest)  # fmt: skip
    out.print(table)
    jobs = [c for c in charges if c.job != "no job"]
    if not jobs:
        where = "cgroups named job_<id>" if has_cgroups else "a cpuset cgroup hierarchy"
        out.print(f"No job found: this node has no {where}. Every CPU is no job's.")
    out.print(f"Watched every CPU for {seconds:g} s. \"OS took\" is time on a job's CPUs that was neither its "
              "own threads' nor idle: IRQs, softirqs, kernel threads, timers, other tasks.")  # fmt: skip
    if lost:
        text.console(stderr=True).print(f"warning: the kernel lost {lost:,} events: give --buffer-kb more.")
