"""/proc/interrupts: a header of CPU columns, then one row per interrupt.

Rows look like (x86, then arm64 GIC):
     36:    0   47580  PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0
    LOC:  50877  61376   Local timer interrupts
     11:  12345  23456   GICv3  27 Level     arch_timer
   IPI0:   1234   2345       Rescheduling interrupts
    ERR:      0
The counts are followed by free text: for numbered IRQs the chip, hwirq and
trigger, then the device action names (which may hold spaces and commas);
for named rows a description. Offline CPUs have no column."""

from __future__ import annotations

import re
from dataclasses import dataclass

_TRIGGER = re.compile(r"\b(?:\d+-)?(?:edge|level|Edge|Level|fasteoi)\b")


@dataclass(frozen=True)
class IrqRow:
    name: str  # "36", "LOC", "IPI0"
    counts: dict[int, int]  # per CPU column
    description: str  # everything after the counts

    @property
    def numbered(self) -> bool:
        return self.name.isdigit()

    @property
    def device(self) -> str:
        """The action names of a numbered IRQ (e.g. "nvme0q1"), else the
        description. The chip/hwirq part ends at the first trigger word
        (kernel/irq/proc.c, show_interrupts); device names may hold spaces."""
        if not self.numbered:
            return self.description
        match = _TRIGGER.search(self.description)
        tail = self.description[match.end() :] if match else self.description
        return tail.strip() or self.description.strip()


def parse_interrupts(text: str) -> tuple[list[int], list[IrqRow]]:
    """The CPU numbers of the columns and the rows. Raises ValueError when
    there is no header (a truncated or foreign file)."""
    lines = text.splitlines()
    if not lines or not lines[0].split() or not all(t.startswith("CPU") for t in lines[0].split()):
        raise ValueError("no CPU header line")
    cpus = [int(t[3:]) for t in lines[0].split()]
    rows = []
    for line in lines[1:]:
        name, sep, rest = line.partition(":")
        if not sep or not name.strip():
            continue
        fields = rest.split()
        counts: dict[int, int] = {}
        for cpu, field in zip(cpus, fields, strict=False):  # fewer fields: a total-only row
            if not field.isdigit():
                break
            counts[cpu] = int(field)
        # Rows like "ERR: 0" or "MIS: 0" carry one total, not one per CPU.
        description = _after_fields(rest, len(counts))
        rows.append(IrqRow(name.strip(), counts, description))
    return cpus, rows


def _after_fields(rest: str, n: int) -> str:
    """The text after the first n whitespace-separated fields, spaces kept."""
    pos = 0
    for _ in range(n):
        match = re.compile(r"\s*\S+").match(rest, pos)
        if not match:
            return ""
        pos = match.end()
    return rest[pos:].strip()
