"""Measure OS noise per CPU and say where the lost time went.

One pinned thread per CPU reads the cycle counter in a tight loop (--mode
spin); every loop-to-loop gap goes into a nanosecond histogram and every gap
over the threshold is an event. Around the run quietcore reads the kernel's
counters (/proc/interrupts, /proc/softirqs, /proc/stat) and attributes the
lost time to sources, finds periodic sources (the tick, 1 s timers) in the
event times, and says what no counter explains (on a VM: the host).
--mode fwq times fixed quanta of work; --mode ftq counts the work done in
fixed quanta of time (LLNL's FWQ/FTQ). Results are stored in the database.

example: quietcore noise --cpus 1 --duration 10
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from quietcore import outputs
from quietcore.attribution.explain import LIMIT
from quietcore.commands import common
from quietcore.errors import UsageError
from quietcore.experiments.custom_exec import check_argv
from quietcore.facts.cpulist import format_cpulist
from quietcore.facts.cpus import online_cpus
from quietcore.facts.memory import available_bytes
from quietcore.fleet.baseline import cpu_noise
from quietcore.options import (
    USABLE,
    cpus_option,
    duration_option,
    int_in_range,
    positive_float,
    sched_option,
    usable_cpus,
)
from quietcore.probes.noise import MODES, NoiseOptions, event_cap
from quietcore.report import account, sources, text
from quietcore.report.kinds.noise import KIND as NOISE
from quietcore.report.progress import progress_bar
from quietcore.safe import write_atomic
from quietcore.sched import NAMES as POLICIES
from quietcore.session import Session
from quietcore.stats.percentiles import histogram_quantile

if TYPE_CHECKING:
    from quietcore.runs.model import Run
    from quietcore.session import Session

NAME = "noise"
ANALYSIS_SHARE = 0.05  # of the measured time: what the analysis takes (bench/cli.py measures it)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cpus", required=True, metavar="LIST", help="CPUs to measure, e.g. 1 or 0-3,8")
    parser.add_argument("--duration", required=True, metavar="S", help="seconds to measure (0.001-86400)")
    parser.add_argument("--mode", choices=MODES, default="spin", help="spin (default), fwq or ftq")
    parser.add_argument("--threshold-ns", metavar="N", help="a gap over N ns is an event (default: automatic)")
    parser.add_argument("--max-events", metavar="N", default="auto",
                        help="events kept per CPU (default auto: sized from the memory available)")  # fmt: skip
    parser.add_argument("--work", metavar="N", help="fwq: LCG steps per quantum (default 4000); ftq: per unit (16)")
    parser.add_argument("--quantum-us", metavar="N", help="ftq: quantum length in µs (default 100)")
    parser.add_argument("--policy", choices=POLICIES, default="other", help="scheduling policy of the spinners")
    parser.add_argument("--priority", metavar="N", default="0", help="1-99 with fifo or rr")
    parser.add_argument("--force", action="store_true", help="allow fifo/rr on every online CPU")
    parser.add_argument(
        "--trace", choices=("auto", "on", "off"), default="auto", help="match gaps to tracepoints (auto: if root)"
    )
    parser.add_argument("--explain-above", metavar="US",
                        help=f"trace every CPU (root) and explain each CPU's {LIMIT} longest gaps over US µs: what ran "
                             "in each, who sent it (50-100 µs to start: above the tick's gaps)")  # fmt: skip
    parser.add_argument("--stop-above", metavar="US",
                        help="stop at the first gap of US µs or more; explain it, keep its trace")  # fmt: skip
    parser.add_argument("--on-threshold", metavar="CMD",
                        help="with --stop-above: then run CMD (no shell), the gap in its environment")  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    common.add_detail(parser)
    common.add_prometheus(parser)
    common.add_wait(parser)
    common.add_db(parser)
    common.add_tags(parser)


def options_from(args: argparse.Namespace) -> NoiseOptions:
    online = online_cpus(common.live_root())
    cpus = cpus_option(args.cpus, usable_cpus(online), what=USABLE)
    priority = sched_option(args.policy, args.priority, cpus, online, args.force)
    duration = duration_option(args.duration)
    if args.max_events == "auto":
        cap, basis = event_cap(len(cpus), available_bytes(common.live_root()), duration)
    else:
        cap, basis = int_in_range(args.max_events, "--max-events", 0, 100_000_000), "--max-events"
    return NoiseOptions(
        cpus=cpus,
        duration=duration,
        threshold_ns=None if args.threshold_ns is None else positive_float(args.threshold_ns, "--threshold-ns", 1, 1e9),
        max_events=cap,
        max_events_basis=basis,
        mode=args.mode,
        policy=args.policy,
        priority=priority,
        force=args.force,
        work=None if args.work is None else int_in_range(args.work, "--work", 1, 100_000_000),
        quantum_us=None if args.quantum_us is None else int_in_range(args.quantum_us, "--quantum-us", 1, 1_000_000),
    )


def explain_option(args: argparse.Namespace, options: NoiseOptions) -> float | None:
    """--explain-above US (or --stop-above US), in ns; it needs the spinning
    probe and the tracer."""
    if args.on_threshold is not None:
        if args.stop_above is None:
            raise UsageError("--on-threshold goes with --stop-above US")
        check_argv(shlex.split(args.on_threshold), "--on-threshold")
    if args.explain_above is None and args.stop_above is None:
        return None
    option = "--explain-above" if args.explain_above is not None else "--stop-above"
    above = positive_float(args.explain_above or args.stop_above, option, 1, 1e7) * 1e3
    if options.mode != "spin":
        raise UsageError(f"{option} needs --mode spin (the tracer's gaps), not --mode {options.mode}")
    if args.trace == "off":
        raise UsageError(f"{option} needs the tracer: leave out --trace off")
    return above


def run(args: argparse.Namespace) -> int:
    options = options_from(args)
    shown, _ = common.detail(args)  # refused before anything is measured
    if shown is not None and shown not in options.cpus:
        raise UsageError(f"invalid --cpu {shown}: not measured (valid: {format_cpulist(options.cpus)})")
    above = explain_option(args, options)
    metrics = common.prometheus_dir(args)
    if metrics is not None and options.mode != "spin":
        raise UsageError(f"--prometheus needs --mode spin (its gaps), not --mode {options.mode}")
    if args.stop_above is not None:
        stop_ns = positive_float(args.stop_above, "--stop-above", 1, 1e7) * 1e3
        options = dataclasses.replace(options, stop_above_ns=stop_ns)
    path, chosen = common.db_path(args)
    if args.stop_above is not None:
        _traces(path)  # refused before anything is measured
    root = common.live_root()
    with (
        common.node_lock(args, options.cpus),
        Session("noise", path, chosen, common.tags(args), root) as session,
        progress_bar(options.duration * (1 + ANALYSIS_SHARE), enabled=not args.json) as update,
    ):
        done = [0]

        def analysing(what: str) -> None:
            # The analysis is the bar's last stretch, one step per CPU and one for the trace.
            done[0] += 1
            update(what, options.duration * (1 + ANALYSIS_SHARE * done[0] / (len(options.cpus) + 1)))

        run_ = session.add(
            session.node.noise(options, lambda t: update("measuring noise", t), args.trace, analysing, above)
        )
    kept = _keep(run_, session) if "stopped" in run_.analysis else None
    published = (common.publish(metrics, "noise", session.facts, session.fingerprint, cpu_noise(run_, keep_gaps=True))
                 if metrics else None)  # fmt: skip
    # Shown after the session is closed: a broken pipe cannot fail a stored run.
    if args.json:
        print(json.dumps(json_output(session, run_), indent=2))
    else:
        out = text.console()
        NOISE.view(out, run_, session.facts, *common.detail(args))
        warning = text.virt_warning(session.facts)
        if warning:
            out.print(warning)
        if published:
            out.print(published)
        out.print(f"Saved as session {session.id} in {session.db_path}. Next: `quietcore results show {session.id}`.")
    if args.stop_above is not None:
        return _stopped(run_, kept, args.on_threshold, session.id, args.json)
    return 0


def _traces(db_path: Path) -> Path:
    """traces/ beside the database, where --stop-above keeps the gap's trace."""
    return outputs.directory(db_path.parent / "traces", "--stop-above's trace directory",
                             hint="give --db a database in a directory only root can write")  # fmt: skip


def _keep(run: Run, session: Session) -> Path:
    """The trace around the gap that stopped the run, in a file beside the database."""
    path = _traces(session.db_path) / f"session-{session.id}-gap.txt"
    write_atomic(path, run.analysis["stopped"]["trace"])
    return path


def _stopped(run: Run, kept: Path | None, command: str | None, session_id: int, quiet: bool) -> int:
    """Say where it stopped; with --on-threshold, run the command with the gap in its environment."""
    stopped = run.analysis.get("stopped")
    say = (lambda line: print(line, file=sys.stderr)) if quiet else print
    if stopped is None or kept is None:
        say(f"No gap reached --stop-above {run.params['stop_above_ns'] / 1e3:g} µs: the run went its whole length.")
        return 0
    say(f"Stopped at a gap of {stopped['duration_ns'] / 1e3:.1f} µs on CPU {stopped['cpu']} at "
        f"{stopped['start_ns'] / 1e9:.6f} s; the trace around it: {kept}")  # fmt: skip
    if command is None:
        return 0
    env = {**os.environ, "QUIETCORE_GAP_CPU": str(stopped["cpu"]),
           "QUIETCORE_GAP_NS": f"{stopped['duration_ns']:.0f}", "QUIETCORE_GAP_AT_NS": f"{stopped['start_ns']:.0f}",
           "QUIETCORE_TRACE": str(kept), "QUIETCORE_SESSION": str(session_id)}  # fmt: skip
    done = subprocess.run(shlex.split(command), env=env, check=False)
    if done.returncode:
        say(f"warning: --on-threshold {shlex.split(command)[0]} exited with {done.returncode}")
    return 0


def json_output(session: Session, run: Run) -> dict[str, Any]:
    """Per CPU: the summary row, the probe's figures (its event list left
    out: `results export` has it), the loop-period percentiles and the
    analysis. `gaps` counts the gaps over the threshold; `events_recorded`
    how many of them the trace holds (the rest were over --max-events)."""

    result = run.result
    by_row = {r["cpu"]: r for r in run.summary}
    accounts = account.of_run(run)
    cpus = []
    for probe in result["cpus"]:
        cpu: dict[str, Any] = {**by_row.get(probe["cpu"], {}), **{k: v for k, v in probe.items() if k != "events"}}
        if run.trace is not None:
            buckets = probe["histogram"]["buckets"]
            cpu["events_recorded"] = run.trace.cpu(int(probe["cpu"])).events
            cpu["period_ns"] = {f"p{q * 100:g}": histogram_quantile(buckets, q) for q in (0.5, 0.99, 0.999)}
            stored = run.noise.of(int(probe["cpu"]))
            if stored is not None:
                cpu.update({k: v for k, v in dataclasses.asdict(stored).items() if k != "cpu"})
                # each source's few words beside what it is as data (report.sources.label)
                cpu["periodic"] = [{**dataclasses.asdict(p), "name": sources.label(p.named) if p.named else None}
                                   for p in stored.periodic]  # fmt: skip
            if int(probe["cpu"]) in accounts:  # where the time went, as its table says it
                cpu["account"] = account.to_json(accounts[int(probe["cpu"])])
        cpus.append(cpu)
    return {
        "session": session.id,
        "database": str(session.db_path),
        "fingerprint": session.fingerprint,
        "virtualization": session.facts["virtualization"],
        "mode": result.get("mode", "spin"),
        "counter": result["counter"],
        "threshold": result["threshold"],
        "max_events": {"per_cpu": run.params["max_events"], "basis": run.params.get("max_events_basis")},
        "interrupted": result["interrupted"],
        "tracer": run.analysis.get("tracer"),
        "explained": run.analysis.get("explained"),
        "busy": run.analysis.get("busy") or {},  # CPU -> the tasks that shared it (attribution.busy)
        "cpus": cpus,
    }
