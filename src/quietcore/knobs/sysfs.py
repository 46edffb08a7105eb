"""`sysfs`: the files under /sys that quietcore plans and levers write:
THP, the governor, turbo, the workqueue masks, the preemption model, and
the shield's cpuset files under the node's cpuset mount. Nothing else
under /sys (not /sys/power/state, not a firmware variable)."""

from __future__ import annotations

import re

from quietcore.facts.cgroup import find
from quietcore.facts.root import Root
from quietcore.knobs.cgroups import HOUSEKEEPING, SHIELD
from quietcore.knobs.files import FileKind

_FIXED = (
    r"/sys/kernel/mm/transparent_hugepage/(enabled|defrag|khugepaged/defrag)",
    r"/sys/devices/system/cpu/cpu[0-9]+/cpufreq/scaling_governor",
    r"/sys/devices/system/cpu/(intel_pstate/no_turbo|cpufreq/boost)",
    r"/sys/devices/virtual/workqueue/([A-Za-z0-9_.-]+/)?cpumask",
    r"/sys/kernel/debug/sched/preempt",
)
#: The shield's files, under a cpuset mount: its two sets' and the mount's own.
CPUSET_FILES = r"(cpuset\.)?(cpus|mems|cpu_exclusive|sched_load_balance|cpus\.exclusive|cpus\.partition)"


def cpuset_patterns(root: Root) -> tuple[re.Pattern[str], ...]:
    found = find(root)
    if found is None:
        return ()
    mount = "/" + found.mount
    shield = f"({re.escape(SHIELD)}|{re.escape(HOUSEKEEPING)})"
    return (re.compile(f"{re.escape(mount)}(/{shield})?/{CPUSET_FILES}"),)


class Sysfs(FileKind):
    name = "sysfs"
    prefix = "sys"
    allowed = ("THP, scaling_governor, no_turbo/boost, workqueue cpumask, debug/sched/preempt, "
               "and the shield's cpuset files under the cpuset mount")  # fmt: skip
    patterns = tuple(re.compile(p) for p in _FIXED)

    def extra(self, root: Root) -> tuple[re.Pattern[str], ...]:
        return cpuset_patterns(root)


KIND = Sysfs()
