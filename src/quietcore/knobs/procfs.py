"""`procfs`: the /proc/sys knobs quietcore plans (NUMA balancing, timer
migration, RT throttling) and the default IRQ affinity. Nothing else under
/proc/sys: core_pattern, for one, would run a program as root."""

from __future__ import annotations

import re

from quietcore.knobs.files import FileKind


class Procfs(FileKind):
    name = "procfs"
    prefix = "proc"
    allowed = "/proc/sys/kernel/{numa_balancing,timer_migration,sched_rt_runtime_us}, /proc/irq/default_smp_affinity"
    patterns = (
        re.compile(r"/proc/sys/kernel/(numa_balancing|timer_migration|sched_rt_runtime_us)"),
        re.compile(r"/proc/irq/default_smp_affinity"),
    )


KIND = Procfs()
