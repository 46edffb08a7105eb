"""Which CPUs each rank of a GPU job should run on: `tune plan
--ranks-per-gpu N`. Each GPU gets N ranks, each rank a share of the target
CPUs near its GPU in whole cores (a rank that feeds a GPU from its own
NUMA node crosses no interconnect on its transfers); GPUs that share a
NUMA node share its target cores. The lines a job launcher takes follow:
Slurm's --gpu-bind=closest (each task the GPU nearest its CPUs) with
--cpu-bind=mask_cpu, one mask a task in rank order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from quietcore.errors import UsageError
from quietcore.facts.cpulist import counted, format_cpulist, format_cpumask
from quietcore.facts.devices import Device
from quietcore.facts.topology import Topology


@dataclass(frozen=True)
class Rank:
    rank: int
    gpu: int  # the GPU's index, in the node's order (NUMA node, then PCI address)
    device: Device
    cpus: frozenset[int]

    def to_json(self) -> dict[str, Any]:
        return {"rank": self.rank, "gpu": self.gpu, "device": self.device.name, "numa_node": self.device.numa_node,
                "cpus": format_cpulist(self.cpus)}  # fmt: skip


def _cores(cpus: frozenset[int], topo: Topology) -> list[frozenset[int]]:
    """The CPUs as whole cores (SMT siblings together), in CPU order."""
    out: list[frozenset[int]] = []
    seen: set[int] = set()
    for cpu in sorted(cpus):
        if cpu in seen:
            continue
        core = (topo.siblings.get(cpu, frozenset({cpu})) & cpus) or frozenset({cpu})
        seen |= core
        out.append(core)
    return out


def rank_map(devices: list[Device], topo: Topology, targets: frozenset[int], per_gpu: int) -> list[Rank]:
    gpus = sorted((d for d in devices if d.kind == "gpu"),
                  key=lambda d: (d.numa_node if d.numa_node is not None else -1, d.address))  # fmt: skip
    if not gpus:
        raise UsageError("--ranks-per-gpu: this node has no GPU (see the audit's device.locality)")
    groups: dict[frozenset[int], list[int]] = {}  # near target CPUs -> the GPUs that share them
    for k, d in enumerate(gpus):
        near = (d.local_cpus if d.local_cpus is not None else targets) & targets
        groups.setdefault(frozenset(near), []).append(k)
    ranks: list[Rank] = []
    for near, members in groups.items():
        cores = _cores(near, topo)
        slots = len(members) * per_gpu
        if len(cores) < slots:
            named = ("GPU " if len(members) == 1 else "GPUs ") + ", ".join(map(str, members))
            raise UsageError(f"invalid --ranks-per-gpu {per_gpu}: the {counted(len(cores), 'target core')} near "
                             f"{named} "
                             f"cannot give {slots} ranks a core each "
                             f"(valid: 1-{max(len(cores) // len(members), 1)})")  # fmt: skip
        # whole cores a rank, in order, the first len(cores) % slots ranks one core more
        base, extra = divmod(len(cores), slots)
        at = 0
        for j, k in enumerate(members):
            for r in range(per_gpu):
                size = base + (1 if j * per_gpu + r < extra else 0)
                ranks.append(Rank(0, k, gpus[k], frozenset().union(*cores[at : at + size])))
                at += size
    ranks.sort(key=lambda r: (r.gpu, min(r.cpus)))
    return [Rank(i, r.gpu, r.device, r.cpus) for i, r in enumerate(ranks)]


def launcher_lines(ranks: list[Rank]) -> dict[str, str]:
    masks = ",".join("0x" + format_cpumask(r.cpus).replace(",", "") for r in ranks)
    gpus = len({r.gpu for r in ranks})
    return {
        "slurm": f"srun --ntasks-per-node={len(ranks)} --gpus-per-node={gpus} --gpu-bind=closest "
        f"--cpu-bind=mask_cpu:{masks} ...",
    }
