"""Name everything that ran on some CPUs besides your workload, and who sent it.

With -- CMD, the workload is the command and every process it starts
(pinned to --cpus unless --no-pin); with --duration, there is no
workload and everything that runs there counts. Every CPU is traced
(tracefs: sched, irq, irq_vectors, ipi, csd, workqueue, timer), because
the sender of an IPI, the waker of a task and the queuer of a work item
run elsewhere. Per watched CPU: tasks (count, time, longest slice, and
woken by whom or moved from where), IRQs, softirqs and vectors, IPIs with
their sender, work items with their queuer, timers; time net of nesting;
each with what would have kept it away. Needs root. Stored as a session.

examples:
  quietcore intruders --cpus 1 --duration 10
  quietcore intruders --cpus 2,3 -- java -jar benchmarks.jar
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from quietcore.attribution import explain, intruders, remedy, sampled, telling, tracer
from quietcore.commands import common
from quietcore.errors import CommandError, UsageError
from quietcore.experiments import metric
from quietcore.experiments.context import slots_json, steal_ticks
from quietcore.experiments.custom_exec import check_argv, end_group
from quietcore.experiments.iterations import explain_iterations
from quietcore.experiments.metric import Metric, parse_metric, parse_metric_of
from quietcore.facts.cpulist import format_cpulist
from quietcore.facts.cpus import online_cpus
from quietcore.facts.devices import irq_owners
from quietcore.measure import recorded
from quietcore.options import USABLE, cpus_option, duration_option, int_in_range, positive_float, usable_cpus
from quietcore.owner import own_threads, step_aside, step_back
from quietcore.report import text
from quietcore.report.kinds import kind_of
from quietcore.report.progress import progress_bar
from quietcore.safe import plain
from quietcore.session import Session
from quietcore.store import sessions

NAME = "intruders"
BUFFER_KB = 1024  # per CPU, the default: it holds about 12,000 events, read once a quarter of it is full


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cpus", required=True, metavar="LIST", help="the CPUs to watch, e.g. 1 or 2-3")
    parser.add_argument("--duration", metavar="S", help="watch for S seconds, with no workload (0.01-3600)")
    parser.add_argument("--no-pin", action="store_true", help="with a command: leave its affinity as it is")
    parser.add_argument(
        "--buffer-kb", metavar="KB", default=str(BUFFER_KB),
        help=f"the kernel's trace buffer per CPU, read once a quarter full or each second (4-1048576, default "
             f"{BUFFER_KB})",
    )  # fmt: skip
    parser.add_argument("--explain-above", metavar="US",
                        help="each stretch over US µs the intruders took: what ran in it, who sent it")  # fmt: skip
    parser.add_argument("--metric", action="append", metavar="NAME:REGEX[:higher|lower] | jmh",
                        help="with a command: its own figure of merit, read from its output; each sample's interval "
                             "gets the intruders traced in it (jmh: JMH's iterations)")  # fmt: skip
    parser.add_argument("--metric-of", metavar="HOW", default="median",
                        help="the run's value from its samples: median (default), mean or last")  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD [ARGS...]",
                        help="the workload: its process tree is not an intruder")  # fmt: skip
    common.add_wait(parser)
    common.add_db(parser)
    common.add_tags(parser)


def plan_metrics(args: argparse.Namespace, argv: list[str]) -> tuple[tuple[Metric, ...], str]:
    found = tuple(parse_metric(m) for m in args.metric or ())
    of = parse_metric_of(args.metric_of)
    if found and not argv:
        raise UsageError("--metric goes with a command (-- CMD): it is read from the command's output")
    return found, of


def plan(args: argparse.Namespace) -> tuple[frozenset[int], float | None, list[str], float | None, int]:
    cpus = cpus_option(args.cpus, usable_cpus(online_cpus(common.live_root())), what=USABLE)
    argv = list(args.command)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if bool(argv) == (args.duration is not None):
        raise UsageError("intruders needs exactly one of --duration S or -- CMD [ARGS...]")
    duration = duration_option(args.duration, lo=0.01, hi=3600) if args.duration is not None else None
    if argv:
        check_argv(argv, "command")
    elif args.no_pin:
        raise UsageError("--no-pin goes with a command (-- CMD)")
    above = positive_float(args.explain_above, "--explain-above", 1, 1e7) * 1e3 if args.explain_above else None
    buffer_kb = int_in_range(args.buffer_kb, "--buffer-kb", 4, 1 << 20)
    ok, why = tracer.usable()
    if not ok and above is not None:
        raise CommandError(f"--explain-above needs the tracer: {why}", exit_code=3)
    return cpus, duration, argv, above, buffer_kb


def run(args: argparse.Namespace) -> int:
    cpus, duration, argv, above, buffer_kb = plan(args)
    metrics_, metric_of = plan_metrics(args, argv)
    path, chosen = common.db_path(args)
    with (
        common.node_lock(args, cpus),
        Session(NAME, path, chosen, common.tags(args), common.live_root()) as session,
    ):
        started = sessions.now_iso()
        output = metric.Reader(metrics_, on_mark=lambda: steal_ticks(cpus)) if metrics_ else None
        watched, status = watch(cpus, duration, argv, not args.no_pin, above, buffer_kb, output,
                                echo=2 if args.json else 1)  # fmt: skip
        if output is not None:
            watched["metric"] = _figures(metrics_, output, metric_of, watched.pop("slots", []))
        what = _short(shlex.join(argv)) if argv else "nothing (no workload)"
        analysis = watched | {"cpus_text": format_cpulist(cpus), "workload_text": what}
        params = {"cpus": sorted(cpus), "duration_s": duration, "argv": argv, "pinned": bool(argv) and not args.no_pin}
        envelope = {"format": "quietcore-intruders", "command": "intruders", "start": started,
                    "end": sessions.now_iso(), "result": {"exit_status": status, **params}}  # fmt: skip
        run_ = session.add(recorded(NAME, params, started, envelope, analysis))
    if args.json:
        print(json.dumps({"session": session.id, "exit_status": status, **analysis}, indent=2))
    else:
        out = text.console()
        kind_of(run_).terminal(out, run_)
        warning = text.virt_warning(session.facts)
        if warning:
            out.print(warning + " The host's own preemptions are not in a guest's trace.")
        out.print(f"Saved as session {session.id} in {session.db_path}. Next: `quietcore report {session.id}`.")
    if status:
        text.console(stderr=True).print(f"warning: {argv[0]} exited with {status}")
        return 1
    missing = (analysis.get("metric") or {}).get("error")
    if missing:
        text.console(stderr=True).print(plain(f"error: {missing}"))
        return 1
    return 0


def _figures(metrics_: tuple[Metric, ...], output: metric.Reader, of: str, slots: list[dict[str, Any]]) -> dict[
        str, Any]:  # fmt: skip
    """The command's figures of merit: each metric's value and samples, the verdict's samples each with the
    intruders, the workload's threads and the host's steal in its interval, and why its iterations differ."""
    first = metrics_[0]
    if not output.samples[first.name]:
        return {"error": metric.never_matched(first, output.tail, output.errors)}
    found = metric.run_json(metrics_, output, of)
    found.pop("intervals_ns")
    for row, slot in zip(found["samples"][first.name], slots, strict=False):
        row.update(slot)
    unit = output.samples[first.name][0].unit
    head = {"name": first.name, "unit": unit or first.name, "better": metric.direction(first, unit)}
    figures = found | {"verdict": head | {"value": found["metrics"][first.name]["value"], "of": of}}
    explained = explain_iterations("the command", [found], head)
    if explained:
        figures["iterations"] = explained
    return figures


def _short(command: str, width: int = 60) -> str:
    flat = " ".join(command.split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def watch(
    cpus: frozenset[int],
    duration: float | None,
    argv: list[str],
    pin: bool,
    above: float | None = None,
    buffer_kb: int = BUFFER_KB,
    output: metric.Reader | None = None,
    echo: int = 1,
) -> tuple[dict[str, Any], int]:
    """Trace every CPU while the workload runs (or for `duration`), then
    account for the watched CPUs. quietcore itself moves off them first, so
    that it is not one of the intruders it names. `output`: the command's
    output is read into it as it comes (--metric), and written on to `echo`;
    each of its samples' intervals is accounted too (the result's "slots")."""
    if not tracer.usable()[0]:
        return _sampled(cpus, duration, argv, pin, output, echo)
    moved = step_aside(cpus)
    status, root = 0, None
    try:
        stacks = intruders.stack_triggers(cpus) if above is not None else {}
        with tracer.TraceSession(None, intruders.EVENTS, buffer_kb, stacks) as trace:
            with tracer.Stream(trace, cpus) as stream:  # its text spans its clock marks
                if argv:
                    status, root = _run(argv, cpus if pin else None, output, echo)
                else:
                    assert duration is not None
                    time.sleep(duration)
            # After the run, a bar on a terminal: telling and accounting every CPU's events takes about 8 µs an
            # event on one CPU, a minute or more for 30 s of a 384-CPU node's (docs/many-cpus.md)
            with progress_bar(1.0, enabled=echo == 1) as update:
                raw = stream.text(lambda done: update("telling the trace", TOLD * done))
                reader, cost = stream.tid, stream.cost()
                by_cpu, clock, missing = stream.lost_by_cpu, trace.clock, trace.errors
                lost = sum(by_cpu.values())
                lines = raw.splitlines()
                update("accounting the trace", TOLD)
                try:
                    to_ns, window = tracer.marked_clock(raw, clock)
                except ValueError as exc:
                    # the buffers overwrite their oldest events when full: with events lost, give them more room
                    fix = f"{lost:,} events were lost: give --buffer-kb more" if lost else "trace fewer seconds"
                    raise CommandError(f"intruders: {exc} ({fix})") from None
                workload = () if root is None else (root,)
                intervals = ([(float(x.start_ns), float(x.at_ns)) for x in output.samples[output.metrics[0].name]]
                             if output else [])  # fmt: skip
                found = intruders.account(_counted(lines, lambda done: update("accounting the trace",
                                                                              TOLD + (1 - TOLD) * done)),
                                          cpus, to_ns, workload, window, own_threads() | {reader},
                                          episodes=above is not None, intervals=intervals)  # fmt: skip
    finally:
        step_back(moved)
    found.name_devices(irq_owners(common.live_root()))
    data = found.to_json()
    for cpu in data["cpus"]:
        for source, use in zip(cpu["sources"], found.cpus[cpu["cpu"]].ranked(), strict=True):
            source["fix"] = remedy.remedy(use).line(format_cpulist(cpus))
    if above is not None:
        data["explained"] = explain.explain_gaps(explain.intrusion_gaps(found), found, above, origin_ns=window[0])
    return data | {"lost_events": lost, "lost_by_cpu": {str(c): n for c, n in by_cpu.items()}, "clock": clock,
                   "missing_events": missing, "reader": cost, "slots": slots_json(found.slots)}, status  # fmt: skip


def _sampled(cpus: frozenset[int], duration: float | None, argv: list[str], pin: bool,
             output: metric.Reader | None = None, echo: int = 1) -> tuple[dict[str, Any], int]:  # fmt: skip
    """Without the tracer: every task's CPU time and last CPU, sampled (a
    sample's interval is not accounted: its samples carry the steal alone)."""
    moved = step_aside(cpus)
    try:
        proc, pumping = _start(argv, cpus if pin else None, output, echo) if argv else (None, None)
        end = time.monotonic() + (duration or 0.0)
        sampler = sampled.Sampler(cpus, proc.pid if proc else None, own_threads())
        try:
            found = sampler.run(lambda: proc.poll() is not None if proc else time.monotonic() >= end,
                                time.monotonic, time.sleep)  # fmt: skip
        except KeyboardInterrupt:
            if proc is not None:
                end_group(proc)
            raise
    finally:
        step_back(moved)
    data = found.to_json()
    for cpu in data["cpus"]:
        for source, use in zip(cpu["sources"], found.cpus[cpu["cpu"]].ranked(), strict=True):
            source["fix"] = remedy.remedy(use).line(format_cpulist(cpus))
    if proc is not None:
        _finish(proc, pumping)
    status = _status(proc.returncode) if proc is not None else 0
    return data | {"mode": "sampled", "misses": sampled.MISSES, "lost_events": 0}, status


def _start(argv: list[str], cpus: frozenset[int] | None, output: metric.Reader | None = None,
           echo: int = 1) -> tuple[subprocess.Popen[bytes], threading.Thread | None]:  # fmt: skip
    """The command, and the thread that reads its output into `output` (and writes it on to `echo`) when
    given; _finish joins it."""

    def setup() -> None:
        if cpus:
            os.sched_setaffinity(0, cpus)

    out, err = (subprocess.PIPE, subprocess.STDOUT) if output is not None else (None, None)
    try:
        if output is not None:
            output.begin()
        proc: subprocess.Popen[bytes] = subprocess.Popen(argv, preexec_fn=setup, process_group=0, stdout=out,
                                                         stderr=err)  # fmt: skip
    except OSError as exc:
        raise CommandError(f"cannot start {argv[0]!r}: {exc}", exit_code=3) from exc
    if output is None:
        return proc, None
    assert proc.stdout is not None
    pumping = threading.Thread(target=metric.pump, args=(proc.stdout.fileno(), output, echo), daemon=True)
    pumping.start()
    return proc, pumping


def _finish(proc: subprocess.Popen[bytes], pumping: threading.Thread | None) -> None:
    """The output read to its end (a grandchild holding the pipe gets a grace), and the pipe closed."""
    if pumping is not None:
        pumping.join(timeout=1.0)
    if proc.stdout is not None:
        proc.stdout.close()


#: The share of the bar after a run that telling takes (4.1 µs a line against the account's 3.5).
TOLD = 0.55


def _counted(lines: list[str], progress: Callable[[float], None],
             every: int = telling.PROGRESS_EVERY) -> Iterator[str]:  # fmt: skip
    """The lines, calling progress(share done) every `every` of them (as telling does its records)."""
    for k, line in enumerate(lines):
        if k % every == 0:
            progress(k / len(lines))
        yield line


def _status(code: int) -> int:
    """A command's exit status as a shell gives it: 128 + N for signal N."""
    return 128 - code if code < 0 and -code in signal.valid_signals() else code


def _run(argv: list[str], cpus: frozenset[int] | None, output: metric.Reader | None = None,
         echo: int = 1) -> tuple[int, int]:  # fmt: skip
    """The command in its own process group (Ctrl-C ends all it started);
    returns its exit status and pid."""
    proc, pumping = _start(argv, cpus, output, echo)
    try:
        proc.wait()
    except KeyboardInterrupt:
        end_group(proc)
        raise
    finally:
        _finish(proc, pumping)
    return _status(proc.returncode), proc.pid
