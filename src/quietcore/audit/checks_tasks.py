"""Which tasks may run on the target CPUs: kernel threads (and the unbound
workqueue mask) and user tasks. Per-CPU kernel threads (ksoftirqd/N,
migration/N, kworker/N:M) are bound by the kernel and cannot be moved; they
are counted apart."""

from __future__ import annotations

from quietcore.audit.context import AuditContext
from quietcore.audit.finding import Finding, Status
from quietcore.facts.cpulist import counted, format_cpumask, parse_cpumask
from quietcore.facts.cpulist import format_cpulist as fmt

WQ = "sys/devices/virtual/workqueue/cpumask"


def _examples(names: list[str]) -> str:
    return ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")


def kthreads(ctx: AuditContext) -> Finding:
    kts = [t for t in ctx.tasks if t.kthread]
    if not kts:
        f = Finding("kthread.placement", Status.UNKNOWN, "no kernel threads could be read")
        return f.see("/proc/*/stat", "no readable task with PF_KTHREAD")
    movable = [t for t in kts if not t.bound and t.allowed & ctx.targets]
    f = Finding("kthread.placement", Status.OK, f"no movable kernel thread may run on target CPUs ({len(kts)} seen)")
    f.see("/proc/*/status", f"{len(kts)} kernel threads, {sum(t.bound for t in kts)} bound per CPU")
    wq_text = ctx.root.read_line(WQ)
    wq = None
    if wq_text:
        try:
            wq = parse_cpumask(wq_text)
            f.see(f"/{WQ}", f"{wq_text} (CPUs {fmt(wq)})")
        except ValueError:
            f.see(f"/{WQ}", f"unparsable {wq_text!r}")
    if not ctx.housekeeping:
        f.status = Status.INFO
        f.summary = f"{len(movable)} movable kernel threads may run anywhere: every CPU is a target"
        return f
    mask = format_cpumask(ctx.housekeeping)
    if movable:
        f.status = Status.WARN
        f.summary = f"{counted(len(movable), 'movable kernel thread')} may run on target CPUs"
        f.see("examples", _examples([f"{t.comm}[{t.pid}]" for t in movable]))
        hk = fmt(ctx.housekeeping)
        for t in movable[:20]:
            if t.start is not None:  # a knob names a thread with its start time, so as never to move another
                f.act("task-affinity", f"{t.pid}@{t.start}", hk)
            else:
                why = "as text only: this root gives no start time, which names the thread for quietcore"
                f.act("note", f"taskset -pc {hk} {t.pid}", note=why)
    if wq is not None and wq & ctx.targets:
        f.status = Status.WARN
        f.summary += f"; unbound workqueues may run on {fmt(wq & ctx.targets)}"
        f.act("sysfs", f"/{WQ}", mask)
    return f


def user_tasks(ctx: AuditContext) -> Finding:
    users = [t for t in ctx.tasks if not t.kthread]
    if not users:
        f = Finding("task.placement", Status.UNKNOWN, "no user tasks could be read")
        return f.see("/proc/*/status", "no readable user task")
    allowed = [t for t in users if t.allowed & ctx.targets]
    f = Finding("task.placement", Status.OK, f"no user task may run on target CPUs ({len(users)} seen)")
    f.see("/proc/*/status", f"{len(users)} user tasks, {len(allowed)} allowed on targets")
    if not allowed:
        return f
    if not ctx.housekeeping:
        f.status = Status.INFO
        f.summary = f"all {len(users)} user tasks may run on any CPU: every CPU is a target"
        return f
    f.status = Status.WARN
    f.summary = f"{counted(len(allowed), 'user task')} may run on target CPUs"
    f.see("examples", _examples([f"{t.comm}[{t.pid}]" for t in allowed]))
    hk = fmt(ctx.housekeeping)
    for unit in ("init.scope", "system.slice", "user.slice"):
        f.act("cgroup", unit, f"AllowedCPUs={hk}")
    return f
