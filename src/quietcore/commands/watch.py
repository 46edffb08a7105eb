"""What the OS took from every job on this node, charged to each job by source.

Each job's CPUs are traced. Every stretch on them that is neither the job's own threads nor idle is
charged to the job, by source: IRQs, softirqs, kernel threads, timers, other tasks. A Slurm job is found
by its cgroup, job_<id>, on cgroup v1's cpuset hierarchy or on v2, with no change to the job; --cgroup
names any other cgroup. The CPUs no job holds are "no job"'s. Every CPU is traced, in a tracefs instance
of its own, as `intruders` traces. Needs root. --once S looks once and prints the jobs' table. Without
it, watch runs until stopped, a look every --interval seconds, and says each job's account as it ends.

examples:
  quietcore watch --once 10
  quietcore watch --once 10 --cgroup system.slice/myapp.service
  quietcore watch --interval 60 --prometheus /var/lib/prometheus/node-exporter
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from rich.table import Table

from quietcore.attribution import intruders, tracer
from quietcore.commands import common
from quietcore.errors import CommandError, UsageError
from quietcore.facts import cgroup
from quietcore.facts.cgroup import Hierarchy
from quietcore.facts.cpulist import format_cpulist
from quietcore.facts.cpus import online_cpus
from quietcore.facts.devices import irq_owners
from quietcore.facts.root import Root
from quietcore.options import int_in_range, positive_float
from quietcore.owner import own_threads
from quietcore.report import text
from quietcore.safe import plain
from quietcore.watch import jobs as jobs_
from quietcore.watch.charge import NO_JOB, Charge, add, charge

NAME = "watch"
#: Sources named in a job's row of the table
SHOWN = 3
#: The kernel's buffer per CPU, as `intruders`' default: read once a quarter of it is full
BUFFER_KB = 1024
#: `intruders`' events but those that say only how a source came (who woke a task, queued a work item, sent
#: an IPI; where a task moved from): what the OS took, and from whom, needs none of them, and the wake-ups
#: alone were a third of the lines at rest here
EVENTS = tuple(e for e in intruders.EVENTS if e.split("/")[1] not in {
    "sched_waking", "sched_migrate_task", "ipi_send_cpu", "ipi_send_cpumask", "csd_queue_cpu",
    "workqueue_queue_work"})  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--once", metavar="S",
                        help="look once, for S seconds, then print what the OS took from each job "
                             "(0.1-3600)")  # fmt: skip
    parser.add_argument("--interval", metavar="S", default="60",
                        help="without --once: watch until stopped, a look every S seconds, its figures added to "
                             "each job's (1-86400, default 60)")  # fmt: skip
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
    seconds = positive_float(args.once, "--once", 0.1, 3600) if args.once is not None else None
    interval = positive_float(args.interval, "--interval", 1, 86400)
    buffer_kb = int_in_range(args.buffer_kb, "--buffer-kb", 4, 1 << 20)
    top = int_in_range(args.top, "--top", 1, 1000)
    where = common.prometheus_dir(args)
    root = common.live_root()
    h = cgroup.find(root)
    if h is None and args.cgroup:
        raise UsageError("--cgroup: this node has no cpuset cgroup hierarchy (valid: a path below it)")
    _jobs(root, h, args.cgroup)  # a --cgroup that is no cgroup is refused before anything is traced
    ok, why = tracer.usable()
    if not ok:
        raise CommandError(f"watch needs the tracer: {why}", exit_code=3)
    online = online_cpus(root)
    owners = irq_owners(root)
    if seconds is not None:
        with tracer.TraceSession(None, EVENTS, buffer_kb) as trace:
            charges, lost = _look(trace, _jobs(root, h, args.cgroup), online, seconds, owners)
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
    return _watch(root, h, args.cgroup, online, owners, interval, buffer_kb, where, top, args.json)


def _jobs(root: Root, h: Hierarchy | None, named: list[str]) -> list[jobs_.Job]:
    """The node's Slurm jobs and the cgroups named, as they are now."""
    if h is None:
        return []
    try:
        return jobs_.slurm_jobs(root, h) + [jobs_.named(root, h, c) for c in named]
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _watch(root: Root, h: Hierarchy | None, named: list[str], online: frozenset[int], owners: dict[int, str],
           interval: float, buffer_kb: int, where: Path | None, top: int, as_json: bool) -> int:  # fmt: skip
    """Look after look until stopped (SIGTERM, as systemd stops a service; Ctrl-C), each job's figures added
    up while it runs. A job gone since the last look has ended: its line says what the OS took from it over
    every look it was in, and its series leave the metrics. Each look's figures are in the file at once."""
    out = text.console()
    totals: dict[str, Charge] = {}
    looked = 0.0
    out.print(f"Watching every CPU, a look every {interval:g} s, until stopped.")
    try:
        with tracer.TraceSession(None, EVENTS, buffer_kb) as trace:
            while True:
                charges, lost = _look(trace, _jobs(root, h, named), online, interval, owners)
                looked += interval
                now = {c.job: c for c in charges}
                for gone in [j for j in totals if j not in now]:
                    _ended(out, totals.pop(gone), top, as_json)
                for c in charges:
                    totals[c.job] = add(totals[c.job], c) if c.job in totals else c
                if lost:
                    text.console(stderr=True).print(f"warning: the kernel lost {lost:,} events in a look: give "
                                                    "--buffer-kb more.")  # fmt: skip
                if where is not None:
                    from quietcore.watch import metrics  # prometheus_client: see quietcore.lazy

                    metrics.write(where, list(totals.values()), looked, cumulative=True)
    except KeyboardInterrupt:
        pass
    for c in totals.values():
        _ended(out, c, top, as_json, still=True)
    return 0


def _ended(out: Any, c: Charge, top: int, as_json: bool, still: bool = False) -> None:
    if as_json:
        print(json.dumps({"ended": not still, **c.to_json(top)}), flush=True)
        return
    share = c.taken_ns / c.traced_ns if c.traced_ns else 0.0
    largest = ", ".join(f"{plain(s.name)} {s.ns / 1e6:,.1f} ms" for s in c.ranked()[:SHOWN]) or "nothing"
    what = "as watching stopped" if still else "as it ended"
    name = f"Job {plain(c.job)}" if c.job != NO_JOB else "No job"
    out.print(f"{name}, CPUs {format_cpulist(c.cpus)}, {what}: the OS took {c.taken_ns / 1e6:,.1f} ms, "
              f"{share:.2%} of its CPUs' time. Largest: {largest}.")  # fmt: skip


def _look(trace: tracer.TraceSession, found: list[jobs_.Job], online: frozenset[int], seconds: float,
          owners: dict[int, str]) -> tuple[list[Charge], int]:  # fmt: skip
    """Trace every CPU for `seconds`, then charge each job. quietcore's own threads are named as itself."""
    with tracer.Stream(trace) as stream:
        time.sleep(seconds)
    raw = stream.text()
    lost = sum(stream.lost_by_cpu.values())
    try:
        to_ns, window = tracer.marked_clock(raw, trace.clock)
    except ValueError as exc:
        fix = f"{lost:,} events were lost: give --buffer-kb more" if lost else "look for fewer seconds"
        raise CommandError(f"watch: {exc} ({fix})") from None
    return charge(raw.splitlines(), to_ns, window, found, online, own_threads() | {stream.tid}, owners), lost


def _show(charges: list[Charge], seconds: float, has_cgroups: bool, lost: int) -> None:
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
