"""A user's command as a workload, measured from outside: wall time around
the process, its rusage from wait4(2), and the interrupts its CPUs took
(from /proc/interrupts; with the command pinned, those are the interrupts
that could have landed on it). Run without a shell: argv is split with
shlex, so pipes need an explicit `sh -c`."""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from quietcore.errors import CommandError, UsageError
from quietcore.experiments import metric as metrics
from quietcore.experiments.context import steal_ticks
from quietcore.experiments.model import Cell
from quietcore.facts.interrupts import parse_interrupts
from quietcore.safe import plain
from quietcore.sched import POLICIES
from quietcore.store import sessions

if TYPE_CHECKING:  # for the annotation alone: checking a command line must not load the analysis
    from quietcore.session import Session


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


STDERR_KEPT = 64 * 1024  # the tail of the command's stderr kept for its error message
GRACE_S = 1.0  # between SIGTERM and SIGKILL of the command's process group

_libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1


def _drain(fd: int, tail: bytearray) -> None:
    """Read the command's stderr as it comes (a full pipe would stop it,
    levers still set), keeping the last STDERR_KEPT bytes."""
    with contextlib.suppress(OSError):  # closed under it: a grandchild kept the pipe open
        for chunk in iter(lambda: os.read(fd, 1 << 16), b""):
            tail += chunk
            del tail[: max(0, len(tail) - STDERR_KEPT)]


def end_group(proc: subprocess.Popen[bytes]) -> None:
    """End the command and everything it started in its process group:
    SIGTERM, then SIGKILL after a grace."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        deadline = time.monotonic() + GRACE_S
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        if proc.poll() is not None:
            return
    proc.wait()


def _expire(pgid: int, done: threading.Event) -> None:
    """--timeout: SIGTERM the group, SIGKILL after a grace (the main thread,
    blocked in wait4, reaps the command)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
        if done.wait(GRACE_S):
            return


def _wait(proc: subprocess.Popen[bytes], timeout_s: float) -> Any:
    """wait4 for the command (blocking: the wall time is exact), ending its
    group on Ctrl-C, SIGTERM (which cli turns into KeyboardInterrupt) or
    after `timeout_s`."""
    done, expired = threading.Event(), threading.Event()

    def expire() -> None:
        expired.set()
        _expire(proc.pid, done)

    timer = threading.Timer(timeout_s, expire) if timeout_s else None
    if timer:
        timer.daemon = True
        timer.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    except KeyboardInterrupt:
        end_group(proc)
        raise
    finally:
        done.set()
        if timer:
            timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if expired.is_set():
        raise CommandError(f"{proc.args[0]!r} ran over --timeout {timeout_s:g} s: ended with its "  # type: ignore[index]
                           "process group")  # fmt: skip
    return usage


class MetricMissing(CommandError):
    """A run whose output held no sample of the verdict's metric."""


def _metric(cell: Cell, output: metrics.Reader) -> dict[str, Any]:
    """The verdict's figure: the first metric's samples, as --metric-of says."""
    first = cell.metrics[0]
    samples = output.samples[first.name]
    if not samples:
        raise MetricMissing(metrics.never_matched(first, output.tail, output.errors))
    unit = samples[0].unit
    return {"name": first.name, "unit": unit or first.name, "value": metrics.value_of(samples, cell.metric_of),
            "better": metrics.direction(first, unit), "of": cell.metric_of, "samples": len(samples)}  # fmt: skip


def _per_sample(result: dict[str, Any], around: dict[str, Any], cell: Cell) -> None:
    """Each sample of the verdict's metric gets what the trace saw in its interval (the slots the
    context's account gave, in the same order), which leave the context."""
    slots = around.get("intrusions", {}).pop("slots", None)
    if not cell.metrics or slots is None:
        return
    for row, slot in zip(result["samples"].get(cell.metrics[0].name, []), slots, strict=False):
        row.update(slot)


def run_command(
    session: Session, cell: Cell, params: dict[str, Any], context: Callable[[dict[str, Any]], dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run the command once and store it; `context` gives the run's
    intrusions and covariates from its result, as soon as it has ended."""
    cpus, policy, priority = cell.cpus, POLICIES[cell.policy], cell.priority

    def setup() -> None:  # in the child, before exec
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # ends with quietcore, even a kill -9 of it
        if cpus:
            os.sched_setaffinity(0, cpus)
        if policy != os.SCHED_OTHER or priority:
            os.sched_setscheduler(0, policy, os.sched_param(priority))

    started = sessions.now_iso()
    before = _irq_totals(cpus)
    output = metrics.Reader(cell.metrics, on_mark=lambda: steal_ticks(cpus))
    output.begin()
    t0 = time.perf_counter_ns()
    try:
        # its own process group, so that Ctrl-C, SIGTERM and --timeout end all it started; with --metric its
        # output is read as it comes, stderr with stdout in the order written
        proc = subprocess.Popen(list(cell.argv), preexec_fn=setup, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE if cell.metrics else subprocess.DEVNULL,
                                stderr=subprocess.STDOUT if cell.metrics else subprocess.PIPE,
                                process_group=0)  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        raise CommandError(f"cannot start {cell.argv[0]!r} with policy {cell.policy}: {exc}", exit_code=3) from exc
    tail = bytearray()
    pipe = proc.stdout if cell.metrics else proc.stderr
    assert pipe is not None
    reader = threading.Thread(target=metrics.pump if cell.metrics else _drain,
                              args=(pipe.fileno(), output if cell.metrics else tail), daemon=True)  # fmt: skip
    reader.start()
    try:
        usage = _wait(proc, cell.timeout_s)
    finally:
        reader.join(timeout=GRACE_S)
        pipe.close()
    wall = time.perf_counter_ns() - t0
    after = _irq_totals(cpus)
    err = "\n".join(output.tail) if cell.metrics else tail.decode(errors="replace").strip()
    if proc.returncode != 0:
        last = plain(err.splitlines()[-1][:300]) if err else "no message"
        raise CommandError(f"{cell.argv[0]} exited with {proc.returncode}: {last}")
    wall_metric = {"name": "wall_s", "unit": "s", "value": wall / 1e9, "better": "lower"}
    result = {
        "workload": "exec",
        "metric": _metric(cell, output) if cell.metrics else wall_metric,
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
    if cell.metrics:
        result["wall"] = wall_metric
        result |= metrics.run_json(cell.metrics, output, cell.metric_of)
    around = context(result)
    _per_sample(result, around, cell)
    envelope = {"format": "quietcore-exec", "command": "exec", "argv": list(cell.argv), "start": started,
                "end": sessions.now_iso(), "result": result}  # fmt: skip
    if cell.metrics:  # the run's log: what it printed, read for its figures
        envelope["output"] = {"lines": output.kept, "dropped_lines": output.dropped}
    session.record("exec", params, started, envelope, {"context": around})
    return result, around
