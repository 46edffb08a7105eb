"""`task-affinity`: a thread's CPU affinity (sched_setaffinity, as
`taskset -p`). Its target is "TID@START", the thread id with its start
time: a thread that exited, or whose id now names another thread, is gone,
and nothing is written to it."""

from __future__ import annotations

import os
import shlex

from quietcore.facts.cpulist import format_cpulist, parse_cpulist
from quietcore.facts.root import Root
from quietcore.knobs.base import Gone, TargetError, ThreadKind, ThreadTarget
from quietcore.owner import start_time


def zombie(tid: int) -> bool:
    """Exited, not yet reaped (by init, here, which is slow to): the kernel
    has already moved it to the root cgroup, and nothing can set it."""
    try:
        with open(f"/proc/{tid}/stat", encoding="utf-8") as handle:
            stat = handle.read()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2 :].split()[0] in ("Z", "X")


def allowed_cpus(t: ThreadTarget) -> str | None:
    """Its allowed CPUs now, or None when it is gone (or a zombie)."""
    if start_time(t.tid) != t.start or zombie(t.tid):
        return None
    try:
        with open(f"/proc/{t.tid}/status", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("Cpus_allowed_list:"):
                    return format_cpulist(parse_cpulist(line.split(":", 1)[1].strip()))
    except OSError:
        return None
    return None


def set_cpus(t: ThreadTarget, cpus: str) -> None:
    """Raises Gone, or OSError with the kernel's refusal (EINVAL for a
    kthread bound to its CPU)."""
    if start_time(t.tid) != t.start:
        raise Gone(str(t))
    try:
        os.sched_setaffinity(t.tid, parse_cpulist(cpus))
    except ProcessLookupError as exc:
        raise Gone(str(t)) from exc


def cpulist_value(value: str, kind: str) -> str:
    try:
        parse_cpulist(value)
    except ValueError:
        raise TargetError(f"refused {kind} value {value!r} (valid: a CPU list)") from None
    return value


class TaskAffinity(ThreadKind):
    name = "task-affinity"
    allowed = "TID@START, a live thread"

    def check_value(self, root: Root, target: str, value: str) -> None:
        cpulist_value(value, self.name)

    def read(self, root: Root, target: str) -> str | None:
        return allowed_cpus(ThreadTarget.parse(target, self.name))

    def write(self, root: Root, target: str, value: str) -> None:
        set_cpus(ThreadTarget.parse(target, self.name), cpulist_value(value, self.name))

    def render(self, target: str, value: str) -> str:
        return f"taskset -pc {value} {ThreadTarget.parse(target, self.name).tid}"

    def export_line(self, target: str, value: str, knob: str) -> str:
        # by thread id: a script cannot check the start time
        tid = ThreadTarget.parse(target, self.name).tid
        return f"taskset -pc {shlex.quote(value)} {tid} >/dev/null || echo {shlex.quote(f'refused: {knob}')} >&2"

    def same(self, target: str, now: str | None, wanted: str) -> bool:
        try:
            return now is not None and parse_cpulist(now) == parse_cpulist(wanted)
        except ValueError:
            return False


KIND = TaskAffinity()
