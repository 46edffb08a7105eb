"""Transparent huge pages: enabled and defrag (Documentation/admin-guide/mm/
transhuge.rst). Each file lists its choices with the current one in brackets;
the choices offered are read from it, never assumed."""

from __future__ import annotations

from pathlib import Path

from quietcore.errors import CommandError
from quietcore.facts.fingerprint import selected
from quietcore.levers.journal import Journal

BASE = Path("/sys/kernel/mm/transparent_hugepage")


class ThpLever:
    def __init__(self, knob: str, base: Path = BASE) -> None:
        if knob not in ("enabled", "defrag"):
            raise ValueError(f"unknown THP knob {knob!r}")
        self.knob = knob
        self.path = base / knob
        self.name = f"thp.{knob}"

    def available(self) -> tuple[bool, str]:
        if not self.path.exists():
            return False, f"{self.path} is missing: the kernel has no transparent huge pages"
        return True, ""

    def _text(self) -> str:
        try:
            return self.path.read_text().strip()
        except OSError as exc:
            raise CommandError(f"cannot read {self.path}: {exc.strerror}", exit_code=3) from exc

    def read(self) -> str:
        value = selected(self._text())
        if value is None:
            raise CommandError(f"cannot read {self.path}")
        return value

    def choices(self) -> list[str]:
        return self._text().replace("[", "").replace("]", "").split()

    def apply(self, value: str, journal: Journal) -> None:
        journal.choose(self.name, self.path, value, self.choices(), self.read())
