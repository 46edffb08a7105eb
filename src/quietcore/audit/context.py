"""Everything the checks read, read once, through the root; and the CPUs the
audit is about: the target CPUs for compute work, and the housekeeping CPUs
left for everything else."""

from __future__ import annotations

import os
from functools import cached_property

from quietcore.facts import cpus, kernel
from quietcore.facts.cmdline import Cmdline, parse_cmdline
from quietcore.facts.cpulist import format_cpulist, parse_cpulist
from quietcore.facts.devices import Device, read_devices
from quietcore.facts.irqs import Irq, read_irqs
from quietcore.facts.root import Root
from quietcore.facts.tasks import Task, read_tasks
from quietcore.facts.topology import Topology, read_topology


class AuditContext:
    def __init__(
        self,
        root: Root,
        targets: frozenset[int] | None = None,
        journal: list[dict[str, object]] | None = None,
        journal_source: str = "journal",
    ) -> None:
        self.root = root
        self._chosen = targets
        # quietcore's own changes still in force (store.journal.outstanding),
        # None when they are not known for this root.
        self.journal = journal
        self.journal_source = journal_source

    @cached_property
    def online(self) -> frozenset[int]:
        return cpus.online_cpus(self.root)

    @cached_property
    def cmdline(self) -> Cmdline:
        return parse_cmdline(self.root.read_text("proc/cmdline") or "")

    @cached_property
    def release(self) -> str | None:
        return kernel.read_identity(self.root).release

    @cached_property
    def version(self) -> str | None:
        return kernel.read_identity(self.root).version

    @cached_property
    def machine(self) -> str | None:
        """The kernel's architecture (x86_64, aarch64), None where the root does not say."""
        return kernel.read_identity(self.root).machine

    @property
    def may_be_x86(self) -> bool:
        """An x86 kernel, or one the root does not name: where x86's files and parameters may apply."""
        return self.machine in ("x86_64", "i686", None)

    @property
    def boot_config(self) -> tuple[str, str]:
        """Where the running kernel's config would be under /boot, and what was found there, as
        evidence: with no release known (a root without proc/sys/kernel/osrelease) the path is
        not one to look for ("/boot/config-None" was printed)."""
        if self.release:
            return f"/boot/config-{self.release}", "missing"
        return "/boot/config-$(uname -r)", "not looked for: the kernel release is unknown (/proc/sys/kernel/osrelease)"

    @cached_property
    def config(self) -> tuple[dict[str, str], str | None]:
        return kernel.read_config(self.root, self.release)

    @cached_property
    def topology(self) -> Topology:
        return read_topology(self.root)

    @cached_property
    def irqs(self) -> list[Irq]:
        return read_irqs(self.root)

    @cached_property
    def devices(self) -> list[Device]:
        return read_devices(self.root)

    @cached_property
    def tasks(self) -> list[Task]:
        return read_tasks(self.root)

    @cached_property
    def isolated(self) -> frozenset[int]:
        """Domain-isolated CPUs: sysfs, else the isolcpus= list."""
        found = cpus.isolated_cpus(self.root)
        return found or self._param_cpus("isolcpus")

    @cached_property
    def nohz_full(self) -> frozenset[int]:
        return cpus.nohz_full_cpus(self.root) or self._param_cpus("nohz_full")

    def _param_cpus(self, name: str) -> frozenset[int]:
        """The CPU list of a boot parameter, skipping isolcpus-style flags."""
        value = self.cmdline.get(name)
        if not value:
            return frozenset()
        items = [item for item in value.split(",") if item[:1].isdigit()]
        try:
            return parse_cpulist(",".join(items))
        except ValueError:
            return frozenset()

    @property
    def isolation_configured(self) -> bool:
        return bool(self.isolated or self.nohz_full)

    @cached_property
    def targets(self) -> frozenset[int]:
        if self._chosen is not None:
            return self._chosen
        if self.isolation_configured:
            return (self.isolated | self.nohz_full) & self.online
        return self.online

    @property
    def targets_source(self) -> str:
        if self._chosen is not None:
            return "--cpus"
        if self.isolation_configured:
            return "the isolated and nohz_full CPUs"
        return "all online CPUs (no isolation is configured)"

    @cached_property
    def housekeeping(self) -> frozenset[int]:
        return self.online - self.targets

    @cached_property
    def suggested_housekeeping(self) -> frozenset[int]:
        """What to keep for housekeeping when isolating: the current
        housekeeping CPUs, else the first CPU of each NUMA node with its SMT
        siblings."""
        if self.housekeeping:
            return self.housekeeping
        keep: set[int] = set()
        for node_cpus in self.topology.nodes.values():
            present = node_cpus & self.online
            if present:
                first = min(present)
                keep |= self.topology.siblings.get(first, frozenset({first}))
        return frozenset(keep) & self.online

    @cached_property
    def suggested_targets(self) -> frozenset[int]:
        return self.targets - self.suggested_housekeeping

    def lacks(self, option: str) -> bool:
        """The kernel is known to be built without `option` (its config says =n, or
        leaves it out): a boot parameter that needs it would be ignored."""
        config, source = self.config
        return config.get(option) == "n" or (source is not None and option not in config)

    def isolation_params(self) -> list[tuple[str, str]]:
        """The boot parameters that isolate the suggested targets, less those this
        kernel would ignore: nohz_full without CONFIG_NO_HZ_FULL, rcu_nocbs without
        CONFIG_RCU_NOCB_CPU (cpu.nohz_full says to build the kernel, and `tune plan`
        refuses what it cannot do; the advice said otherwise)."""
        t = format_cpulist(self.suggested_targets)
        h = format_cpulist(self.suggested_housekeeping)
        params = [("isolcpus", f"managed_irq,domain,{t}"), ("nohz_full", t), ("rcu_nocbs", t), ("irqaffinity", h)]
        needs = {"nohz_full": "CONFIG_NO_HZ_FULL", "rcu_nocbs": "CONFIG_RCU_NOCB_CPU"}
        return [(k, v) for k, v in params if not (k in needs and self.lacks(needs[k]))]

    def isolation_boot_params(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.isolation_params())

    @property
    def is_live_root(self) -> bool:
        return self.root.is_live

    @property
    def privileged(self) -> bool:
        return os.geteuid() == 0
