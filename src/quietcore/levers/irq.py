"""Device IRQ affinity as one lever over many files: one action per IRQ
(/proc/irq/N/smp_affinity, Documentation/core-api/irq/irq-affinity.rst).
The kernel refuses some IRQs (managed IRQs answer EIO; per-CPU ones such as
the timer cannot move): each refusal is reported for its IRQ and the others
still move."""

from __future__ import annotations

from quietcore.actions import Action
from quietcore.facts.cpulist import format_cpulist, format_cpumask, parse_cpulist
from quietcore.facts.irqs import Irq, read_irqs
from quietcore.facts.root import Root
from quietcore.levers.journal import Journal, check_offered


class IrqAffinityLever:
    name = "irq_affinity"

    def __init__(self, root: Root | None = None, online: frozenset[int] | None = None) -> None:
        self.root = root or Root("/")
        self.online = online
        self.refused: list[str] = []  # the kernel's refusals from the last apply, one per IRQ

    def _irqs(self) -> list[Irq]:
        return [irq for irq in read_irqs(self.root) if irq.requested is not None]

    def available(self) -> tuple[bool, str]:
        if not self._irqs():
            return False, "no IRQ affinity files under /proc/irq"
        return True, ""

    def choices(self) -> list[str]:
        return []  # any non-empty list of online CPUs: see check()

    def validate(self, value: str) -> str | None:
        try:
            cpus = parse_cpulist(value)
        except ValueError:
            cpus = frozenset()
        if not cpus or (self.online is not None and not cpus <= self.online):
            return f"valid: CPUs within {format_cpulist(self.online)}" if self.online else "valid: a CPU list like 0-1"
        return None

    def read(self) -> str:
        values = {format_cpulist(irq.requested) for irq in self._irqs() if irq.requested is not None}
        return values.pop() if len(values) == 1 else "mixed"

    def plan(self, value: str) -> list[Action]:
        check_offered(self.name, value, self.validate(value))
        cpus = parse_cpulist(value)
        mask = format_cpumask(cpus)
        return [Action("irq-affinity", f"/proc/irq/{irq.number}/smp_affinity", mask, fixes="irq.affinity",
                       note=irq.device) for irq in self._irqs() if irq.requested != cpus]  # fmt: skip

    def apply(self, value: str, journal: Journal) -> None:
        self.refused = []
        for action in self.plan(value):
            refusal = journal.apply(self.name, action, self.root)
            if refusal:
                self.refused.append(f"IRQ {action.target.split('/')[3]} ({action.note}): {refusal}")
