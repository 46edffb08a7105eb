"""The preemption model of a PREEMPT_DYNAMIC kernel, switched at run time
through debugfs (/sys/kernel/debug/sched/preempt: "none voluntary (full)
lazy", the running one in parentheses). A kernel built with one model, a
locked-down kernel, or a node without debugfs mounted cannot switch: the
lever says which."""

from __future__ import annotations

import errno

from quietcore.actions import Action
from quietcore.errors import CommandError
from quietcore.facts.root import Root
from quietcore.levers.journal import Journal, check_offered, offered_or_why

PATH = "/sys/kernel/debug/sched/preempt"


def parse(text: str) -> tuple[list[str], str | None]:
    """(choices, current) from the debugfs file's one line."""
    choices, current = [], None
    for word in text.split():
        if word.startswith("(") and word.endswith(")"):
            word = word[1:-1]
            current = word
        choices.append(word)
    return choices, current


class PreemptLever:
    name = "preempt"

    def __init__(self, root: Root | None = None) -> None:
        self.root = root or Root("/")
        self.path = self.root.resolve(PATH)

    def _text(self) -> str:
        return self.path.read_text()

    def available(self) -> tuple[bool, str]:
        debugfs = self.path.parent.parent
        if not debugfs.exists() or not any(debugfs.iterdir()):
            return (
                False,
                f"debugfs is not mounted at {debugfs} (mount -t debugfs none {debugfs})",
            )
        try:
            self._text()
        except FileNotFoundError:
            return False, f"{self.path} is missing: the kernel is not PREEMPT_DYNAMIC, its model is built in"
        except PermissionError as exc:
            if exc.errno == errno.EPERM:
                return False, "the kernel is locked down (see kernel_lockdown(7)): debugfs cannot be read or written"
            return False, f"cannot read {self.path}: needs root"
        except OSError as exc:
            return False, f"cannot read {self.path}: {exc.strerror}"
        return True, ""

    def choices(self) -> list[str]:
        return parse(self._text())[0]

    def read(self) -> str:
        current = parse(self._text())[1]
        if current is None:
            raise CommandError(f"cannot tell the running model from {self.path}")
        return current

    def validate(self, value: str) -> str | None:
        return offered_or_why(value, self.choices())

    def plan(self, value: str) -> list[Action]:
        return [] if value == self.read() else [Action("sysfs", PATH, value, fixes="sched.preempt")]

    def apply(self, value: str, journal: Journal) -> None:
        check_offered(self.name, value, self.validate(value))
        current = self.read()
        for action in self.plan(value):
            journal.apply(self.name, action, self.root, current)
