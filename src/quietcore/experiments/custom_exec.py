"""A user's command as a workload, measured from outside: wall time around
the process, its rusage from wait4(2), and the interrupts its CPUs took
(from /proc/interrupts; with the command pinned, those are the interrupts
that could have landed on it). Run without a shell: argv is split with
shlex, so pipes need an explicit `sh -c`."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from quietcore.errors import CommandError, UsageError
from quietcore.experiments.model import Cell
from quietcore.facts.interrupts import parse_interrupts
from quietcore.sched import POLICIES
from quietcore.session import Session
from quietcore.store import sessions


def check_argv(argv: list[str], option: str) -> None:
    if not argv:
        raise UsageError(f"invalid {option}: empty command")
    if shutil.which(argv[0]) is None:
        raise UsageError(f"invalid {option}: command not found: {argv[0]!r}")


def _irq_totals(cpus: frozenset[int]) -> dict[int, int]:
    try:
        columns, rows = parse_interrupts(Path("/proc/interrupts").read_text())
    except OSError:
        return {}
    out = {cpu: 0 for cpu in columns if not cpus or cpu in cpus}
    for row in rows:
        for cpu, count in row.counts.items():
            if cpu in out:
                out[cpu] += count
    return out


def run_command(session: Session, cell: Cell, params: dict[str, Any]) -> dict[str, Any]:
    cpus, policy, priority = cell.cpus, POLICIES[cell.policy], cell.priority

    def setup() -> None:  # in the child, before exec
        if cpus:
            os.sched_setaffinity(0, cpus)
        if policy != os.SCHED_OTHER or priority:
            os.sched_setscheduler(0, policy, os.sched_param(priority))

    started = sessions.now_iso()
    before = _irq_totals(cpus)
    t0 = time.perf_counter_ns()
    try:
        proc = subprocess.Popen(list(cell.argv), preexec_fn=setup, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        raise CommandError(f"cannot start {cell.argv[0]!r} with policy {cell.policy}: {exc}", exit_code=3) from exc
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    except KeyboardInterrupt:
        proc.kill()
        proc.wait()
        raise
    wall = time.perf_counter_ns() - t0
    after = _irq_totals(cpus)
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace").strip() if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    if proc.returncode != 0:
        last = err.splitlines()[-1] if err else "no message"
        raise CommandError(f"{cell.argv[0]} exited with {proc.returncode}: {last}")
    result = {
        "workload": "exec",
        "metric": {"name": "wall_s", "unit": "s", "value": wall / 1e9, "better": "lower"},
        "argv": list(cell.argv),
        "policy": cell.policy,
        "priority": priority,
        "cpus": sorted(cpus),
        "measured": {
            "wall_ns": wall,
            "user_ns": int(usage.ru_utime * 1e9),
            "system_ns": int(usage.ru_stime * 1e9),
            "max_rss_kb": usage.ru_maxrss,
            "minor_faults": usage.ru_minflt,
            "major_faults": usage.ru_majflt,
            "ctxsw_voluntary": usage.ru_nvcsw,
            "ctxsw_involuntary": usage.ru_nivcsw,
            "interrupts_on_its_cpus": sum(after.values()) - sum(before.values()),
        },
    }
    envelope = {"format": "quietcore-exec", "command": "exec", "argv": list(cell.argv), "start": started,
                "end": sessions.now_iso(), "result": result}  # fmt: skip
    session.record("exec", params, started, envelope)
    return result
