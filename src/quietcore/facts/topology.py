"""CPU topology from sysfs (Documentation/ABI/stable/sysfs-devices-system-cpu):
packages, cores, SMT threads, NUMA nodes with their SLIT distances, and
hybrid core types (/sys/devices/cpu_core, cpu_atom on Intel hybrids)."""

from __future__ import annotations

from dataclasses import dataclass

from quietcore.facts.cpulist import parse_cpulist
from quietcore.facts.cpus import CPU_SYS, online_cpus
from quietcore.facts.root import Root

NODE_SYS = "sys/devices/system/node"


@dataclass(frozen=True)
class Topology:
    online: frozenset[int]
    package_of: dict[int, int]
    core_of: dict[int, tuple[int, int]]  # (package, core id)
    siblings: dict[int, frozenset[int]]  # thread_siblings_list, self included
    nodes: dict[int, frozenset[int]]  # NUMA node -> CPUs
    distances: dict[int, list[int]]  # NUMA node -> SLIT row
    core_types: dict[str, frozenset[int]]  # "core"/"atom" on hybrids

    @property
    def packages(self) -> int:
        return len(set(self.package_of.values())) or 1

    @property
    def cores(self) -> int:
        return len(set(self.core_of.values())) or len(self.online)

    def node_of(self, cpu: int) -> int | None:
        return next((node for node, cpus in self.nodes.items() if cpu in cpus), None)


def _int(root: Root, rel: str) -> int | None:
    text = root.read_line(rel)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _list(root: Root, rel: str) -> frozenset[int] | None:
    text = root.read_line(rel)
    try:
        return parse_cpulist(text) if text is not None else None
    except ValueError:
        return None


def read_topology(root: Root) -> Topology:
    online = online_cpus(root)
    package_of, core_of, siblings = {}, {}, {}
    for cpu in sorted(online):
        base = f"{CPU_SYS}/cpu{cpu}/topology"
        package = _int(root, f"{base}/physical_package_id")
        core = _int(root, f"{base}/core_id")
        if package is not None:
            package_of[cpu] = package
        if core is not None:
            core_of[cpu] = (package or 0, core)
        siblings[cpu] = _list(root, f"{base}/thread_siblings_list") or frozenset({cpu})
    nodes, distances = {}, {}
    for node in sorted(_list(root, f"{NODE_SYS}/online") or ()):
        nodes[node] = _list(root, f"{NODE_SYS}/node{node}/cpulist") or frozenset()
        row = (root.read_line(f"{NODE_SYS}/node{node}/distance") or "").split()
        if all(v.isdigit() for v in row) and row:
            distances[node] = [int(v) for v in row]
    if not nodes:
        nodes = {0: online}  # a kernel without NUMA is one node
    types = {}
    for name in ("core", "atom"):
        cpus = _list(root, f"sys/devices/cpu_{name}/cpus")
        if cpus:
            types[name] = cpus
    return Topology(online, package_of, core_of, siblings, nodes, distances, types)
