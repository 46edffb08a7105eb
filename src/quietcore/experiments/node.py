"""The facts about this node an experiment plan needs: where work may run,
which CPU is for work and which keeps housekeeping, SMT siblings, NUMA."""

from __future__ import annotations

import os
from dataclasses import dataclass

from quietcore.facts.cpus import isolated_cpus, smt_state
from quietcore.facts.root import Root
from quietcore.facts.topology import Topology, read_topology
from quietcore.options import usable_cpus


@dataclass(frozen=True)
class Node:
    topology: Topology
    allowed: frozenset[int]  # online CPUs this process may use
    isolated: frozenset[int]
    smt: str | None
    root_user: bool

    @property
    def work_cpu(self) -> int:
        """An isolated CPU if there is one, else the last CPU: CPU 0 usually
        carries the most housekeeping and device interrupts."""
        usable = self.isolated & self.allowed
        return max(usable) if usable else max(self.allowed)

    @property
    def housekeeping(self) -> frozenset[int]:
        return self.allowed - self.isolated

    def sibling_of(self, cpu: int) -> int | None:
        others = self.topology.siblings.get(cpu, frozenset({cpu})) - {cpu}
        usable = others & self.allowed
        return min(usable) if usable else None

    def other_core(self, cpu: int) -> int | None:
        """A CPU on another core (same package when there is one)."""
        core = self.topology.core_of.get(cpu)
        siblings = self.topology.siblings.get(cpu, frozenset({cpu}))
        package = self.topology.package_of.get(cpu)
        candidates = sorted(
            (c for c in self.allowed if c not in siblings and (core is None or self.topology.core_of.get(c) != core)),
            key=lambda c: (self.topology.package_of.get(c) != package, c),
        )
        return candidates[0] if candidates else None


def read_node(root: Root) -> Node:
    topology = read_topology(root)
    allowed = usable_cpus(topology.online) or topology.online
    return Node(topology, allowed, isolated_cpus(root), smt_state(root), os.geteuid() == 0)
