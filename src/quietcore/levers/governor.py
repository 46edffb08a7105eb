"""The cpufreq governor of a set of CPUs (Documentation/admin-guide/pm/
cpufreq.rst). Virtual machines usually have no cpufreq at all; then the
lever is unavailable and says why."""

from __future__ import annotations

from pathlib import Path

from quietcore.errors import CommandError
from quietcore.levers.journal import Journal

BASE = Path("/sys/devices/system/cpu")


class GovernorLever:
    name = "governor"

    def __init__(self, cpus: frozenset[int], base: Path = BASE) -> None:
        self.cpus = sorted(cpus)
        self.base = base

    def _file(self, cpu: int, leaf: str) -> Path:
        return self.base / f"cpu{cpu}" / "cpufreq" / leaf

    def available(self) -> tuple[bool, str]:
        missing = [c for c in self.cpus if not self._file(c, "scaling_governor").exists()]
        if missing:
            return False, f"no cpufreq on CPU {missing[0]} ({self._file(missing[0], 'scaling_governor')} is missing)"
        return True, ""

    def choices(self) -> list[str]:
        offered: set[str] | None = None
        for cpu in self.cpus:
            try:
                here = set(self._file(cpu, "scaling_available_governors").read_text().split())
            except OSError as exc:
                raise CommandError(f"cannot read the governors of CPU {cpu}: {exc.strerror}", exit_code=3) from exc
            offered = here if offered is None else offered & here
        return sorted(offered or ())

    def read(self) -> str:
        values = {self._file(c, "scaling_governor").read_text().strip() for c in self.cpus}
        return values.pop() if len(values) == 1 else "mixed"

    def apply(self, value: str, journal: Journal) -> None:
        offered = self.choices()
        for cpu in self.cpus:
            path = self._file(cpu, "scaling_governor")
            journal.choose(f"governor.cpu{cpu}", path, value, offered, path.read_text().strip())
