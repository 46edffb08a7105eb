"""GPUs and NICs: which CPUs are near each (its NUMA node), where its
interrupt vectors and their threaded handlers run, and NVIDIA's
persistence mode. A rank that feeds a GPU or polls a NIC pays every
interrupt on its CPU and, far from its device, the interconnect on every
transfer. On a node without GPUs or NICs these checks say nothing (None):
its audit is what it was."""

from __future__ import annotations

from quietcore.audit.context import AuditContext
from quietcore.audit.finding import Finding, Status
from quietcore.facts.cpulist import counted, cpus_phrase, format_cpumask
from quietcore.facts.cpulist import format_cpulist as fmt
from quietcore.facts.devices import Device, irq_threads, persistence
from quietcore.facts.irqs import Irq

SHOWN = 8  # devices listed one by one in a finding's evidence (a DGX has 8 GPUs and 4-8 HCAs)


def _node(d: Device) -> str:
    return f"NUMA node {d.numa_node}" if d.numa_node is not None else "NUMA node unknown"


def near(ctx: AuditContext, d: Device) -> frozenset[int] | None:
    """The online CPUs near a device: its local_cpulist, else its NUMA node's."""
    if d.local_cpus is not None:
        return d.local_cpus & ctx.online
    if d.numa_node is not None:
        return ctx.topology.nodes.get(d.numa_node, frozenset()) & ctx.online or None
    return None


def _groups(found: list[Device]) -> list[list[Device]]:
    """Devices alike (one kind and model) on one NUMA node, together: a DGX's 8 GPUs and 4 HCAs are 4 lines."""
    out: dict[tuple[int | None, str, str], list[Device]] = {}
    for d in found:
        out.setdefault((d.numa_node, d.kind, d.name.rsplit(" at ", 1)[0]), []).append(d)
    return list(out.values())


def _named(group: list[Device]) -> str:
    """ "NVIDIA H200 at 0000:00:06.0"; "4 NVIDIA H100 80GB HBM3 at 0000:18:00.0, 0000:2a:00.0, ..." for several."""
    if len(group) == 1:
        return group[0].name
    stem = group[0].name.rsplit(" at ", 1)[0]
    return f"{len(group)} {stem} at {', '.join(d.address for d in group)}"


def locality(ctx: AuditContext) -> Finding | None:
    found = ctx.devices
    if not found:
        return None
    gpus, nics = sum(d.kind == "gpu" for d in found), sum(d.kind == "nic" for d in found)
    f = Finding(
        "device.locality",
        Status.OK,
        (f"{counted(gpus, 'GPU')} and {counted(nics, 'NIC')}, each with CPUs near it to work on"),
    )
    far, no_housekeeping = [], []
    for group in _groups(found):
        d = group[0]
        cpus = near(ctx, d)
        where = f"/sys/bus/pci/devices/{d.address}/local_cpulist"
        if cpus is None:
            f.see(where, f"{_named(group)}: {_node(d)}, near CPUs unknown")
            continue
        work, keep = cpus & ctx.targets, cpus & ctx.housekeeping
        f.see(where, f"{_named(group)}: {_node(d)}, near CPUs {fmt(cpus)} (targets {fmt(work) or 'none'}, "
                     f"housekeeping {fmt(keep) or 'none'})")  # fmt: skip
        if not work and ctx.targets:
            far += group
        if not keep and ctx.housekeeping:
            no_housekeeping += group
    if far:
        f.status = Status.WARN
        f.summary = (f"no target CPU is near {', '.join(d.name for d in far[:SHOWN])}: a rank that feeds it from the "
                     "targets crosses the interconnect on every transfer")  # fmt: skip
        f.act(
            "note",
            "put target CPUs on each device's NUMA node (tune plan --ranks-per-gpu N maps ranks to them)",
            needs=(),
        )
    elif no_housekeeping:
        f.status = Status.WARN
        f.summary = (f"no housekeeping CPU is near {', '.join(d.name for d in no_housekeeping[:SHOWN])}: its IRQs "
                     "go to a far CPU or to a target")  # fmt: skip
        f.act("note", "keep a housekeeping core on each NUMA node that holds a device (tune plan does)", needs=())
    return f


def _where(ctx: AuditContext, d: Device, by_number: dict[int, Irq]) -> tuple[frozenset[int], frozenset[int], list[str]]:
    """Where a device's vectors are delivered, where their threaded handlers may run, and the handlers' names."""
    delivered: frozenset[int] = frozenset()
    for n in d.vectors:
        irq = by_number.get(n)
        delivered |= (irq.effective or frozenset()) if irq else frozenset()
    threads = irq_threads(ctx.tasks, d.vectors)
    ran: frozenset[int] = frozenset()
    for group in threads.values():
        for t in group:
            ran |= t.allowed
    names = sorted((t.comm for group in threads.values() for t in group), key=lambda c: int(c[4:].split("-")[0]))
    return delivered, ran, names


def irq_device(ctx: AuditContext) -> Finding | None:
    if not ctx.devices:
        return None
    found = [d for d in ctx.devices if d.vectors]
    if not found:
        return Finding("irq.device", Status.UNKNOWN, "no device's interrupt vectors could be read").see(
            "/sys/bus/pci/devices/*/msi_irqs", "none listed"
        )
    by_number = {irq.number: irq for irq in ctx.irqs}
    f = Finding("irq.device", Status.OK,
                f"the vectors of {counted(len(found), 'device')} and their threads stay off the targets")  # fmt: skip
    on_targets = []
    for group in _groups(found):
        vectors: list[int] = []
        delivered: frozenset[int] = frozenset()
        ran: frozenset[int] = frozenset()
        names: list[str] = []
        for d in group:
            a, b, c = _where(ctx, d, by_number)
            vectors += d.vectors
            delivered, ran, names = delivered | a, ran | b, names + c
            if (a | b) & ctx.targets and ctx.housekeeping:
                on_targets.append((d, (a | b) & ctx.targets))
        text = (f"{_named(group)}: {counted(len(vectors), 'vector')}, IRQs {fmt(frozenset(vectors))}, on "
                f"{cpus_phrase(delivered) if delivered else 'CPUs unknown'}")  # fmt: skip
        if names:
            shown = names[0] if len(names) == 1 else f"{names[0]} ... {names[-1]}"
            on = cpus_phrase(ran) if ran else "CPUs unknown"
            text += f"; {counted(len(names), 'threaded handler')}, {shown}, on {on}"
        f.see(f"/sys/bus/pci/devices/{group[0].address}/msi_irqs", text)
    if on_targets:
        f.status = Status.WARN
        f.summary = "; ".join(f"{d.name}: vectors or their threads on target CPUs {fmt(hit)}"
                              for d, hit in on_targets[:SHOWN])  # fmt: skip
        if len(on_targets) > SHOWN:
            f.summary += f"; {len(on_targets) - SHOWN} more"
        for d, _ in on_targets:
            cpus = near(ctx, d)
            keep = (cpus & ctx.housekeeping if cpus else frozenset()) or ctx.housekeeping
            for n in d.vectors:
                if n in by_number:
                    f.act("irq-affinity", f"/proc/irq/{n}/smp_affinity", format_cpumask(keep),
                          note=f"IRQ {n} ({d.name}), its thread with it")  # fmt: skip
        f.act("note", "a threaded handler follows its IRQ: the kernel moves irq/N-name with IRQ N's affinity", needs=())
    return f


def gpu_persistence(ctx: AuditContext) -> Finding | None:
    nvidia = [d for d in ctx.devices if d.kind == "gpu" and d.vendor == 0x10DE]
    if not nvidia:
        return None
    on, why = persistence(ctx.root, ctx.tasks)
    names = ", ".join(d.name for d in nvidia[:SHOWN])
    if on is None:
        f = Finding("gpu.persistence", Status.UNKNOWN, f"persistence mode of {names} not readable")
        f.see("/proc/*/comm", why)
        f.act(
            "note",
            "nvidia-smi -q | grep -i persistence; keep it on: nvidia-persistenced, or nvidia-smi -pm 1",
            needs=(),
        )
        return f
    if on:
        return Finding("gpu.persistence", Status.OK, f"persistence mode on for {names}").see("persistence", why)
    f = Finding("gpu.persistence", Status.WARN, f"persistence mode off for {names}: the driver tears each GPU down "
                "when no client holds it and sets it up again for the next job, on the node's CPUs")  # fmt: skip
    f.see("persistence", why)
    f.act("service", "nvidia-persistenced", "enable --now", note="or nvidia-smi -pm 1 (until reboot)")
    return f
