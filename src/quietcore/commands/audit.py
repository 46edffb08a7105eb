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
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from quietcore.audit import run_checks
from quietcore.audit.context import AuditContext
from quietcore.audit.finding import ORDER, Status
from quietcore.commands import common
from quietcore.facts.cpus import online_cpus
from quietcore.facts.root import Root
from quietcore.facts.snapshot import open_root
from quietcore.options import cpus_option
from quietcore.report.text import console
from quietcore.session import Session
from quietcore.store import sessions

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
    common.add_db(parser)


def run(args: argparse.Namespace) -> int:
    with open_root(args.root) as root:
        targets = cpus_option(args.cpus, online_cpus(root)) if args.cpus is not None else None
        journal, source = common.journal_of(root)
        findings = run_checks(AuditContext(root, targets, journal, source))
    if args.json:
        print(json.dumps([f.to_json() for f in findings], indent=1))
    else:
        show(findings)
    failed = any(f.status is Status.FAIL for f in findings)
    return 2 if args.strict and failed else 0


def show(findings: list[Finding]) -> None:
    # rich only once there is something to print: --help and --version stay fast.

    out = console()
    for status in ORDER:
        group = [f for f in findings if f.status is status]
        if not group:
            continue
        out.print(f"[{STYLE[status.value]}]{status.value.upper()} ({len(group)})[/]", markup=True)
        for f in group:
            out.print(f"  [{STYLE[status.value]}]{f.id}[/]: {escape(f.summary)}", markup=True)
            for e in f.evidence:
                out.print(f"      [dim]{escape(e.source)}:[/] {escape(e.value)}", markup=True)
            for advice in f.advice:
                needs = f" [dim](needs {', '.join(f.needs)})[/]" if f.needs else ""
                out.print(f"      [bold]fix:[/] {escape(advice)}{needs}", markup=True)
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
