"""Is this node virtualized, and by what? Each source is weak alone (DMI can
be absent, as on Firecracker; the cpuinfo flag only says "some hypervisor"),
so every one found is kept as evidence and the most specific names it.
In a VM, host noise (vCPU preemption, steal) dominates what quietcore
measures, and kernel-lever effects may be flattened: every result says so."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from quietcore.facts.cpus import parse_cpuinfo
from quietcore.facts.procstat import parse_proc_stat
from quietcore.facts.root import Root

# DMI sys_vendor / product_name substrings, checked in order.
_DMI = (
    ("QEMU", "KVM/QEMU"),
    ("KVM", "KVM"),
    ("Amazon EC2", "KVM (AWS Nitro)"),
    ("Google Compute Engine", "KVM (Google)"),
    ("VMware", "VMware"),
    ("innotek", "VirtualBox"),
    ("VirtualBox", "VirtualBox"),
    ("Virtual Machine", "Hyper-V"),
    ("Xen", "Xen"),
    ("Parallels", "Parallels"),
    ("OpenStack", "KVM (OpenStack)"),
    ("Bochs", "Bochs"),
    ("Firecracker", "KVM (Firecracker)"),
)
_CLOCKSOURCES = {
    "kvm-clock": "KVM",
    "hyperv_clocksource_tsc_page": "Hyper-V",
    "hyperv_clocksource_msr": "Hyper-V",
    "xen": "Xen",
}
#: CPUID leaf 0x40000000 vendor signatures, for the probe's reading.
CPUID_VENDORS = {
    "KVMKVMKVM": "KVM",
    "Microsoft Hv": "Hyper-V",
    "VMwareVMware": "VMware",
    "XenVMMXenVMM": "Xen",
    "TCGTCGTCGTCG": "QEMU (TCG emulation)",
    " lrpepyh  vr": "Parallels",
    "bhyve bhyve ": "bhyve",
    "ACRNACRNACRN": "ACRN",
    "VBoxVBoxVBox": "VirtualBox",
}


@dataclass(frozen=True)
class Virtualization:
    virtualized: bool
    hypervisor: str | None
    evidence: tuple[str, ...] = field(default=())
    container: str | None = None

    def warning(self) -> str | None:
        if not self.virtualized:
            return None
        name = self.hypervisor or "an unidentified hypervisor"
        return (f"This node is a virtual machine on {name}. The host's noise, its preemption of vCPUs and steal, "
                "weighs in every figure, and kernel levers may show less here than on bare metal.")  # fmt: skip


def _dmi(root: Root, evidence: list[str]) -> str | None:
    found = None
    for name in ("sys_vendor", "product_name"):
        value = root.read_line(f"sys/class/dmi/id/{name}")
        if not value:
            continue
        for needle, hypervisor in _DMI:
            if needle.lower() in value.lower():
                evidence.append(f"DMI {name} is {value!r} (/sys/class/dmi/id/{name})")
                found = found or hypervisor
    return found


def _container(root: Root) -> str | None:
    if root.exists(".dockerenv"):
        return "docker"
    if root.exists("run/.containerenv"):
        return "podman"
    return None


def detect(root: Root, cpuid_vendor: str | None = None) -> Virtualization:
    """Combine every source under `root`; `cpuid_vendor` is the probe's reading
    of CPUID 0x40000000 when the caller has one."""
    evidence: list[str] = []
    names: list[str] = []
    info = parse_cpuinfo(root.read_text("proc/cpuinfo") or "")
    if "hypervisor" in info.flags:
        evidence.append("CPU flag 'hypervisor' is set (/proc/cpuinfo)")
    if cpuid_vendor:
        name = CPUID_VENDORS.get(cpuid_vendor.strip("\0"), cpuid_vendor)
        evidence.append(f"CPUID 0x40000000 vendor is {cpuid_vendor!r}")
        names.append(name)
    dmi = _dmi(root, evidence)
    if dmi:
        names.append(dmi)
    hv_type = root.read_line("sys/hypervisor/type")
    if hv_type:
        evidence.append(f"/sys/hypervisor/type is {hv_type!r}")
        names.append(hv_type.capitalize() if hv_type == "xen" else hv_type)
    sources = (root.read_line("sys/devices/system/clocksource/clocksource0/available_clocksource") or "").split()
    for source in sources:
        if source in _CLOCKSOURCES:
            evidence.append(f"paravirtual clocksource {source!r} is available")
            names.append(_CLOCKSOURCES[source])
    steal = sum(t.ticks.get("steal", 0) for t in parse_proc_stat(root.read_text("proc/stat") or "").values())
    if steal > 0:
        evidence.append(f"steal time has been counted ({steal:,} ticks in /proc/stat)")
    return Virtualization(
        virtualized=bool(evidence),
        hypervisor=names[0] if names else None,
        evidence=tuple(evidence),
        container=_container(root),
    )


def label(virtualization: Mapping[str, Any]) -> str:
    """The facts' virtualization in a word: the hypervisor, "yes" if unnamed, or "none"."""
    if not virtualization.get("virtualized"):
        return "none"
    return str(virtualization.get("hypervisor") or "yes")
