"""Check this node's noise against its reference: PASS or FAIL, for a health check.

Measures every CPU for --duration seconds (0.5 by default; the whole
check takes under a second here) and compares each with the reference kept
for this configuration (`quietcore reference set`): the lost ratio of each
100 ms window, but for its longest gap, by a one-sided Mann-Whitney U test,
Holm over the CPUs. A CPU fails when p < 0.001 and the windows' shift over
the reference's is more than --tolerance of its time, or when a periodic
source the reference lacks costs more than that; a failure is measured once
more, and a CPU fails only if it failed both times (unless --once). Fixed
limits fail on their own. Facts of the configuration that
changed since the reference are named. Prints one line and stores a small
session.

exit codes: 0 PASS, 1 FAIL, 2 bad usage, 3 UNKNOWN (could not measure or
judge: the CPUs in use by another quietcore, no reference and no limit)

example: quietcore check --slurm-drain --prometheus /var/lib/prometheus/node-exporter
"""

from __future__ import annotations

import argparse
import json
import socket
from typing import Any

from quietcore.attribution import busy
from quietcore.commands import common
from quietcore.commands.audit import record_audit
from quietcore.errors import CommandError, UsageError
from quietcore.facts.cpulist import cpus_phrase, format_cpulist
from quietcore.facts.cpus import online_cpus
from quietcore.facts.root import Root
from quietcore.fleet import slurm
from quietcore.fleet.baseline import cpu_noise
from quietcore.fleet.verdict import HOST_NOISE, TOLERANCE, Limits, Verdict, confirm, drift, judge, to_json
from quietcore.options import USABLE, cpus_option, duration_option, positive_float, usable_cpus
from quietcore.probes.noise import NoiseOptions
from quietcore.report import text
from quietcore.runs.analysis import SLICES
from quietcore.runs.model import Run
from quietcore.runs.reference import Reference
from quietcore.safe import plain
from quietcore.session import Session
from quietcore.store import references

NAME = "check"
UNKNOWN = 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cpus", metavar="LIST", help="CPUs to check (default: the reference's, else every one)")
    parser.add_argument("--duration", metavar="S", default="0.5", help="seconds to measure (0.2-60, default 0.5)")
    parser.add_argument("--reference", metavar="auto|NAME", default="auto",
                        help="compare with this reference (auto: the one for this configuration)")  # fmt: skip
    parser.add_argument("--tolerance", metavar="X", default=str(TOLERANCE),
                        help=f"lost ratio over the reference's failing a CPU (0-1, default {TOLERANCE:g})")  # fmt: skip
    parser.add_argument("--max-lost-ratio", metavar="X", help="fail a CPU that loses more than X of its time (0-1)")
    parser.add_argument("--max-gap-us", metavar="N", help="fail a CPU with a gap over N µs")
    parser.add_argument("--max-events-per-s", metavar="N", help="fail a CPU with more than N gaps a second")
    parser.add_argument("--host-noise", default="report", metavar="report|fail",
                        help="on a VM, noise the guest's counters do not account for (the host's): report it "
                             "(default) or fail on it")  # fmt: skip
    parser.add_argument("--audit", action="store_true", help="also audit the node: a failing finding fails the check")
    parser.add_argument("--once", action="store_true",
                        help="fail on one measurement (by default a failure is measured again to confirm)")  # fmt: skip
    parser.add_argument("--slurm-drain", action="store_true",
                        help="drain this node in Slurm on FAIL; resume it on PASS if quietcore drained it")  # fmt: skip
    parser.add_argument(
        "--slurm-node", metavar="NAME", help="this node's Slurm NodeName (default: $SLURMD_NODENAME, else the host)"
    )
    common.add_prometheus(parser)
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON")
    common.add_wait(parser)
    common.add_db(parser)
    common.add_tags(parser)


def _limits(args: argparse.Namespace) -> Limits:
    def opt(value: str | None, name: str, lo: float, hi: float, scale: float = 1.0) -> float | None:
        return None if value is None else positive_float(value, name, lo, hi) * scale

    if args.host_noise not in HOST_NOISE:
        raise UsageError(f"invalid --host-noise {args.host_noise!r} (valid: {', '.join(HOST_NOISE)})")
    return Limits(
        host_noise=args.host_noise,
        tolerance=positive_float(args.tolerance, "--tolerance", 0, 1),
        max_lost_ratio=opt(args.max_lost_ratio, "--max-lost-ratio", 0, 1),
        max_gap_s=opt(args.max_gap_us, "--max-gap-us", 1, 1e8, 1e-6),
        max_events_per_s=opt(args.max_events_per_s, "--max-events-per-s", 0, 1e9),
    )


def _reference(session: Session, wanted: str) -> Reference | None:
    """--reference auto|NAME, from the session's own database."""
    host = socket.gethostname()
    if wanted == "auto":
        return references.for_node(session.conn, session.fingerprint, host)
    return references.named(session.conn, wanted, host)


def run(args: argparse.Namespace) -> int:
    limits = _limits(args)
    duration = duration_option(args.duration, lo=0.2, hi=60)
    metrics = common.prometheus_dir(args)
    binary = slurm.scontrol() if args.slurm_drain else ""
    node = slurm.node_name(args.slurm_node) if args.slurm_drain else ""
    root = common.live_root()
    online = online_cpus(root)
    usable = usable_cpus(online)
    path, chosen = common.db_path(args)
    try:
        with Session("check", path, chosen, common.tags(args), root) as session:
            reference = _reference(session, args.reference)
            if args.cpus is not None:
                cpus = cpus_option(args.cpus, usable, what=USABLE)
            else:
                cpus = frozenset(reference.cpus) & usable if reference is not None else usable
                cpus = cpus or usable
            if reference is None and limits == Limits(tolerance=limits.tolerance, host_noise=limits.host_noise):
                # the CPUs asked for, and a measurement long enough: a reference needs 5 s a CPU (baseline)
                raise CommandError("no reference for this configuration, and no fixed limit. Measure one with "
                                   f"`quietcore noise --cpus {format_cpulist(cpus)} --duration 30`, keep it with "
                                   "`quietcore reference set SESSION`, or give --max-lost-ratio.",
                                   UNKNOWN)  # fmt: skip
            changed = _drift(reference, session.facts, session.fingerprint)
            with common.node_lock(args, cpus):
                measured = _not_busy(session.add(session.node.noise(NoiseOptions(cpus, duration), trace="off")))
                seen = cpu_noise(measured, keep_gaps=True)
                verdict = judge(seen, reference, limits, changed, session.virtualized)
                if not verdict.passed and not args.once:  # confirmed or cleared by a second measurement
                    measured = _not_busy(session.add(session.node.noise(NoiseOptions(cpus, duration), trace="off")))
                    seen = cpu_noise(measured, keep_gaps=True)
                    verdict = confirm(verdict, judge(seen, reference, limits, changed, session.virtualized))
            findings = _audit(session, root) if args.audit else []
            for f in findings:
                verdict.fail_node(f"audit {f['id']}: {f['summary']}")
            result = to_json(verdict)
            session.record(
                "check",
                {
                    "cpus": format_cpulist(cpus),
                    "duration_s": duration,
                    "limits": limits.__dict__,
                    "reference": args.reference,
                },
                measured.started,
                {"result": result},
                result,
            )
            session_id, facts, fingerprint = session.id, session.facts, session.fingerprint
    except CommandError as exc:
        if exc.exit_code != UNKNOWN:
            raise
        _say_unknown(str(exc), args.json)
        return UNKNOWN
    said = []
    if metrics is not None:
        said.append(common.publish(metrics, "check", facts, fingerprint, seen, verdict))
    if args.slurm_drain:
        try:
            action = slurm.act(binary, node, verdict.passed, verdict.line())
        except CommandError as exc:
            action = f"Slurm: {exc}"
        if action:
            said.append(action)
    if args.json:
        print(json.dumps({"session": session_id, **result, "actions": said}, indent=2))
    else:
        text.console().print(verdict.headline())
        _details(verdict, said, session_id)
    return 0 if verdict.passed else 1


def _drift(reference: Reference | None, facts: dict[str, Any], fingerprint: str) -> list[str]:
    """The facts that changed since the reference, when its configuration was another."""
    if reference is None or reference.fingerprint == fingerprint:
        return []
    if not reference.facts:  # a survey's other nodes: only their fingerprint was kept
        return [f"fingerprint {reference.fingerprint} -> {fingerprint}"]
    return drift(reference.facts, facts) or [f"fingerprint {reference.fingerprint} -> {fingerprint}"]


def _not_busy(measured: Run) -> Run:
    """The run, unless a measured CPU was busy with a task (attribution.busy): a job's
    task is not the node's noise, so no verdict, and with --slurm-drain no drain."""
    if measured.analysis.get("busy"):
        raise CommandError("; ".join(busy.lines(measured.analysis, why=False)), UNKNOWN)
    if cpus := busy.sliced(measured.analysis):
        raise CommandError(f"{cpus_phrase(cpus)} busy: {SLICES}, the probe preempted as often. A task is work, not "
                           "noise.", UNKNOWN)  # fmt: skip
    return measured


def _audit(session: Session, root: Root) -> list[dict[str, Any]]:
    """The audit's failing findings (recorded with the session, as lab records its audit)."""
    return [f for f in record_audit(session, root) if f.get("status") == "fail"]


def _details(verdict: Verdict, said: list[str], session_id: int) -> None:
    """Below the line: what was seen but does not fail, the actions, where it is stored."""
    out = text.console()
    told, _ = verdict.told()
    failed = [(c.cpu, f"{reason}.") for c in told for reason in c.reasons]
    noted = [(c.cpu, f"{note}.") for c in verdict.cpus for note in c.notes]
    for why in verdict.below():
        out.print(f"  {why}")
    for cpus, said_of in _alike([*failed, *noted]):  # the same words of many CPUs (a host-noise rise), once
        out.print(f"  {cpus_phrase(cpus)}: {said_of}")
    if verdict.reference is not None:
        r = verdict.reference
        fingerprint = f", fingerprint {r.fingerprint}" if r.name != r.fingerprint else ""
        out.print(f"  Reference: {plain(r.name)}, session {r.session_id}, host {plain(r.host)}{fingerprint}.")
    for line in said:
        out.print(f"  {line}")
    out.print(f"  Stored as session {session_id}.")


def _alike(said: list[tuple[int, str]]) -> list[tuple[frozenset[int], str]]:
    """Each thing said, once, with the CPUs it is said of, in the order first said."""
    cpus: dict[str, set[int]] = {}
    for cpu, words in said:
        cpus.setdefault(words, set()).add(cpu)
    return [(frozenset(c), words) for words, c in cpus.items()]


def _say_unknown(why: str, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"verdict": "unknown", "line": f"UNKNOWN {why}"}, indent=2))
    else:
        text.console().print(f"UNKNOWN {why}")
