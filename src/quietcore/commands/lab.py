"""Survey this node: fingerprint it, measure noise on every online CPU, store and show it.

Runs a counter calibration and then a noise scan of every online CPU, in two
rounds (half of the CPUs each; a round per thread of a core where cores have
more) so the other half keeps the housekeeping work and quietcore's own
process off the CPUs being measured, with never two SMT siblings measured at
once and a CPU free on every NUMA node. About 24 s on a
2-CPU machine; --quick takes about 5 s.

example: quietcore lab --quick
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from quietcore.attribution import busy
from quietcore.commands import common, report
from quietcore.commands.audit import record_audit
from quietcore.facts.cpulist import cpus_phrase, format_cpulist
from quietcore.facts.cpus import online_cpus
from quietcore.facts.memory import available_bytes
from quietcore.facts.topology import Topology, places, read_topology
from quietcore.facts.virt import CPUID_VENDORS
from quietcore.fleet.baseline import cpu_noise
from quietcore.options import duration_option
from quietcore.probes.noise import NoiseOptions, event_cap
from quietcore.report import account, changes, sources, summary, text
from quietcore.report.account import Account
from quietcore.report.progress import progress_bar
from quietcore.runs.analysis import CpuAnalysis
from quietcore.runs.model import Run
from quietcore.session import Session
from quietcore.store import db, sessions

NAME = "lab"
ROUND_S = 10.0
QUICK_ROUND_S = 2.0
#: Periodic sources the lab says a CPU (the strongest; `results show` gives each).
LAB_SOURCES = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_ROUND_S:g} s per round instead of {ROUND_S:g} s")
    parser.add_argument("--duration", metavar="S", help="seconds per round (0.1-3600), overrides --quick")
    parser.add_argument("--report", metavar="DIR", help="where to write the report (default: reports/session-N "
                        "beside the database; replaced if it exists)")  # fmt: skip
    common.add_prometheus(parser)
    common.add_wait(parser)
    common.add_db(parser)
    common.add_tags(parser)


def rounds(cpus: frozenset[int], topology: Topology | None = None) -> list[frozenset[int]]:
    """Every CPU once, in as few rounds as keep, in each: no two SMT siblings of a
    core (a spinning sibling takes the core's time, and a figure would be the
    sibling's), and a CPU free on every NUMA node of more than one (its
    housekeeping, and quietcore's own process). The i-th thread of each core goes
    to round i (as many rounds as a core has threads, two at least); a core of one
    thread alternates with the others of its NUMA node. A 1-CPU node has one round."""
    ordered = sorted(cpus)
    if len(ordered) < 2:
        return [frozenset(ordered)]
    cores: dict[object, list[int]] = {}
    for cpu in ordered:
        key = topology.core_of.get(cpu, ("cpu", cpu)) if topology is not None else ("cpu", cpu)
        cores.setdefault(key, []).append(cpu)
    count = max(2, max(len(threads) for threads in cores.values()))
    out: list[set[int]] = [set() for _ in range(count)]
    alone: dict[int | None, int] = {}  # per NUMA node, the one-thread cores placed so far
    for threads in cores.values():
        if len(threads) > 1:
            for i, cpu in enumerate(threads):
                out[i].add(cpu)
            continue
        node = topology.node_of(threads[0]) if topology is not None else None
        out[alone.get(node, 0) % count].add(threads[0])
        alone[node] = alone.get(node, 0) + 1
    return [frozenset(r) for r in out if r]


def run(args: argparse.Namespace) -> int:
    per_round = QUICK_ROUND_S if args.quick else ROUND_S
    if args.duration is not None:
        per_round = duration_option(args.duration, lo=0.1, hi=3600)
    metrics = common.prometheus_dir(args)
    root = common.live_root()
    topology = read_topology(root)
    plan = rounds(online_cpus(root), topology)
    trial_ms = 50 if args.quick else 100
    calib_s = 5 * trial_ms / 1000
    path, chosen = common.db_path(args)
    report.check_out(Path(args.report) if args.report else None, path, "--report")  # before an hour is measured
    cap, basis = event_cap(max(len(c) for c in plan), available_bytes(root), per_round)
    with (
        common.node_lock(args, online_cpus(root)),
        Session("lab", path, chosen, common.tags(args), root) as session,
        progress_bar(calib_s + per_round * len(plan)) as update,
    ):
        update("calibrating the counter", 0)
        calibration = session.add(session.node.calibrate(trials=5, trial_ms=trial_ms)).result
        rows: list[dict[str, Any]] = []
        analyses: list[CpuAnalysis] = []
        accounts: dict[int, Account] = {}
        measured_runs: list[Run] = []
        for i, cpus in enumerate(plan):
            # in brief: a round of every other CPU of 384 was a progress line of 734 characters
            label = f"noise, round {i + 1}/{len(plan)}: {cpus_phrase(cpus)}"
            measured = session.add(
                session.node.noise(
                    NoiseOptions(cpus, per_round, max_events=cap, max_events_basis=basis),
                    _ticker(update, label, calib_s + i * per_round),
                )
            )
            measured_runs.append(measured)
            rows += measured.summary
            analyses += measured.noise.cpus
            accounts.update(account.of_run(measured))
        findings = record_audit(session, root)
    if metrics is not None:
        every = [c for run in measured_runs for c in cpu_noise(run, keep_gaps=True)]
        text.console().print(common.publish(metrics, "lab", session.facts, session.fingerprint, every))
    show(session, calibration, sorted(rows, key=lambda r: int(r["cpu"])), sorted(analyses, key=lambda a: a.cpu),
         accounts, findings, places(topology, online_cpus(root)),
         [line for r in measured_runs for line in busy.lines(r.analysis)])  # fmt: skip
    conn = db.open_db(path, create=False, chosen=chosen)
    try:
        record = sessions.get_session(conn, session.id)
        out = Path(args.report) if args.report else None
        written = report.write_report(conn, [record], out, ("html", "md"), True, path, "--report")
    finally:
        conn.close()
    text.console().print(f"Report: {written[0]}")
    text.console().print(f"The same in Markdown: {written[1]}")
    return 0


def _ticker(update: Callable[[str, float], None], label: str, offset: float) -> Callable[[float], None]:
    return lambda elapsed: update(label, offset + elapsed)


def show(
    session: Session, calibration: dict[str, Any], rows: list[dict[str, Any]], analyses: list[CpuAnalysis],
    accounts: dict[int, Account], findings: list[dict[str, Any]], where: dict[str, dict[str, int]] | None = None,
    busy_lines: list[str] | None = None,
) -> None:  # fmt: skip
    out = text.console()
    notes = [*text.noise_notes(rows), *(busy_lines or ())]
    cpu, kernel = session.facts["cpu"], session.facts["kernel"]
    out.print(f"Node: {cpu['model']}, {cpu['count']} CPUs online ({cpu['online']}), kernel {kernel['release']}.")
    out.print(f"Fingerprint: {session.fingerprint}.")
    out.print(text.calibrate_line(calibration))
    if len(analyses) > summary.DETAIL_UP_TO:  # many CPUs in a screen, as `results show` says them
        detail = f"`quietcore results show {session.id} --cpu {{cpu}}`"
        for item in summary.screen(rows, analyses, accounts, session.facts, notes, detail, with_accounts=False,
                                   where=where).items:  # fmt: skip
            out.print(item)
    else:
        out.print(text.noise_table(rows, title="OS noise per CPU"))
        for note in notes:
            out.print(note)
        out.print(sources.table(analyses, accounts, LAB_SOURCES))
        for note in sources.notes(sources.shown(analyses, LAB_SOURCES)):
            out.print(note)
        for cpu in analyses:  # what no trace or counter explains
            mine = accounts.get(cpu.cpu)
            if mine is not None:
                out.print(text.account_words(cpu, mine, session.virtualized, LAB_SOURCES))
    measured = cpus_phrase(frozenset(int(r["cpu"]) for r in rows))
    # the audit's findings, ranked by the time each cost
    for line in changes.lines(accounts.values(), findings, session.virtualized, measured, session.id):
        out.print(line)
    vendor = calibration.get("hypervisor", {}).get("vendor")
    warning = text.virt_warning(session.facts, CPUID_VENDORS.get(vendor) if vendor else None)
    if warning:
        out.print(warning)
    out.print(
        f"Saved as session {session.id} in {session.db_path}. "
        f"Next: `quietcore results show {session.id}`, or a longer look with "
        f"`quietcore noise --cpus {format_cpulist(frozenset(int(r['cpu']) for r in rows))} --duration 60`."
    )
