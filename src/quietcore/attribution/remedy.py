"""What would have kept each intruder away, named as the audit finding that
checks it and the `tune` part that applies it; or that nothing isolation
can do would, and why."""

from __future__ import annotations

import re
from dataclasses import dataclass

from quietcore.attribution.intruders import PER_CPU_KTHREAD, SELF, Use

SHIELD = "the shield: `quietcore tune apply --cpus {cpus}` moves it off"


@dataclass(frozen=True)
class Remedy:
    text: str
    finding: str | None  # the audit finding that checks it, if one does

    def line(self, cpus: str) -> str:
        words = self.text.format(cpus=cpus)
        return f"{words}. Audit: {self.finding}." if self.finding else f"{words}."


NOTHING = Remedy("nothing isolation can fix", None)

_SOFTIRQ = {
    "TIMER": Remedy("the tick's timers: nohz_full, with one task on the CPU", "cpu.nohz_full"),
    "HRTIMER": Remedy("high-resolution timers armed here: nohz_full, fewer in the workload", "cpu.nohz_full"),
    "SCHED": Remedy("load balancing: isolcpus=domain takes the CPU out of it", "cpu.isolcpus"),
    "RCU": Remedy("RCU callbacks: rcu_nocbs moves them to housekeeping threads", "cpu.rcu_nocbs"),
}
_KSOFTIRQD = Remedy("softirqs run late in a thread here: remove their sources (IRQ affinity, nohz_full)",
                    "irq.affinity")  # fmt: skip
_KWORKER = Remedy("per-CPU work queued here (see its work items): nohz_full and isolcpus=managed_irq keep most "
                  "of it away", "cpu.nohz_full")  # fmt: skip
_MIGRATION = Remedy("the scheduler moving tasks: isolcpus=domain takes the CPU out of load balancing",
                    "cpu.isolcpus")  # fmt: skip
_KTHREAD = (
    (re.compile(r"^ksoftirqd/"), _KSOFTIRQD),
    (re.compile(r"^kworker/\d+:"), _KWORKER),
    (re.compile(r"^rcuc/"), Remedy("RCU callbacks: rcu_nocbs moves them to housekeeping threads", "cpu.rcu_nocbs")),
    (re.compile(r"^migration/"), _MIGRATION),
)
_IPI = {
    "flush_tlb_func": Remedy("a TLB shootdown of a process that ran here: keep it off (the shield)", "task.placement"),
    "do_sync_core": Remedy("kernel code patching (static keys, a module, a tracer): nothing isolation can fix", None),
    "nohz_csd_func": Remedy("idle load balancing: isolcpus=domain", "cpu.isolcpus"),
    "__sysvec_call_function_single": Remedy("a function call from another CPU: its sender is named", None),
}


def remedy(use: Use) -> Remedy:
    if use.kind == "task" and use.name == SELF:
        return Remedy("quietcore's own threads (its progress bar, its waiting): --json draws no bar", None)
    if use.kind == "task":
        for pattern, fix in _KTHREAD:
            if pattern.search(use.name):
                return fix
        if PER_CPU_KTHREAD.search(use.name):
            return Remedy("a kernel thread bound to this CPU: nothing moves it", None)
        return Remedy(SHIELD, "task.placement")
    if use.kind == "irq":
        return Remedy("its affinity: `quietcore tune apply --cpus {cpus}` moves it off", "irq.affinity")
    if use.kind == "softirq":
        action = use.name.removeprefix("softirq ")
        return _SOFTIRQ.get(action, Remedy("raised by a device IRQ here: that IRQ's affinity", "irq.affinity"))
    if use.kind == "vector":
        if use.name == "local_timer":
            return Remedy("the tick: nohz_full, with one task on the CPU", "cpu.nohz_full")
        if use.name == "reschedule":
            if 2 * use.workload_sent >= sum(use.came.values()) > 0:  # mostly its own
                return Remedy("the workload waking its own threads: nothing isolation can fix", None)
            return Remedy("a task woken for this CPU: keep the woken task off (the shield)", "task.placement")
        if use.name == "irq_work":
            return Remedy("irq_work (perf, printk, RCU): nohz_full and rcu_nocbs", "cpu.nohz_full")
        if use.name in ("call_function", "call_function_single"):
            return Remedy("function calls from other CPUs: see the IPIs and their senders", None)
        return Remedy("raised by the hardware: nothing isolation can fix", None)
    if use.kind == "ipi":
        if use.name == "flush_tlb_func" and 2 * use.workload_sent >= use.count > 0:  # mostly its own
            return Remedy("the workload's own munmap or mprotect (a TLB shootdown): nothing isolation can fix; "
                          "fewer unmaps in the workload would", None)  # fmt: skip
        return _IPI.get(use.name, Remedy("a function call sent from another CPU: its sender is named", None))
    if use.kind == "work":
        if use.name == "vmstat_update":
            return Remedy("vmstat's per-CPU counters: nohz_full stops them while one task runs", "cpu.nohz_full")
        return Remedy("work queued for this CPU: unbound work goes with the workqueue cpumask (`quietcore tune "
                      "apply --cpus {cpus}`); per-CPU work from its queuer, named", "kthread.placement")  # fmt: skip
    if use.kind == "timer":
        return Remedy("a timer armed on this CPU: nohz_full, and timer migration for those that may move",
                      "cpu.nohz_full")  # fmt: skip
    return NOTHING
