"""Interrupts: where each device IRQ really goes, the default for new IRQs,
and irqbalance, which can move them back."""

from __future__ import annotations

import re

from quietcore.audit.context import AuditContext
from quietcore.audit.finding import Finding, Status
from quietcore.facts.cpulist import counted, format_cpumask, parse_cpulist, parse_cpumask
from quietcore.facts.cpulist import format_cpulist as fmt
from quietcore.facts.tasks import irqbalance_running

SHOWN = 12  # stray IRQs listed one by one; the rest are counted


def affinity(ctx: AuditContext) -> Finding:
    irqs = ctx.irqs
    if not irqs:
        f = Finding("irq.affinity", Status.UNKNOWN, "no IRQ affinities could be read")
        return f.see("/proc/irq", "no readable /proc/irq/N directories")
    stray = [irq for irq in irqs if irq.effective and irq.effective & ctx.targets]
    f = Finding("irq.affinity", Status.OK, f"none of {len(irqs)} device IRQs is delivered to target CPUs")
    if not stray:
        return f.see("/proc/irq/*/effective_affinity_list", f"all on {fmt(ctx.housekeeping)}")
    if not ctx.housekeeping:
        f.status = Status.INFO
        f.summary = f"all {len(irqs)} device IRQs land on target CPUs, as every CPU is a target"
        for cpu in sorted(ctx.targets):
            here = [irq.device for irq in stray if irq.effective and cpu in irq.effective]
            f.see("/proc/irq/*/effective_affinity_list", f"CPU {cpu}: {len(here)} IRQs ({', '.join(here[:6])})")
        f.act("note", "isolate CPUs first (cpu.isolcpus); then steer IRQs with irqaffinity=")
        return f
    mask = format_cpumask(ctx.housekeeping)
    f.status = Status.FAIL
    names = ", ".join(f"{irq.number} ({irq.device})" for irq in stray[:SHOWN])
    more = f" and {len(stray) - SHOWN} more" if len(stray) > SHOWN else ""
    f.summary = f"{counted(len(stray), 'device IRQ')} delivered to target CPUs: {names}{more}"
    for irq in stray[:SHOWN]:
        hits = sum(irq.counts.get(cpu, 0) for cpu in ctx.targets)
        f.see(irq.effective_source, f"{fmt(irq.effective or frozenset())} ({irq.device}, {hits} interrupts on targets)")
        f.act("irq-affinity", f"/proc/irq/{irq.number}/smp_affinity", mask, note=irq.device)
    f.act("note", "a managed IRQ refuses the write with EIO; use isolcpus=managed_irq (cpu.isolcpus)")
    return f


def default_affinity(ctx: AuditContext) -> Finding:
    text = ctx.root.read_line("proc/irq/default_smp_affinity")
    param = ctx.cmdline.get("irqaffinity")
    if text is None:
        f = Finding("irq.default_affinity", Status.UNKNOWN, "default IRQ affinity not readable")
        return f.see("/proc/irq/default_smp_affinity", ctx.root.read("proc/irq/default_smp_affinity")[1])
    try:
        default = parse_cpumask(text)
    except ValueError:
        f = Finding("irq.default_affinity", Status.UNKNOWN, f"cannot parse default_smp_affinity {text!r}")
        return f.see("/proc/irq/default_smp_affinity", text)
    f = Finding("irq.default_affinity", Status.OK, f"new IRQs default to CPUs {fmt(default & ctx.online)}")
    f.see("/proc/irq/default_smp_affinity", text)
    f.see("/proc/cmdline", f"irqaffinity={param}" if param is not None else "no irqaffinity= parameter")
    overlap = default & ctx.targets
    if overlap and ctx.housekeeping:
        f.status = Status.WARN
        f.summary = f"new IRQs may be delivered to target CPUs {fmt(overlap)}"
        hk = fmt(ctx.housekeeping)
        f.act("procfs", "/proc/irq/default_smp_affinity", format_cpumask(ctx.housekeeping))
        f.act("boot-parameter", "irqaffinity", hk, ("root", "reboot"), "to keep it across reboots")
    elif overlap:
        f.status = Status.INFO
        f.summary += " (every CPU is a target)"
    return f


def _banned(ctx: AuditContext) -> tuple[frozenset[int] | None, str]:
    """irqbalance's banned CPUs from its environment file (Debian, then Red Hat)."""
    for path in ("etc/default/irqbalance", "etc/sysconfig/irqbalance"):
        text = ctx.root.read_text(path)
        if text is None:
            continue
        for line in text.splitlines():
            match = re.match(r"\s*(IRQBALANCE_BANNED_CPU(?:S|LIST))\s*=\s*\"?([^\"#]*)\"?", line)
            if not match:
                continue
            try:
                value = match.group(2).strip()
                cpus = parse_cpulist(value) if match.group(1).endswith("LIST") else parse_cpumask(value)
                return cpus, f"/{path}: {match.group(1)}={value}"
            except ValueError:
                return None, f"/{path}: unreadable {match.group(1)}={match.group(2)!r}"
        return frozenset(), f"/{path}: no IRQBALANCE_BANNED_CPUS"
    return frozenset(), "no irqbalance configuration file"


def irqbalance(ctx: AuditContext) -> Finding:
    task = irqbalance_running(ctx.tasks)
    if task is None:
        return Finding("irq.irqbalance", Status.OK, "irqbalance is not running").see("/proc/*/comm", "no irqbalance")
    banned, where = _banned(ctx)
    f = Finding("irq.irqbalance", Status.OK, f"irqbalance (pid {task.pid}) is running and keeps off the target CPUs")
    source, known, said = where.partition(": ")
    f.see(f"/proc/{task.pid}/comm", "irqbalance").see(source if known else "/etc/default/irqbalance", said or where)
    # irqbalance 1.8+ also leaves isolcpus and nohz_full CPUs alone by itself.
    unguarded = ctx.targets - (banned or frozenset()) - ctx.isolated - ctx.nohz_full
    if unguarded and ctx.housekeeping:
        f.status = Status.WARN
        f.summary = f"irqbalance (pid {task.pid}) may move IRQs onto target CPUs {fmt(unguarded)}"
        conf = "/etc/default/irqbalance (or /etc/sysconfig/irqbalance)"
        f.act(
            "service",
            "irqbalance",
            "restart",
            note=f"after setting IRQBALANCE_BANNED_CPULIST={fmt(ctx.targets)} in {conf}",
        )
        f.act("service", "irqbalance", "disable --now", note="or stop it instead")
    return f
