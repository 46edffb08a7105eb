"""Per-IRQ affinity from /proc/irq/N/ (Documentation/core-api/irq/
irq-affinity.rst): smp_affinity is what was asked for, effective_affinity
where the interrupt really goes (one CPU on x86 APICs)."""

from __future__ import annotations

from dataclasses import dataclass

from quietcore.facts.cpulist import parse_cpulist, parse_cpumask
from quietcore.facts.interrupts import parse_interrupts
from quietcore.facts.root import Root


@dataclass(frozen=True)
class Irq:
    number: int
    device: str
    requested: frozenset[int] | None  # smp_affinity
    effective: frozenset[int] | None  # effective_affinity, else requested
    effective_source: str
    counts: dict[int, int]


def _cpus(root: Root, base: str, name: str) -> frozenset[int] | None:
    text = root.read_line(f"{base}/{name}_list")
    try:
        if text is not None:
            return parse_cpulist(text)
        mask = root.read_line(f"{base}/{name}")
        return parse_cpumask(mask) if mask is not None else None
    except ValueError:
        return None


def read_irqs(root: Root) -> list[Irq]:
    """Every numbered IRQ under /proc/irq, named from /proc/interrupts."""
    rows = {}
    try:
        _, parsed = parse_interrupts(root.read_text("proc/interrupts") or "")
        rows = {int(r.name): r for r in parsed if r.numbered}
    except ValueError:
        pass
    irqs = []
    for entry in root.listdir("proc/irq"):
        if not entry.isdigit():
            continue
        base = f"proc/irq/{entry}"
        requested = _cpus(root, base, "smp_affinity")
        effective = _cpus(root, base, "effective_affinity")
        source = f"/{base}/effective_affinity_list"
        if effective is None:
            effective, source = requested, f"/{base}/smp_affinity_list"
        row = rows.get(int(entry))
        device = row.device if row else (root.listdir(base) and _action_dir(root, base)) or "?"
        irqs.append(Irq(int(entry), device, requested, effective, source, row.counts if row else {}))
    return sorted(irqs, key=lambda irq: irq.number)


def _action_dir(root: Root, base: str) -> str:
    """/proc/irq/N/ holds one directory per action, named after the device."""
    known = {"affinity_hint", "effective_affinity", "effective_affinity_list", "node", "smp_affinity",
             "smp_affinity_list", "spurious"}  # fmt: skip
    names = [n for n in root.listdir(base) if n not in known]
    return ",".join(names) or "?"
