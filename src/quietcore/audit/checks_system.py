"""Clock source, virtualization, performance counters, kernel build options."""

from __future__ import annotations

from quietcore.audit.context import AuditContext
from quietcore.audit.finding import Finding, Status
from quietcore.facts import virt
from quietcore.facts.kernel import NOISE_OPTIONS
from quietcore.facts.perf import hardware_counters

CLOCK = "sys/devices/system/clocksource/clocksource0"
# Read in the vDSO without a system call on these (arch/*/vdso); others trap.
FAST_CLOCKS = {"tsc", "arch_sys_counter", "kvm-clock", "hyperv_clocksource_tsc_page", "timebase", "riscv_clocksource"}


def clock_source(ctx: AuditContext) -> Finding:
    current = ctx.root.read_line(f"{CLOCK}/current_clocksource")
    available = (ctx.root.read_line(f"{CLOCK}/available_clocksource") or "").split()
    if current is None:
        f = Finding("clock.source", Status.UNKNOWN, "clocksource not readable")
        return f.see(f"/{CLOCK}/current_clocksource", ctx.root.read(f"{CLOCK}/current_clocksource")[1])
    f = Finding("clock.source", Status.OK, f"clocksource {current}")
    f.see(f"/{CLOCK}/current_clocksource", current).see(f"/{CLOCK}/available_clocksource", " ".join(available))
    if current not in FAST_CLOCKS:
        f.status = Status.WARN
        f.summary = f"clocksource {current} is slow to read: every clock_gettime is a system call or an MMIO read"
        better = next((c for c in ("tsc", "arch_sys_counter", "kvm-clock") if c in available), None)
        if better:
            f.act("sysfs", f"/{CLOCK}/current_clocksource", better)
        f.act("note", "the kernel falls back when it finds the TSC unstable: see dmesg | grep -i clocksource")
    return f


def hypervisor(ctx: AuditContext) -> Finding:
    v = virt.detect(ctx.root)
    if not v.virtualized:
        f = Finding("virt.hypervisor", Status.OK, "bare metal: no hypervisor found")
        if ctx.may_be_x86:  # an Arm CPU has no such flag, in a VM or not
            f.see("/proc/cpuinfo", "no 'hypervisor' flag")
        for name in ("sys_vendor", "product_name"):
            f.see(f"/sys/class/dmi/id/{name}", ctx.root.read_line(f"sys/class/dmi/id/{name}") or "missing")
        f.see("/sys/hypervisor/type", ctx.root.read_line("sys/hypervisor/type") or "missing")
    else:
        f = Finding("virt.hypervisor", Status.WARN, v.warning() or "")
        for line in v.evidence:
            f.see("virt", line)
        f.act("note", "measure kernel levers on bare metal; here, compare only runs from the same host and VM size",
              needs=("hardware",))  # fmt: skip
    if v.container:
        f.see("container", f"running inside a {v.container} container: some files show the host's view")
    return f


def perf_counters(ctx: AuditContext) -> Finding:
    paranoid = ctx.root.read_line("proc/sys/kernel/perf_event_paranoid")
    f = Finding("perf.counters", Status.OK, "")
    f.see("/proc/sys/kernel/perf_event_paranoid", paranoid or "missing")
    recorded = ctx.root.manifest().get("live", {}).get("hardware_counters")
    if ctx.is_live_root:
        works, how = hardware_counters()
    elif isinstance(recorded, dict):
        works, how = recorded.get("works"), f"when the snapshot was taken: {recorded.get('how')}"
    else:
        f.status = Status.INFO
        f.summary = (
            f"perf_event_paranoid={paranoid or 'unknown'}; whether hardware counters work can only be tried on the node"
        )
        pmus = ctx.root.listdir("sys/bus/event_source/devices")
        if pmus:
            f.see("/sys/bus/event_source/devices", " ".join(pmus))
        return f
    f.see("perf_event_open", how)
    if works:
        f.summary = f"hardware counters work (perf_event_paranoid={paranoid})"
    else:
        f.status = Status.WARN if works is False else Status.UNKNOWN
        f.summary = "hardware counters unavailable; workloads record cycles and cache misses as unsupported"
        if "paranoid" in how:
            f.act("sysctl", "kernel.perf_event_paranoid", "1")
        elif works is False:
            f.requires = ["hardware"]
    return f


def kernel_config(ctx: AuditContext) -> Finding:
    config, source = ctx.config
    if not source:
        f = Finding("kernel.config", Status.UNKNOWN, "no kernel config found: build options cannot be checked")
        f.see("/proc/config.gz", ctx.root.read("proc/config.gz")[1]).see(*ctx.boot_config)
        f.act(
            "command", "modprobe configs", note="for /proc/config.gz; or install the kernel's /boot/config-$(uname -r)"
        )
        return f
    present = {k: config.get(k, "not set") for k in NOISE_OPTIONS}
    f = Finding("kernel.config", Status.OK, f"kernel config from {source}")
    f.see(source, ", ".join(f"{k.removeprefix('CONFIG_')}={v}" for k, v in present.items()))
    missing = [k for k in ("CONFIG_NO_HZ_FULL", "CONFIG_RCU_NOCB_CPU") if config.get(k) != "y"]
    if missing:
        f.status = Status.WARN
        f.summary += f". It lacks {', '.join(missing)}, so full isolation is not possible with this kernel"
        for option in missing:
            f.act("kernel-config", option, "y", ("reboot",))
    return f
