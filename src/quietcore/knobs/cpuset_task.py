"""`cpuset-task`: a thread's cpuset and allowed CPUs, "DIR CPULIST", for a
thread "TID@START". Moving a thread into a v1 cpuset sets its affinity to
the set's CPUs, and moving it back to the root gives it all of them, so
both are one knob: putting it back restores both. DIR may be any cgroup
under the cpuset mount (a thread's old place), never outside it."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from quietcore.facts.cpulist import parse_cpulist
from quietcore.facts.root import Root
from quietcore.knobs.base import Gone, TargetError, ThreadKind, ThreadTarget
from quietcore.knobs.cgroups import cgroup_dir, mount, open_file, tasks_name
from quietcore.knobs.thread import allowed_cpus, cpulist_value, set_cpus


@dataclass(frozen=True)
class Place:
    directory: str
    cpus: frozenset[int]

    @staticmethod
    def parse(value: str, kind: str = "cpuset-task") -> Place:
        directory, _, cpus = value.rpartition(" ")
        try:
            return Place(directory, parse_cpulist(cpus))
        except ValueError:
            raise TargetError(f"refused {kind} value {value!r} (valid: DIR CPULIST)") from None


class CpusetTask(ThreadKind):
    name = "cpuset-task"
    allowed = "TID@START, with a value DIR CPULIST whose DIR is under the cpuset mount"

    def check_value(self, root: Root, target: str, value: str) -> None:
        place = Place.parse(value, self.name)
        cgroup_dir(root, place.directory, self.name)
        cpulist_value(value.rpartition(" ")[2], self.name)

    def read(self, root: Root, target: str) -> str | None:
        t = ThreadTarget.parse(target, self.name)
        allowed = allowed_cpus(t)
        if allowed is None:
            return None
        try:
            where = Path(f"/proc/{t.tid}/cpuset").read_text().strip()
        except OSError:
            return None
        base = "/" + mount(root, self.name).mount
        return f"{os.path.normpath(base + where)} {allowed}"

    def write(self, root: Root, target: str, value: str) -> None:
        """Into DIR, then CPULIST. Raises Gone or OSError (EINVAL for a
        kthread the kernel keeps where it is)."""
        self.check_value(root, target, value)
        t = ThreadTarget.parse(target, self.name)
        directory, _, cpus = value.rpartition(" ")
        if allowed_cpus(t) is None:
            raise Gone(target)
        fd = open_file(root, directory, tasks_name(root, directory), os.O_WRONLY, self.name)
        try:
            os.write(fd, str(t.tid).encode())
        except ProcessLookupError as exc:
            raise Gone(target) from exc
        finally:
            os.close(fd)
        if allowed_cpus(t) != cpus:
            set_cpus(t, cpus)

    def same(self, target: str, now: str | None, wanted: str) -> bool:
        try:
            return now is not None and Place.parse(now) == Place.parse(wanted)
        except TargetError:
            return False

    def render(self, target: str, value: str) -> str:
        place, tid = value.rpartition(" "), ThreadTarget.parse(target, self.name).tid
        return f"echo {tid} > {place[0]}/tasks; taskset -pc {place[2]} {tid}"

    def export_line(self, target: str, value: str, knob: str) -> str:
        tid = ThreadTarget.parse(target, self.name).tid
        directory, _, cpus = value.rpartition(" ")
        return (f"{{ echo {tid} > {shlex.quote(directory + '/tasks')} && taskset -pc {shlex.quote(cpus)} {tid} "
                f">/dev/null; }} 2>/dev/null || echo {shlex.quote(f'refused: {knob}')} >&2")  # fmt: skip


KIND = CpusetTask()
