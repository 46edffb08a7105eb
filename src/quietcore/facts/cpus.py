"""CPU facts from sysfs and /proc/cpuinfo."""

from __future__ import annotations

from dataclasses import dataclass

from quietcore.facts.cpulist import parse_cpulist
from quietcore.facts.root import Root

CPU_SYS = "sys/devices/system/cpu"


@dataclass(frozen=True)
class CpuInfo:
    model: str | None
    vendor: str | None
    flags: frozenset[str]


def parse_cpuinfo(text: str) -> CpuInfo:
    """The first processor's model, vendor and flags (x86 and arm64 keys)."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break  # the first processor block is enough
            continue
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    model = fields.get("model name") or fields.get("Model") or _arm_name(fields)
    vendor = fields.get("vendor_id") or fields.get("CPU implementer")
    flags = fields.get("flags") or fields.get("Features") or ""
    return CpuInfo(model=model, vendor=vendor, flags=frozenset(flags.split()))


#: (CPU implementer, CPU part) of common arm64 server cores (Arm TRMs' MIDR values).
_ARM_PARTS = {
    ("0x41", "0xd0c"): "ARM Neoverse-N1",
    ("0x41", "0xd40"): "ARM Neoverse-V1",
    ("0x41", "0xd49"): "ARM Neoverse-N2",
    ("0x41", "0xd4f"): "ARM Neoverse-V2",
    ("0x41", "0xd8e"): "ARM Neoverse-N3",
    ("0xc0", "0xac3"): "Ampere-1",
    ("0x48", "0xd01"): "HiSilicon Kunpeng-920",
}


def _arm_name(fields: dict[str, str]) -> str | None:
    implementer, part = fields.get("CPU implementer"), fields.get("CPU part")
    if implementer is None or part is None:
        return None
    return _ARM_PARTS.get((implementer, part), f"arm64 implementer {implementer} part {part}")


def _cpuset(root: Root, rel: str) -> frozenset[int] | None:
    text = root.read_line(rel)
    if text is None:
        return None
    try:
        return parse_cpulist(text)
    except ValueError:
        return None


def online_cpus(root: Root) -> frozenset[int]:
    """Online CPUs; a root without sysfs falls back to /proc/stat's cpuN lines."""
    cpus = _cpuset(root, f"{CPU_SYS}/online")
    if cpus:
        return cpus
    stat = root.read_text("proc/stat") or ""
    found = {int(line.split()[0][3:]) for line in stat.splitlines() if line[:3] == "cpu" and line[3:4].isdigit()}
    return frozenset(found)


def isolated_cpus(root: Root) -> frozenset[int]:
    return _cpuset(root, f"{CPU_SYS}/isolated") or frozenset()


def nohz_full_cpus(root: Root) -> frozenset[int]:
    return _cpuset(root, f"{CPU_SYS}/nohz_full") or frozenset()


def smt_state(root: Root) -> str | None:
    """on, off, forceoff, notsupported or notimplemented; None when unknown."""
    return root.read_line(f"{CPU_SYS}/smt/control")


def thread_siblings(root: Root, cpu: int) -> frozenset[int] | None:
    return _cpuset(root, f"{CPU_SYS}/cpu{cpu}/topology/thread_siblings_list")


def numa_nodes(root: Root) -> frozenset[int]:
    return _cpuset(root, "sys/devices/system/node/online") or frozenset()


def governors(root: Root, cpus: frozenset[int]) -> dict[int, str]:
    out: dict[int, str] = {}
    for cpu in sorted(cpus):
        gov = root.read_line(f"{CPU_SYS}/cpu{cpu}/cpufreq/scaling_governor")
        if gov:
            out[cpu] = gov
    return out
