"""Memory: transparent huge pages, NUMA balancing, swap."""

from __future__ import annotations

from quietcore.audit.context import AuditContext
from quietcore.audit.finding import Finding, Status
from quietcore.facts.cpulist import counted
from quietcore.facts.fingerprint import selected

THP = "sys/kernel/mm/transparent_hugepage"


def thp(ctx: AuditContext) -> Finding:
    enabled = ctx.root.read_line(f"{THP}/enabled")
    defrag = ctx.root.read_line(f"{THP}/defrag")
    if enabled is None:
        f = Finding("mem.thp", Status.INFO, "transparent huge pages not available (CONFIG_TRANSPARENT_HUGEPAGE off)")
        return f.see(f"/{THP}/enabled", "missing")
    on, dfg = selected(enabled), selected(defrag)
    f = Finding("mem.thp", Status.OK, f"THP enabled={on}, defrag={dfg}")
    f.see(f"/{THP}/enabled", enabled).see(f"/{THP}/defrag", defrag or "missing")
    if dfg == "always" and on != "never":
        f.status = Status.WARN
        f.summary = "THP defrag=always: page faults stall in direct compaction"
        f.act("sysfs", f"/{THP}/defrag", "madvise")
    elif on == "always":
        f.status = Status.INFO
        f.summary += ": khugepaged collapses pages in the background; measure with quietcore's THP experiment"
    return f


def numa_balancing(ctx: AuditContext) -> Finding:
    value = ctx.root.read_line("proc/sys/kernel/numa_balancing")
    nodes = len(ctx.topology.nodes)
    if value is None:
        f = Finding("mem.numa_balancing", Status.INFO, "automatic NUMA balancing not in this kernel")
        return f.see("/proc/sys/kernel/numa_balancing", "missing")
    f = Finding(
        "mem.numa_balancing",
        Status.OK,
        (f"NUMA balancing {'on' if value != '0' else 'off'}, {counted(nodes, 'NUMA node')}"),
    )
    f.see("/proc/sys/kernel/numa_balancing", value)
    if value != "0" and nodes > 1:
        f.status = Status.WARN
        f.summary = "automatic NUMA balancing is on: hinting page faults and page migrations interrupt compute"
        f.act("sysctl", "kernel.numa_balancing", "0", note="and pin memory with numactl")
    return f


def swap(ctx: AuditContext) -> Finding:
    text = ctx.root.read_text("proc/swaps")
    if text is None:
        return Finding("mem.swap", Status.UNKNOWN, "/proc/swaps not readable").see("/proc/swaps", "missing")
    devices = [line.split()[0] for line in text.splitlines()[1:] if line.strip()]
    if not devices:
        return Finding("mem.swap", Status.OK, "no swap is active").see("/proc/swaps", "(no devices)")
    f = Finding(
        "mem.swap", Status.WARN, f"swap is active on {', '.join(devices)}: a swapped-out page costs milliseconds"
    )
    f.see("/proc/swaps", ", ".join(devices))
    f.act("command", "swapoff -a", note="and remove it from /etc/fstab, or lock the job's memory with mlockall")
    return f
