"""The CPU shield's knobs: cpusets, run-time isolation without a reboot.

cgroup v1 (a `cpuset` hierarchy of its own): two exclusive sets under the
root, `quietcore-housekeeping` and `quietcore-shield`, load balancing off in
the root and the shield, and every movable thread moved into the
housekeeping set, so new tasks start there too (a child inherits its
parent's cpuset). cgroup v2: one child, `quietcore-shield`, made an
isolated partition; the kernel takes its CPUs from every other cgroup, so
no task needs moving.

Three journaled kinds, each read and written here:
- `cpuset-dir`: a cpuset directory, "present" or "absent". Removing one
  first moves whatever tasks are still in it to its parent: children born
  there since the shield went up are not in the journal.
- `cpuset-task`: a thread's cpuset and allowed CPUs, "DIR CPULIST", target
  "TID@START" (see levers.task). Moving a thread into a v1 cpuset sets its
  affinity to the set's CPUs, and moving it back to the root gives it all
  of them, so both are one knob: putting it back restores both.
- `cgroup-controller`: a controller in a cgroup's subtree_control, "on" or
  "off" (target "DIR/cgroup.subtree_control#NAME"): written as +NAME or
  -NAME, since writing back the old list would not turn one off."""

from __future__ import annotations

import contextlib
import functools
import os
from dataclasses import dataclass
from pathlib import Path

from quietcore.facts.cpulist import format_cpulist, parse_cpulist
from quietcore.facts.root import Root
from quietcore.levers import task

KINDS = ("cpuset-dir", "cpuset-task", "cgroup-controller")
HOUSEKEEPING = "quietcore-housekeeping"
SHIELD = "quietcore-shield"


@dataclass(frozen=True)
class Hierarchy:
    version: int  # 1 or 2
    mount: str  # the mount point, relative to the root ("sys/fs/cgroup/cpuset")
    prefix: str  # "cpuset." on v1 with the usual mount options, "" with noprefix

    def file(self, rel_dir: str, name: str) -> str:
        return f"{rel_dir}/{self.prefix}{name}"


def find(root: Root) -> Hierarchy | None:
    """Where the cpuset controller lives: a v1 hierarchy that has it, else
    the v2 hierarchy when its root offers it."""
    v2 = None
    for line in (root.read_text("proc/mounts") or "").splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        where, kind, options = fields[1].lstrip("/"), fields[2], fields[3].split(",")
        if kind == "cgroup" and "cpuset" in options:
            return Hierarchy(1, where, "" if "noprefix" in options else "cpuset.")
        if kind == "cgroup2" and v2 is None:
            v2 = where
    if v2 is not None and "cpuset" in (root.read_line(f"{v2}/cgroup.controllers") or "").split():
        return Hierarchy(2, v2, "cpuset.")
    return None


def read_dir(target: str) -> str:
    """ "present" or "absent": both are values a revert may write back."""
    return "present" if os.path.isdir(target) else "absent"


def write_dir(target: str, value: str) -> None:
    """Make or remove a cpuset (removing an absent one does nothing).
    Raises OSError as the kernel refuses."""
    path = Path(target)
    if value == "present":
        path.mkdir(exist_ok=True)
        return
    if not path.is_dir():
        return
    tasks = _tasks_file(path)
    for line in tasks.read_text().split():
        with contextlib.suppress(ProcessLookupError):  # exited meanwhile
            (path.parent / tasks.name).write_text(line)
    path.rmdir()


def _tasks_file(directory: Path) -> Path:
    return directory / "tasks" if (directory / "tasks").exists() else directory / "cgroup.threads"


@functools.cache
def _live_mount() -> str | None:
    found = find(Root("/"))
    return f"/{found.mount}" if found else None


def read_task(target: str) -> str | None:
    """The cpuset and allowed CPUs, "DIR CPULIST", of a thread ("TID@START"), or None when it is gone."""
    tid = int(target.partition("@")[0])
    allowed, mount = task.read(target), _live_mount()
    if allowed is None or mount is None:
        return None
    try:
        where = Path(f"/proc/{tid}/cpuset").read_text().strip()
    except OSError:
        return None
    return f"{os.path.normpath(mount + where)} {allowed}"


def write_task(target: str, value: str) -> None:
    """Move a thread into DIR, then give it CPULIST. Raises task.Gone or
    OSError (EINVAL for a kthread the kernel keeps where it is)."""
    directory, _, cpus = value.rpartition(" ")
    tid = int(target.partition("@")[0])
    if task.read(target) is None:
        raise task.Gone(target)
    try:
        _tasks_file(Path(directory)).write_text(str(tid))
    except ProcessLookupError as exc:
        raise task.Gone(target) from exc
    if task.read(target) != format_cpulist(parse_cpulist(cpus)):
        task.write(target, cpus)


def read_controller(target: str) -> str | None:
    path, _, name = target.partition("#")
    try:
        return "on" if name in Path(path).read_text().split() else "off"
    except OSError:
        return None


def write_controller(target: str, value: str) -> None:
    path, _, name = target.partition("#")
    Path(path).write_text(f"{'+' if value == 'on' else '-'}{name}")


def partition_refused(target: str, now: str | None) -> str | None:
    """cgroup v2 takes a write of cpus.partition and then reads back
    "isolated invalid (REASON)" when the partition is not one: the refusal,
    or None."""
    if target.endswith("cpus.partition") and now is not None and "invalid" in now:
        return f"refused: the kernel reads back {now!r}"
    return None


def parse_task_value(value: str) -> tuple[str, frozenset[int]]:
    directory, _, cpus = value.rpartition(" ")
    return directory, parse_cpulist(cpus)
