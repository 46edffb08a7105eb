"""The CPU shield's cpusets, as `tune` plans them: run-time isolation
without a reboot.

cgroup v1 (a `cpuset` hierarchy of its own): two exclusive sets under the
root, `quietcore-housekeeping` and `quietcore-shield`, load balancing off in
the root and the shield, and every movable thread moved into the
housekeeping set, so new tasks start there too (a child inherits its
parent's cpuset). cgroup v2: one child, `quietcore-shield`, made an
isolated partition; the kernel takes its CPUs from every other cgroup, so
no task needs moving. The knobs themselves are the kinds cpuset-dir,
cpuset-task and cgroup-controller (quietcore.knobs)."""

from __future__ import annotations

from quietcore.facts.cgroup import Hierarchy, find
from quietcore.facts.root import Root
from quietcore.knobs.cgroups import HOUSEKEEPING, SHIELD
from quietcore.knobs.cpuset_task import KIND as TASK_KIND

__all__ = ["HOUSEKEEPING", "SHIELD", "Hierarchy", "find", "partition_refused", "read_task"]


def read_task(target: str) -> str | None:
    """The cpuset and allowed CPUs, "DIR CPULIST", of a live thread ("TID@START"), or None when it is gone."""
    return TASK_KIND.read(Root("/"), target)


def partition_refused(target: str, now: str | None) -> str | None:
    """cgroup v2 takes a write of cpus.partition and then reads back
    "isolated invalid (REASON)" when the partition is not one: the refusal,
    or None."""
    if target.endswith("cpus.partition") and now is not None and "invalid" in now:
        return f"refused: the kernel reads back {now!r}"
    return None
