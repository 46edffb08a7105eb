"""The audit: every check of the node's noise surface, in a fixed order.

Each check is a function of an AuditContext returning one Finding with a
stable id. A check that meets a file it cannot parse returns `unknown` with
the reason instead of failing the whole audit."""

from __future__ import annotations

from collections.abc import Callable

from quietcore.audit import (
    checks_cpu,
    checks_devices,
    checks_irq,
    checks_journal,
    checks_mem,
    checks_power,
    checks_sched,
    checks_system,
    checks_tasks,
)
from quietcore.audit.context import AuditContext
from quietcore.audit.finding import Finding, Status

#: A check returns None when it has nothing to say of this node (the device checks on a node without devices).
Check = Callable[[AuditContext], Finding | None]

#: (id, check) in the order shown: what the CPUs are, then isolation, then
#: what still reaches them, then the knobs around them.
CHECKS: list[tuple[str, Check]] = [
    ("audit.targets", checks_cpu.targets),
    ("cpu.isolcpus", checks_cpu.isolcpus),
    ("cpu.nohz_full", checks_cpu.nohz_full),
    ("cpu.rcu_nocbs", checks_cpu.rcu_nocbs),
    ("cpu.housekeeping", checks_cpu.housekeeping),
    ("irq.affinity", checks_irq.affinity),
    ("irq.default_affinity", checks_irq.default_affinity),
    ("irq.irqbalance", checks_irq.irqbalance),
    ("irq.device", checks_devices.irq_device),
    ("device.locality", checks_devices.locality),
    ("gpu.persistence", checks_devices.gpu_persistence),
    ("kthread.placement", checks_tasks.kthreads),
    ("task.placement", checks_tasks.user_tasks),
    ("sched.preempt", checks_sched.preempt),
    ("sched.rt_throttling", checks_sched.rt_throttling),
    ("sched.hz", checks_sched.hz),
    ("mem.thp", checks_mem.thp),
    ("mem.numa_balancing", checks_mem.numa_balancing),
    ("mem.swap", checks_mem.swap),
    ("power.governor", checks_power.governor),
    ("power.turbo", checks_power.turbo),
    ("power.idle", checks_power.idle),
    ("cpu.smt", checks_cpu.smt),
    ("cpu.topology", checks_cpu.topology),
    ("clock.source", checks_system.clock_source),
    ("virt.hypervisor", checks_system.hypervisor),
    ("perf.counters", checks_system.perf_counters),
    ("kernel.config", checks_system.kernel_config),
    # Last: what quietcore itself left changed, and how to put it back.
    ("quietcore.journal", checks_journal.journal),
]


#: The checks that say nothing (None) of a node without GPUs or NICs: its audit is what it was.
DEVICE_CHECKS = ("irq.device", "device.locality", "gpu.persistence")


def expected(has_devices: bool) -> list[str]:
    """The ids of the findings an audit gives, in order."""
    return [c for c, _ in CHECKS if has_devices or c not in DEVICE_CHECKS]


def run_checks(ctx: AuditContext) -> list[Finding]:
    findings = []
    for check_id, check in CHECKS:
        try:
            found = check(ctx)
            if found is None:
                continue
            finding = found
        except (ValueError, KeyError, IndexError, TypeError, ZeroDivisionError, OSError) as exc:
            # A garbled or truncated file: say so for this check, audit the rest.
            finding = Finding(check_id, Status.UNKNOWN, "could not evaluate: a file it reads is garbled or truncated")
            finding.see("error", f"{type(exc).__name__}: {exc}")
        assert finding.id == check_id, (finding.id, check_id)
        findings.append(finding)
    return findings
