"""The cpufreq governor of a set of CPUs (Documentation/admin-guide/pm/
cpufreq.rst). Virtual machines usually have no cpufreq at all; then the
lever is unavailable and says why."""

from __future__ import annotations

from quietcore.actions import Action
from quietcore.errors import CommandError
from quietcore.facts.root import Root
from quietcore.levers.journal import Journal, check_offered, offered_or_why


class GovernorLever:
    name = "governor"

    def __init__(self, cpus: frozenset[int], root: Root | None = None) -> None:
        self.cpus = sorted(cpus)
        self.root = root or Root("/")

    def _file(self, cpu: int, leaf: str) -> str:
        return f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/{leaf}"

    def available(self) -> tuple[bool, str]:
        missing = [c for c in self.cpus if not self.root.exists(self._file(c, "scaling_governor"))]
        if missing:
            return False, f"no cpufreq on CPU {missing[0]} ({self._file(missing[0], 'scaling_governor')} is missing)"
        return True, ""

    def _line(self, cpu: int, leaf: str) -> str:
        text, why = self.root.read(self._file(cpu, leaf))
        if text is None:
            raise CommandError(f"cannot read {self._file(cpu, leaf)}: {why}", exit_code=3)
        return text.strip()

    def choices(self) -> list[str]:
        offered: set[str] | None = None
        for cpu in self.cpus:
            here = set(self._line(cpu, "scaling_available_governors").split())
            offered = here if offered is None else offered & here
        return sorted(offered or ())

    def read(self) -> str:
        values = {self._line(c, "scaling_governor") for c in self.cpus}
        return values.pop() if len(values) == 1 else "mixed"

    def validate(self, value: str) -> str | None:
        return offered_or_why(value, self.choices())

    def plan(self, value: str) -> list[Action]:
        check_offered(self.name, value, self.validate(value))
        return [Action("sysfs", self._file(c, "scaling_governor"), value, fixes="power.governor")
                for c in self.cpus if self._line(c, "scaling_governor") != value]  # fmt: skip

    def apply(self, value: str, journal: Journal) -> None:
        for action in self.plan(value):
            journal.apply(self.name, action, self.root, self.root.read_line(action.target))
