"""CPU topology from sysfs (Documentation/ABI/stable/sysfs-devices-system-cpu):
packages, cores, SMT threads, NUMA nodes with their SLIT distances, and
hybrid core types (/sys/devices/cpu_core, cpu_atom on Intel hybrids)."""

from __future__ import annotations

from dataclasses import dataclass, field

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
    l3_of: dict[int, int] = field(default_factory=dict)  # the lowest CPU sharing its last-level (L3) cache

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
    return Topology(online, package_of, core_of, siblings, nodes, distances, types, _l3(root, online))


def _l3(root: Root, online: frozenset[int]) -> dict[int, int]:
    """Each CPU's L3 group, named by its lowest CPU: the CPUs of one cache
    (an AMD CCX of 8 cores, a whole Xeon socket). A CPU whose caches say no
    level 3 is in none."""
    out: dict[int, int] = {}
    for cpu in sorted(online):
        if cpu in out:
            continue
        for index in range(8):
            base = f"{CPU_SYS}/cpu{cpu}/cache/index{index}"
            if _int(root, f"{base}/level") == 3:
                shared = _list(root, f"{base}/shared_cpu_list") or frozenset({cpu})
                first = min(shared | {cpu})
                out.update({c: first for c in shared | {cpu} if c in online})
                break
    return out


#: The levels a node's CPUs group by, coarsest first, as `places` names them.
LEVELS = ("package", "node", "l3")
LEVEL_NAMES = {"package": "socket", "node": "NUMA node", "l3": "L3 group"}


def places(topology: Topology, cpus: frozenset[int]) -> dict[str, dict[str, int]]:
    """Where each of `cpus` sits, by level (LEVELS): {"package": {"12": 0}, ...}, as
    a run's context keeps it (not in the fingerprint: the node's configuration is
    the same whichever CPUs a run measured). A level the node does not say is left out."""
    out: dict[str, dict[str, int]] = {}
    node_of = {c: n for n, members in topology.nodes.items() for c in members}
    for level, where in (("package", topology.package_of), ("node", node_of), ("l3", topology.l3_of)):
        mine = {str(c): int(where[c]) for c in sorted(cpus) if c in where}
        if mine:
            out[level] = mine
    return out
