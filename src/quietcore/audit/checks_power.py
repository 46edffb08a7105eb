"""Power management: frequency governor, turbo, idle states."""

from __future__ import annotations

from quietcore.audit.context import AuditContext
from quietcore.audit.finding import Finding, Status
from quietcore.facts.cpulist import format_cpulist as fmt
from quietcore.facts.cpus import CPU_SYS, governors

DEEP_US = 20  # an idle state slower than this to leave is felt by wake-ups


def governor(ctx: AuditContext) -> Finding:
    govs = governors(ctx.root, ctx.targets)
    if not govs:
        f = Finding("power.governor", Status.INFO, "no cpufreq: frequency is set by firmware or the hypervisor")
        return f.see(f"/{CPU_SYS}/cpu*/cpufreq/scaling_governor", "missing")
    f = Finding("power.governor", Status.OK, "governor performance on every target CPU")
    by_gov: dict[str, list[int]] = {}
    for cpu, gov in govs.items():
        by_gov.setdefault(gov, []).append(cpu)
    for gov, cpus in sorted(by_gov.items()):
        f.see(f"/{CPU_SYS}/cpu{cpus[0]}/cpufreq/scaling_governor", f"{gov} on CPUs {fmt(set(cpus))}")
    slow = {cpu for cpu, gov in govs.items() if gov != "performance"}
    if slow:
        f.status = Status.WARN
        f.summary = f"governor is not performance on CPUs {fmt(slow)}: frequency changes add jitter"
        for cpu in sorted(slow):
            f.act("sysfs", f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor", "performance")
    return f


def turbo(ctx: AuditContext) -> Finding:
    no_turbo = ctx.root.read_line(f"{CPU_SYS}/intel_pstate/no_turbo")
    boost = ctx.root.read_line(f"{CPU_SYS}/cpufreq/boost")
    if no_turbo is None and boost is None:
        f = Finding("power.turbo", Status.INFO, "turbo/boost control not exposed")
        return f.see(f"/{CPU_SYS}/intel_pstate/no_turbo", "missing").see(f"/{CPU_SYS}/cpufreq/boost", "missing")
    on = no_turbo == "0" if no_turbo is not None else boost == "1"
    f = Finding("power.turbo", Status.INFO if on else Status.OK, f"turbo is {'on' if on else 'off'}")
    if no_turbo is not None:
        f.see(f"/{CPU_SYS}/intel_pstate/no_turbo", no_turbo)
        fix = (f"/{CPU_SYS}/intel_pstate/no_turbo", "1")
    else:
        f.see(f"/{CPU_SYS}/cpufreq/boost", boost)
        fix = (f"/{CPU_SYS}/cpufreq/boost", "0")
    if on:
        f.summary += ": frequency depends on temperature and load, so run times vary; turn it off for comparisons"
        f.act("sysfs", *fix)
    return f


def idle(ctx: AuditContext) -> Finding:
    driver = ctx.root.read_line(f"{CPU_SYS}/cpuidle/current_driver")
    cpu = min(ctx.targets) if ctx.targets else 0
    base = f"{CPU_SYS}/cpu{cpu}/cpuidle"
    states = []
    for entry in ctx.root.listdir(base):
        if not entry.startswith("state"):
            continue
        name = ctx.root.read_line(f"{base}/{entry}/name") or entry
        latency = ctx.root.read_line(f"{base}/{entry}/latency")
        disabled = ctx.root.read_line(f"{base}/{entry}/disable") == "1"
        if latency and latency.isdigit():
            states.append((name, int(latency), disabled))
    if not states:
        f = Finding("power.idle", Status.INFO, f"no cpuidle states (driver {driver or 'none'})")
        return f.see(f"/{base}", "no states")
    listing = ", ".join(f"{n} {lat} µs{' (disabled)' if d else ''}" for n, lat, d in states)
    f = Finding("power.idle", Status.OK, f"idle states on CPU {cpu} ({driver}): {listing}")
    f.see(f"/{CPU_SYS}/cpuidle/current_driver", driver or "missing").see(f"/{base}/state*/latency", listing)
    deep = [(n, lat) for n, lat, d in states if lat > DEEP_US and not d]
    if deep:
        f.status = Status.WARN
        f.summary = f"deep idle states enabled on target CPUs: {', '.join(f'{n} ({lat} µs exit)' for n, lat in deep)}"
        f.act("command", f"cpupower -c {fmt(ctx.targets)} idle-set -D {DEEP_US}")
        if ctx.may_be_x86:
            note = "" if ctx.machine else "on x86 only"
            f.act("boot-parameter", "intel_idle.max_cstate", "1", ("root", "reboot"), note)
            f.act("boot-parameter", "processor.max_cstate", "1", ("root", "reboot"), note)
        else:
            # intel_idle and the ACPI processor driver are x86's; an Arm server idles through PSCI, whose deep
            # states only the whole of cpuidle turns off (its CPUs then wait in WFI)
            wfi = "every CPU then idles in WFI, the shallowest state"
            f.act("boot-parameter", "cpuidle.off", "1", ("root", "reboot"), wfi)
    return f
