"""What the OS took from every job on this node, charged to each job by source.

Every stretch on a job's CPUs that is neither its own threads nor idle is charged to the job, by source:
IRQs, softirqs, kernel threads, timers, other tasks. A Slurm job is found by its cgroup, job_<id>, on
cgroup v1's cpuset hierarchy or on v2, with no change to the job; --cgroup names any other cgroup. The
CPUs no job holds are "no job"'s. The sums are made in the kernel by eBPF where the node has BTF and
libbpf, else read from a trace instance of its own. Needs root. --once S looks once and prints the jobs'
table. Without it, watch runs until stopped, a look every --interval seconds: it says each job's account
as it ends and stores it (results show job_ID). A Slurm Epilog calls --ended JOBID.

examples:
  quietcore watch --once 10
  quietcore watch --once 10 --cgroup system.slice/myapp.service
  quietcore watch --interval 60 --prometheus /var/lib/prometheus/node-exporter
  quietcore watch --ended "$SLURM_JOB_ID" --admin-comment
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.table import Table

from quietcore.attribution import intruders, tracer
from quietcore.commands import common
from quietcore.errors import CommandError, UsageError
from quietcore.facts import cgroup
from quietcore.facts.cgroup import Hierarchy
from quietcore.facts.cpulist import brief_cpulist, counted
from quietcore.facts.cpus import online_cpus
from quietcore.facts.devices import irq_owners
from quietcore.facts.procstat import parse_proc_stat, steal_delta_ns
from quietcore.facts.root import Root
from quietcore.levers.journal import held_signals
from quietcore.measure import Measurer
from quietcore.options import int_in_range, positive_float
from quietcore.owner import own_threads
from quietcore.report import text
from quietcore.safe import plain
from quietcore.store import db
from quietcore.store.sessions import now_iso
from quietcore.watch import bpf, record
from quietcore.watch import jobs as jobs_
from quietcore.watch.charge import NO_JOB, Charge, add, charge, from_kernel
from quietcore.watch.ledger import JOB_ID, Ledger, Tracked

NAME = "watch"
#: Sources named in a job's row of the table
SHOWN = 3
#: How often a watcher looks for a job starting or ending, or an Epilog's request, within a look
SLICE_S = 0.5
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
    parser.add_argument("--ended", metavar="JOBID",
                        help="for a Slurm Epilog: have the running watcher close this job now, store its record "
                             "and print its line")  # fmt: skip
    parser.add_argument(
        "--wait",
        metavar="S",
        default="30",
        help="with --ended: how long to wait for the watcher's answer (1-600, default 30)",
    )
    parser.add_argument(
        "--admin-comment",
        action="store_true",
        help="with --ended: also put the job's line in its AdminComment, by scontrol",
    )
    parser.add_argument("--mechanism", choices=("auto", "bpf", "tracefs"), default="auto",
                        help="how it looks: bpf adds up in the kernel, at a fraction of the cost; tracefs reads "
                             "every event; auto takes bpf where libbpf and BTF are (default auto)")  # fmt: skip
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    common.add_db(parser)


def run(args: argparse.Namespace) -> int:
    if args.ended is not None:
        return _ended(args.ended, positive_float(args.wait, "--wait", 1, 600), args.admin_comment)
    for option, given in (("--admin-comment", args.admin_comment), ("--wait", args.wait != "30")):
        if given:
            raise UsageError(f"{option} goes with --ended JOBID (an Epilog's call)")
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
    mechanism = _mechanism(args.mechanism)
    online = online_cpus(root)
    owners = irq_owners(root)
    if seconds is not None:
        with _source(mechanism, buffer_kb) as source:
            look = _look(source, root, h, args.cgroup, online, seconds, owners)
        charges, lost = look.charges, look.lost
        if args.json:
            print(json.dumps({"seconds": seconds, "mechanism": mechanism, "lost_events": lost,
                              "jobs": [c.to_json(top) for c in charges]}, indent=2))  # fmt: skip
        else:
            _show(charges, seconds, h is not None, lost, mechanism)
        if where is not None:
            from quietcore.watch import metrics  # prometheus_client: see quietcore.lazy

            written = metrics.write(where, charges, seconds)
            if not args.json:
                text.console().print(f"Metrics for node_exporter: {written}")
        return 0
    return _watch(args, root, h, online, owners, interval, (mechanism, buffer_kb), where, top)


def _jobs(root: Root, h: Hierarchy | None, named: list[str]) -> list[jobs_.Job]:
    """The node's Slurm jobs and the cgroups named, as they are now."""
    if h is None:
        return []
    try:
        return jobs_.slurm_jobs(root, h) + [jobs_.named(root, h, c) for c in named]
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _watch(args: argparse.Namespace, root: Root, h: Hierarchy | None, online: frozenset[int], owners: dict[int, str],
           interval: float, how: tuple[str, int], where: Path | None, top: int) -> int:  # fmt: skip
    """Look after look until stopped (SIGTERM, as systemd stops a service; Ctrl-C), each job's figures added
    up while it runs. A job gone since the last look, or one an Epilog asks for (`--ended`), has ended: its
    account is stored as a session of its own and said in a line. A look ends early when a job starts or
    ends, so that each look's figures are one set of jobs'. What each job has so far is in the state
    directory after every look: a restarted watcher goes on from it, counting nothing twice."""

    out = text.console(stderr=args.json)  # with --json, standard output is JSON lines alone
    ledger = Ledger.open()
    try:
        other = ledger.watcher()
        if other is not None and other != os.getpid():
            raise CommandError(f"another quietcore watch runs on this node (pid {other}): stop it first", exit_code=3)
        ledger.claim()
        node = Measurer(root)  # the node's facts, read once: every job's record carries them
        path, chosen = common.db_path(args)
        db.open_db(path, chosen=chosen).close()  # a database that cannot be written fails before anything runs
        live: dict[str, Tracked] = ledger.live()
        no_job: Charge | None = None
        said: dict[str, tuple[int | None, str]] = {}  # jobs ended, newest last: what an Epilog is answered
        looked = 0.0
        if live:
            out.print(f"Going on from what the last watcher counted: {counted(len(live), 'job')}.")
        way = "its sums made in the kernel (bpf)" if how[0] == "bpf" else "each event read (tracefs)"
        out.print(f"Watching every CPU, {way}, a look every {interval:g} s, until stopped.")

        def close(job: str, how: str) -> None:
            t = live.pop(job)
            conn = db.open_db(path, chosen=chosen)
            try:
                session = record.store(conn, node.facts, node.fingerprint, t.charge, t.started, t.cgroup)
            finally:
                conn.close()
            said[job] = (session, record.line(t.charge, how))
            while len(said) > 1000:
                said.pop(next(iter(said)))
            if args.json:
                print(json.dumps({"ended": True, "session": session, **t.charge.to_json(top)}), flush=True)
            else:
                out.print(f"{record.line(t.charge, how)} Stored as session {session}.")

        try:
            with _source(*how) as source:
                gone_at_start = [j for j in live if j not in {x.name for x in _jobs(root, h, args.cgroup)}]
                for job in gone_at_start:  # ended while no watcher ran: what was counted is kept
                    close(job, "as it ended, while watch was stopped")
                while True:
                    began = now_iso()
                    look = _look(source, root, h, args.cgroup, online, interval, owners, ledger)
                    # what a look found is counted whole: a SIGTERM now ends watching after it, not inside it
                    with held_signals():
                        looked += look.took
                        paths = {j.name: j.path for j in look.found}
                        for c in look.charges:
                            if c.job == NO_JOB:
                                no_job = add(no_job, c) if no_job is not None else c
                            elif c.job in live:
                                live[c.job].charge = add(live[c.job].charge, c)
                            else:
                                live[c.job] = Tracked(c, began, paths.get(c.job, ""))
                        asked = ledger.requests()
                        for job in [j for j in live if j not in look.present or j in asked]:
                            close(job, "as it ended")
                        for job in asked:
                            session, line = said.get(job, (None, f"Job {job}: watch never saw it run."))
                            ledger.answer(job, session, line)
                        ledger.save(live)
                        if look.lost:
                            warning = f"warning: the kernel lost {look.lost:,} events in a look: give --buffer-kb more."
                            text.console(stderr=True).print(warning)
                        if where is not None:
                            from quietcore.watch import metrics  # prometheus_client: see quietcore.lazy

                            shown = [t.charge for t in live.values()] + ([no_job] if no_job is not None else [])
                            metrics.write(where, shown, looked, cumulative=True)
        except KeyboardInterrupt:
            pass
        for t in live.values():
            line = record.line(t.charge, "as watching stopped")
            print(json.dumps({"ended": False, **t.charge.to_json(top)}) if args.json else line, flush=True)
        if live:
            out.print("The jobs above still run: a watcher started again goes on from their figures.")
    finally:
        ledger.release()
        ledger.close()
    return 0


def _mechanism(asked: str) -> str:
    """bpf or tracefs, as asked and as the node allows; exit 3 with why where it allows neither."""
    if asked in ("auto", "bpf"):
        ok, why = bpf.usable()
        if ok:
            return "bpf"
        if asked == "bpf":
            raise CommandError(f"--mechanism bpf: {why}", exit_code=3)
    ok, why = tracer.usable()
    if not ok:
        raise CommandError(f"watch needs the tracer: {why}", exit_code=3)
    return "tracefs"


@contextlib.contextmanager
def _source(mechanism: str, buffer_kb: int) -> Iterator[Any]:
    """The in-kernel account (watch.bpf.Account), or a tracefs instance of watch's own."""
    if mechanism == "bpf":
        try:
            account = bpf.Account()
        except OSError as exc:
            raise CommandError(f"watch's BPF programs did not load: {exc.strerror or exc} (--mechanism tracefs "
                               "traces instead)", exit_code=3) from None  # fmt: skip
        with account:
            yield account
    else:
        with tracer.TraceSession(None, EVENTS, buffer_kb) as trace:
            yield trace


@dataclass(frozen=True)
class Look:
    """One look's figures: each job's charge, the events the kernel lost, its seconds, the jobs charged, and
    the jobs there as it ended (a job not there has ended)."""

    charges: list[Charge]
    lost: int
    took: float
    found: list[jobs_.Job]
    present: frozenset[str]


def _look(source: Any, root: Root, h: Hierarchy | None, named: list[str], online: frozenset[int],
          seconds: float, owners: dict[int, str],
          ledger: Any = None) -> Look:  # fmt: skip
    """Look at every CPU for `seconds`, then charge each job found as the look began, with the threads it had
    then and as the look ended. With a ledger, the look ends early when a job starts or ends, or an Epilog asks.
    quietcore's own threads are named as itself."""
    before = _jobs(root, h, named)
    watching = h is not None and ledger is not None
    dirs = jobs_.job_dirs(root, jobs_.slurm_roots(root, h)) if h is not None and watching else frozenset()
    steal_before = parse_proc_stat(root.read_text("proc/stat") or "")
    started = time.monotonic()
    tracing = isinstance(source, tracer.TraceSession)
    with tracer.Stream(source) if tracing else contextlib.nullcontext() as stream:
        if ledger is None:
            time.sleep(seconds)
        else:
            while (left := seconds - (time.monotonic() - started)) > 0:
                time.sleep(min(SLICE_S, left))
                # Slurm's own directory is listed again too: slurmd makes it as its first job starts
                if ledger.requests() or (h is not None and jobs_.job_dirs(root, jobs_.slurm_roots(root, h)) != dirs):
                    break
    took = time.monotonic() - started
    steal = steal_delta_ns(steal_before, parse_proc_stat(root.read_text("proc/stat") or ""), os.sysconf("SC_CLK_TCK"))
    # a CPU taken offline during the look is no job's CPU-time from then on: as the look ended, where they differ
    online = online & online_cpus(root) or online
    # a job that began during the look is charged from the next, which its start ended early: not for the time
    # before it was there; the threads of those that ran throughout are both scans'
    known = {j.name for j in before}
    after = _jobs(root, h, named)
    found = _merged(before, [j for j in after if j.name in known])
    if not tracing:
        entries, wall_ns = source.read()
        v1 = h is None or h.version == 1
        charges = from_kernel(entries, source.name, source.comm, wall_ns, found, v1, online, own_threads(),
                              owners)  # fmt: skip
        return Look(_stolen(charges, steal), 0, took, found, frozenset(j.name for j in after))
    assert stream is not None
    raw = stream.text()
    lost = sum(stream.lost_by_cpu.values())
    try:
        to_ns, window = tracer.marked_clock(raw, source.clock)
    except ValueError as exc:
        fix = f"{lost:,} events were lost: give --buffer-kb more" if lost else "look for fewer seconds"
        raise CommandError(f"watch: {exc} ({fix})") from None
    own = own_threads() | {stream.tid}
    charges = charge(raw.splitlines(), to_ns, window, found, online, own, owners)
    return Look(_stolen(charges, steal), lost, took, found, frozenset(j.name for j in after))


def _stolen(charges: list[Charge], steal: dict[int, float]) -> list[Charge]:
    """Each job's CPUs' steal over the look (a VM's host, which no guest event shows)."""
    for c in charges:
        c.steal_ns = sum(steal.get(cpu, 0.0) for cpu in c.cpus)
    return charges


def _merged(before: list[jobs_.Job], after: list[jobs_.Job]) -> list[jobs_.Job]:
    """Each job seen as a look began or ended, with the CPUs and threads of both."""
    out: dict[str, jobs_.Job] = {}
    for j in [*before, *after]:
        seen = out.get(j.name)
        out[j.name] = (
            j
            if seen is None
            else jobs_.Job(j.name, j.path, seen.cpus | j.cpus, seen.threads | j.threads, seen.ids | j.ids)
        )
    return list(out.values())


def _ended(job: str, wait: float, admin_comment: bool) -> int:
    """An Epilog's call: ask the running watcher to close the job now, wait for its answer, print its line;
    with `admin_comment`, also set it as the job's AdminComment."""

    if not JOB_ID.fullmatch(job):
        raise UsageError(f"invalid --ended {job!r} (valid: a Slurm job id, digits, as $SLURM_JOB_ID gives it)")
    try:
        ledger = Ledger.open(create=False)
    except FileNotFoundError:
        raise CommandError("no quietcore watch runs on this node: nothing was watched", exit_code=3) from None
    try:
        if ledger.watcher() is None:
            raise CommandError("no quietcore watch runs on this node: nothing was watched", exit_code=3)
        ledger.ask(job)
        deadline = time.monotonic() + wait
        while (answer := ledger.answered(job)) is None:
            if time.monotonic() > deadline:
                ledger.withdraw(job)
                raise CommandError(f"quietcore watch did not answer for job {job} within {wait:g} s "
                                   "(give --wait more)", exit_code=3)  # fmt: skip
            time.sleep(0.1)
    finally:
        ledger.close()
    said = answer.line + (f" Stored as session {answer.session}." if answer.session is not None else "")
    print(plain(said))
    if admin_comment and answer.session is not None:
        return _admin_comment(job, answer.line)
    return 0


#: AdminComment's text: Slurm keeps more, but a line in `sacct` or `scontrol show job` is read, not scrolled
COMMENT_CHARS = 250


def _admin_comment(job: str, line: str) -> int:
    """The job's line as its AdminComment. An Epilog's job has finished, and slurmctld refuses scontrol's
    update of a finished job: the accounting database takes it then, by sacctmgr (as Princeton's jobstats
    stores its summary), where the site keeps one (slurmdbd)."""

    comment = plain(f"quietcore: {line}")[:COMMENT_CHARS]
    tried = []
    by_slurmctld = ["scontrol", "update", f"JobId={job}", f"AdminComment={comment}"]
    by_slurmdbd = ["sacctmgr", "-i", "update", "job", "where", f"jobid={job}", "set", f"AdminComment={comment}"]
    for argv in (by_slurmctld, by_slurmdbd):
        found = shutil.which(argv[0])
        if found is None:
            tried.append(f"no {argv[0]} on PATH")
            continue
        done = subprocess.run([found, *argv[1:]], capture_output=True, text=True, timeout=30, check=False)
        said = (done.stdout + done.stderr).strip()
        if done.returncode == 0 and "nothing modified" not in said.lower():
            return 0
        why = plain(said.splitlines()[-1]).rstrip(".") if said else f"exit {done.returncode}"
        tried.append(f"{argv[0]}: {why}")
    # a line of a log (slurmd's Epilog output), not wrapped to a terminal's width
    print(f"warning: job {job}'s AdminComment is not set ({'; '.join(tried)}). A finished job's is set by "
          "sacctmgr, which needs the site's slurmdbd.", file=sys.stderr)  # fmt: skip
    return 1


def _show(charges: list[Charge], seconds: float, has_cgroups: bool, lost: int, mechanism: str) -> None:
    out = text.console()
    table = Table(title=None)
    for name, justify in (("job", "left"), ("CPUs", "left"), ("its threads", "right"), ("OS took", "right"),
                          ("of its CPUs", "right"), ("largest", "left")):  # fmt: skip
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for c in charges:
        share = c.taken_ns / c.traced_ns if c.traced_ns else 0.0
        largest = ", ".join(f"{plain(s.name)} {s.ns / 1e6:,.1f} ms" for s in c.ranked()[:SHOWN]) or "-"
        table.add_row(plain(c.job), brief_cpulist(sorted(c.cpus)), f"{c.job_ns / 1e9:,.2f} s",
                      f"{c.taken_ns / 1e6:,.1f} ms", f"{share:.2%}", largest)  # fmt: skip
    out.print(table)
    jobs = [c for c in charges if c.job != "no job"]
    if not jobs:
        where = "cgroups named job_<id>" if has_cgroups else "a cpuset cgroup hierarchy"
        out.print(f"No job found: this node has no {where}. Every CPU is no job's.")
    how = "added up in the kernel (bpf)" if mechanism == "bpf" else "each event read (tracefs)"
    out.print(f"Watched every CPU for {seconds:g} s, {how}. \"OS took\" is time on a job's CPUs that was neither "
              "its own threads' nor idle: IRQs, softirqs, kernel threads, timers, other tasks.")  # fmt: skip
    if lost:
        text.console(stderr=True).print(f"warning: the kernel lost {lost:,} events: give --buffer-kb more.")
