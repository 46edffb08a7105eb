"""Transparent huge pages: enabled and defrag (Documentation/admin-guide/mm/
transhuge.rst). Each file lists its choices with the current one in brackets;
the choices offered are read from it, never assumed."""

from __future__ import annotations

from quietcore.actions import Action
from quietcore.errors import CommandError
from quietcore.facts.fingerprint import selected
from quietcore.facts.root import Root
from quietcore.levers.journal import Journal, check_offered, offered_or_why

BASE = "sys/kernel/mm/transparent_hugepage"


class ThpLever:
    def __init__(self, knob: str, root: Root | None = None) -> None:
        if knob not in ("enabled", "defrag"):
            raise ValueError(f"unknown THP knob {knob!r}")
        self.root = root or Root("/")
        self.knob = knob
        self.rel = f"/{BASE}/{knob}"
        self.name = f"thp.{knob}"

    def available(self) -> tuple[bool, str]:
        if not self.root.exists(self.rel):
            return False, f"{self.rel} is missing: the kernel has no transparent huge pages"
        return True, ""

    def _text(self) -> str:
        text, why = self.root.read(self.rel)
        if text is None:
            raise CommandError(f"cannot read {self.rel}: {why}", exit_code=3)
        return text.strip()

    def read(self) -> str:
        value = selected(self._text())
        if value is None:
            raise CommandError(f"cannot tell the selected value of {self.rel}")
        return value

    def choices(self) -> list[str]:
        return self._text().replace("[", "").replace("]", "").split()

    def validate(self, value: str) -> str | None:
        return offered_or_why(value, self.choices())

    def plan(self, value: str) -> list[Action]:
        return [] if value == self.read() else [Action("sysfs", self.rel, value, fixes="mem.thp")]

    def apply(self, value: str, journal: Journal) -> None:
        check_offered(self.name, value, self.validate(value))
        current = self.read()
        for action in self.plan(value):
            journal.apply(self.name, action, self.root, current)
