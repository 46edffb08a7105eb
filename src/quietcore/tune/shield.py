"""The CPU shield as an experiment's lever: `tune`'s run-time part for the
CPUs given as the value (the cpusets, device IRQs, the default IRQ
affinity, the workqueue masks and every movable thread), applied as
temporary journal entries, so the cell after it, a crash or Ctrl-C puts
it all back. This is the in-boot isolation the `tickless` experiment
interleaves with its unshielded twin; nohz_full still needs a reboot and
a cross-boot `compare`."""

from __future__ import annotations

from quietcore.actions import Action
from quietcore.errors import UsageError
from quietcore.facts.root import Root
from quietcore.facts.topology import read_topology
from quietcore.levers import cpuset
from quietcore.levers.journal import Journal
from quietcore.tune.plan import choose, make_plan
from quietcore.tune.state import restorable


class ShieldLever:
    name = "shield"

    def __init__(self, root: Root | None = None) -> None:
        self.root = root or Root("/")
        self.refused: list[str] = []

    def available(self) -> tuple[bool, str]:
        if cpuset.find(self.root) is None:
            return False, "no cpuset controller (cgroup v1 cpuset or v2 with cpuset)"
        return True, ""

    def choices(self) -> list[str]:
        return []  # any CPU list that leaves housekeeping: see validate()

    def validate(self, value: str) -> str | None:
        try:
            choose(read_topology(self.root), targets=value)
        except UsageError as exc:
            return str(exc).removeprefix("invalid ")
        return None

    def read(self) -> str:
        h = cpuset.find(self.root)
        cpus = self.root.read_line(h.file(f"{h.mount}/{cpuset.SHIELD}", "cpus")) if h else None
        return cpus or "off"

    def plan(self, value: str) -> list[Action]:
        return make_plan(self.root, targets=value).actions

    def apply(self, value: str, journal: Journal) -> None:
        self.refused = []
        for action in self.plan(value):
            refusal = journal.apply(self.name, action, self.root, restorable(self.root, action.kind, action.target))
            if refusal:
                self.refused.append(f"{action.note or action.target}: {refusal}")
