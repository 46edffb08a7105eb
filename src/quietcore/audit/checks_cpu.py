"""CPU isolation and topology: isolcpus, nohz_full, rcu_nocbs, housekeeping,
SMT, and the shape of the machine."""

from __future__ import annotations

from quietcore.audit.context import AuditContext
from quietcore.audit.finding import Finding, Status
from quietcore.facts.cpulist import counted, cpus_phrase
from quietcore.facts.cpulist import format_cpulist as fmt

ISOLATED = "/sys/devices/system/cpu/isolated"
NOHZ = "/sys/devices/system/cpu/nohz_full"


def targets(ctx: AuditContext) -> Finding:
    f = Finding("audit.targets", Status.INFO, f"auditing CPUs {fmt(ctx.targets)} as targets: {ctx.targets_source}")
    f.see("/sys/devices/system/cpu/online", fmt(ctx.online))
    if not ctx.isolation_configured:
        f.summary += "; choose them with --cpus"
    return f


def isolcpus(ctx: AuditContext) -> Finding:
    value = ctx.cmdline.get("isolcpus")
    if value is None:
        f = Finding("cpu.isolcpus", Status.WARN, "no isolcpus: the scheduler balances ordinary tasks onto every CPU")
        f.see("/proc/cmdline", "no isolcpus= parameter")
        _isolate(f, ctx)
        return f
    flags = {item for item in value.split(",") if item and not item[0].isdigit()}
    f = Finding("cpu.isolcpus", Status.OK, f"isolcpus={value}")
    f.see("/proc/cmdline", f"isolcpus={value}").see(ISOLATED, fmt(ctx.isolated) or "(empty)")
    missing = ctx.targets - ctx.isolated
    if missing:
        f.status = Status.WARN
        f.summary = f"target CPUs {fmt(missing)} are not in isolcpus"
        _isolate(f, ctx)
    elif "managed_irq" not in flags:
        f.status = Status.WARN
        f.summary = (
            f"isolcpus={value} lacks managed_irq: managed device IRQs (e.g. NVMe queues) still land on isolated CPUs"
        )
        f.act("boot-parameter", "isolcpus", f"managed_irq,domain,{fmt(ctx.isolated)}", ("root", "reboot"))
    if flags - {"domain", "managed_irq", "nohz"}:
        f.see("flags", f"unknown isolcpus flags {sorted(flags - {'domain', 'managed_irq', 'nohz'})}")
    return f


def nohz_full(ctx: AuditContext) -> Finding:
    config, source = ctx.config
    built = config.get("CONFIG_NO_HZ_FULL")
    f = Finding("cpu.nohz_full", Status.OK, f"nohz_full={fmt(ctx.nohz_full)}")
    param = ctx.cmdline.get("nohz_full")
    f.see("/proc/cmdline", f"nohz_full={param}" if param is not None else "no nohz_full= parameter")
    f.see(source or "kernel config", f"CONFIG_NO_HZ_FULL={built}" if built else "CONFIG_NO_HZ_FULL not known")
    if built == "n" or (source and built is None):
        f.status = Status.FAIL if param else Status.WARN
        f.summary = "the kernel is built without CONFIG_NO_HZ_FULL" + (": nohz_full= is ignored" if param else "")
        f.act("kernel-config", "CONFIG_NO_HZ_FULL", "y", ("reboot",), "most distribution kernels are")
        return f
    missing = ctx.targets - ctx.nohz_full
    if missing:
        f.status = Status.WARN
        f.summary = f"the scheduler tick still runs on target CPUs {fmt(missing)} (no nohz_full)"
        f.act("boot-parameter", "nohz_full", fmt(ctx.suggested_targets or missing), ("root", "reboot"))
    f.see(NOHZ, fmt(ctx.nohz_full) or "(empty)")
    return f


def rcu_nocbs(ctx: AuditContext) -> Finding:
    # nohz_full CPUs are also RCU callback-offloaded (kernel/rcu/tree_nocb.h,
    # rcu_init_nohz), so either parameter covers a CPU.
    offloaded = ctx._param_cpus("rcu_nocbs") | ctx.nohz_full
    config, source = ctx.config
    f = Finding("cpu.rcu_nocbs", Status.OK, f"RCU callbacks offloaded from {fmt(offloaded) or 'no CPU'}")
    f.see(
        "/proc/cmdline",
        f"rcu_nocbs={ctx.cmdline.get('rcu_nocbs')}" if ctx.cmdline.has("rcu_nocbs") else "no rcu_nocbs=",
    )
    if config.get("CONFIG_RCU_NOCB_CPU") == "n" or (source and "CONFIG_RCU_NOCB_CPU" not in config):
        f.status = Status.WARN
        f.summary = "the kernel is built without CONFIG_RCU_NOCB_CPU: RCU callbacks run on every CPU"
        f.see(source or "kernel config", "CONFIG_RCU_NOCB_CPU not set")
        f.act("kernel-config", "CONFIG_RCU_NOCB_CPU", "y", ("reboot",))
        return f
    missing = ctx.targets - offloaded
    if missing:
        f.status = Status.WARN
        f.summary = f"RCU callbacks still run on target CPUs {fmt(missing)}"
        f.act("boot-parameter", "rcu_nocbs", fmt(ctx.suggested_targets or missing), ("root", "reboot"))
    return f


def housekeeping(ctx: AuditContext) -> Finding:
    hk, topo = ctx.housekeeping, ctx.topology
    f = Finding("cpu.housekeeping", Status.OK, f"housekeeping CPUs: {fmt(hk) or 'none'}")
    f.see(ISOLATED, fmt(ctx.isolated) or "(empty)").see(NOHZ, fmt(ctx.nohz_full) or "(empty)")
    if not hk:
        f.status = Status.INFO
        f.summary = "every CPU is a target: housekeeping work shares them all"
        kept = ctx.suggested_housekeeping
        _isolate(f, ctx, f"{cpus_phrase(kept)} {'stays' if len(kept) == 1 else 'stay'} for housekeeping")
        return f
    for node, node_cpus in sorted(topo.nodes.items()):
        f.see(
            f"/sys/devices/system/node/node{node}/cpulist",
            f"{fmt(node_cpus)} (housekeeping {fmt(node_cpus & hk) or 'none'})",
        )
        if node_cpus & ctx.online and not node_cpus & hk:
            f.status = Status.FAIL
            f.summary = f"NUMA node {node} has no housekeeping CPU: its kernel work runs remote or on targets"
            f.act("note", f"keep at least one CPU of node {node} ({fmt(node_cpus)}) out of isolcpus/nohz_full",
                  needs=("root", "reboot"))  # fmt: skip
    shared = {cpu for cpu in hk if topo.siblings.get(cpu, frozenset()) & ctx.targets}
    if shared and f.status is Status.OK:
        f.status = Status.WARN
        f.summary = f"housekeeping CPUs {fmt(shared)} are SMT siblings of target CPUs: their work slows the targets"
        f.act(
            "boot-parameter",
            "nosmt",
            "",
            ("root", "reboot"),
            f"or isolate whole cores: add the siblings {fmt(shared)} to the targets",
        )
    return f


def smt(ctx: AuditContext) -> Finding:
    control = ctx.root.read_line("sys/devices/system/cpu/smt/control")
    multi = {c: s for c, s in ctx.topology.siblings.items() if len(s) > 1}
    if control is None and not multi:
        return Finding("cpu.smt", Status.INFO, "SMT state not exposed").see(
            "/sys/devices/system/cpu/smt/control", "missing"
        )
    f = Finding("cpu.smt", Status.OK, f"SMT {control or 'unknown'}")
    f.see("/sys/devices/system/cpu/smt/control", control or "missing")
    cores = sorted({tuple(sorted(s)) for c, s in multi.items() if c in ctx.targets})  # by number: 0,192 then 1,193
    if cores:
        f.status = Status.INFO
        more = f", {len(cores) - 8} more cores" if len(cores) > 8 else ""
        f.summary = f"SMT is on: target CPUs share cores ({', '.join(fmt(set(c)) for c in cores[:8])}{more})"
        f.act("sysfs", "/sys/devices/system/cpu/smt/control", "off", note="or place one compute thread per core")
    return f


def topology(ctx: AuditContext) -> Finding:
    t = ctx.topology
    threads = len(t.online)
    summary = (f"{counted(t.packages, 'package')}, {counted(t.cores, 'core')}, {counted(threads, 'thread')}, "
               f"{counted(len(t.nodes), 'NUMA node')}")  # fmt: skip
    f = Finding("cpu.topology", Status.INFO, summary)
    for node, row in sorted(t.distances.items()):
        f.see(f"/sys/devices/system/node/node{node}/distance", " ".join(map(str, row)))
    for kind, cpus in sorted(t.core_types.items()):
        f.see(f"/sys/devices/cpu_{kind}/cpus", fmt(cpus))
    if t.core_types:
        f.summary += ", hybrid: " + ", ".join(f"{k} {fmt(c)}" for k, c in sorted(t.core_types.items()))
    return f


#: What isolcpus's flags do, said where they are advised.
ISOLCPUS_FLAGS = ("its flag managed_irq keeps managed device IRQs off them, and domain takes them out of the "
                  "scheduler's load balancing")  # fmt: skip


def _isolate(f: Finding, ctx: AuditContext, note: str = "") -> None:
    """The boot parameters that isolate the suggested targets, as one edit, with
    what isolcpus's flags mean and what this kernel cannot do."""
    params = ctx.isolation_params()
    words = [ISOLCPUS_FLAGS]
    if ctx.lacks("CONFIG_NO_HZ_FULL"):
        words.append("nohz_full is left out: this kernel is built without CONFIG_NO_HZ_FULL, see cpu.nohz_full")
    if note:
        words.append(note)
    for i, (name, value) in enumerate(params):
        f.act("boot-parameter", name, value, ("root", "reboot"), ". ".join(words) if i == len(params) - 1 else "")
