"""`irq-affinity`: one IRQ's /proc/irq/N/smp_affinity. The kernel may
refuse it per IRQ (a managed IRQ: EIO before 6.12, EPERM since); an IRQ
whose directory is gone (a device removed) is gone."""

from __future__ import annotations

import re

from quietcore.facts.root import Root
from quietcore.knobs.files import FileKind


class IrqAffinity(FileKind):
    name = "irq-affinity"
    prefix = "proc"
    allowed = "/proc/irq/N/smp_affinity"
    patterns = (re.compile(r"/proc/irq/[0-9]+/smp_affinity"),)

    def gone(self, root: Root, target: str) -> bool:
        return not root.exists(target.rsplit("/", 1)[0])


KIND = IrqAffinity()
