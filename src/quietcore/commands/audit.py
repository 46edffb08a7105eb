"""Audit the node's whole noise surface and say how to fix each finding.

Every check reads through --root (default /), so a snapshot from another
node audits the same way. Findings are grouped by status (fail, warn, ok,
info, unknown); each gives its evidence (the value and the file it came
from) and its advice (the exact command, sysfs write or boot parameter),
with what that needs (root, reboot, hardware).

example: quietcore audit --cpus 1
"""

from __future__ import annotations

import argparse
import json
import socket
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from quietcore.audit import run_checks
from quietcore.audit.context import AuditContext
from quietcore.audit.finding import ORDER, Status
from quietcore.commands import common
from quietcore.facts.cpulist import cpus_phrase
from quietcore.facts.cpus import online_cpus
from quietcore.facts.root import Root
from quietcore.facts.snapshot import open_root
from quietcore.options import cpus_option
from quietcore.report import account, changes
from quietcore.report.text import console
from quietcore.session import Session
from quietcore.store import db, sessions

if TYPE_CHECKING:
    from quietcore.audit.finding import Finding

NAME = "audit"
# By status value: the audit itself is imported only when it runs (start-up).
STYLE = {"fail": "bold red", "warn": "yellow", "ok": "green", "info": "cyan", "unknown": "dim"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cpus", metavar="LIST", help="the target CPUs for compute work (default: the isolated ones)")
    parser.add_argument("--root", metavar="DIR", default="/", help="read facts from DIR or a snapshot .tar.gz")
    parser.add_argument("--json", action="store_true", help="print the findings as a JSON list")
    parser.add_argument("--strict", action="store_true", help="exit 2 when any finding is fail")
    parser.add_argument("--session", metavar="ID",
                        help="order the findings by the time each cost in this stored session: an ID, last or "
                             "KEY=VALUE (default, auditing this node: its last lab, if any)")  # fmt: skip
    common.add_db(parser)


def run(args: argparse.Namespace) -> int:
    with open_root(args.root) as root:
        targets = cpus_option(args.cpus, online_cpus(root)) if args.cpus is not None else None
        journal, source = common.journal_of(root)
        findings = run_checks(AuditContext(root, targets, journal, source))
    costs, session, shares = _costs(args)
    if args.json:
        print(json.dumps([f.to_json() | ({"lost_share": costs[f.id], "session": session} if f.id in costs else {})
                          for f in _ordered(findings, costs)], indent=1))  # fmt: skip
    else:
        show(_ordered(findings, costs), costs, session, shares)
    failed = any(f.status is Status.FAIL for f in findings)
    return 2 if args.strict and failed else 0


def _costs(args: argparse.Namespace) -> tuple[dict[str, float], int | None, str | None]:
    """What each finding's fix would remove, as a share of the lost time of a
    stored session (report.changes: its CPUs' accounts), that session (the one
    --session names, else, auditing this node, its last lab) and its shares'
    line (changes.Shares). None where there is none."""
    path, chosen = common.db_path(args)
    if args.session is None and (args.root != "/" or not path.exists()):
        return {}, None, None
    conn = db.open_db(path, create=False, chosen=chosen, write=False)
    try:
        if args.session is not None:
            row = sessions.find_session(conn, args.session)
        else:
            here = socket.gethostname()
            labs = [r for r in sessions.list_sessions(conn) if r.command == "lab" and r.host == here]
            if not labs:
                return {}, None, None
            row = labs[-1]
        accounts = [a for r in sessions.runs_of(conn, row.id) if r.kind == "noise" for a in account.of_run(r).values()]
    finally:
        conn.close()
    ranked, _, _ = changes.rank(accounts, [], limit=len(changes.FINDINGS))
    virtual = bool((row.facts.get("virtualization") or {}).get("virtualized"))
    line = changes.shares(accounts, virtual).line(cpus_phrase(frozenset(a.cpu for a in accounts)), row.id)
    return {c.finding: c.share for c in ranked}, row.id, line


def _ordered(findings: list[Finding], costs: dict[str, float]) -> list[Finding]:
    """By status, as always; within one, the costliest first (stable otherwise)."""
    return sorted(findings, key=lambda f: -costs.get(f.id, 0.0))


#: Evidence lines shown under a finding; --json has them all.
EVIDENCE_SHOWN = 8


def show(findings: list[Finding], costs: dict[str, float] | None = None, session: int | None = None,
         shares: str | None = None) -> None:  # fmt: skip
    # rich only once there is something to print: --help and --version stay fast.

    out = console()
    costs = costs or {}
    if session is not None:
        if shares:
            out.print(shares)
        out.print(f"Findings are ordered by what each cost in session {session}, costliest first; --session N "
                  "orders them by another.")  # fmt: skip
    for status in ORDER:
        group = [f for f in findings if f.status is status]
        if not group:
            continue
        out.print(f"[{STYLE[status.value]}]{status.value.upper()} ({len(group)})[/]", markup=True)
        for f in group:
            out.print(f"  [{STYLE[status.value]}]{f.id}[/]: {escape(f.summary)}", markup=True)
            if f.id in costs:
                out.print(f"      [bold]cost:[/] {costs[f.id]:.0%} of the time lost in session {session}", markup=True)
            for e in f.evidence[:EVIDENCE_SHOWN]:
                out.print(f"      [dim]{escape(e.source)}:[/] {escape(e.value)}", markup=True)
            if len(f.evidence) > EVIDENCE_SHOWN:  # a line a CPU at 384 CPUs (irq.affinity) is no screen
                out.print(f"      [dim]and {len(f.evidence) - EVIDENCE_SHOWN} more: --json has every one[/]",
                          markup=True)  # fmt: skip
            for advice in f.advice:
                out.print(f"      [bold]fix:[/] {escape(advice)}", markup=True)
            if f.advice and f.needs:
                out.print(f"      [bold]needs:[/] {', '.join(f.needs)}", markup=True)
    counts = ", ".join(f"{sum(f.status is s for f in findings)} {s.value}" for s in ORDER)
    out.print(f"{len(findings)} checks: {counts}.")


def record_audit(session: Session, root: Root) -> list[dict[str, Any]]:
    """The audit of the node as it was measured, stored in `session` for its report (lab,
    check); its findings. Here, and not in lab, so that check imports no report."""

    started = sessions.now_iso()
    journal, source = common.journal_of(root)

    findings = [f.to_json() for f in run_checks(AuditContext(root, None, journal, source))]
    session.record("audit", {}, started, {"format": "quietcore-audit", "command": "audit", "start": started,
                                          "end": sessions.now_iso(), "result": {"findings": findings}})  # fmt: skip
    return findings
