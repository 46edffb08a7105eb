"""What every knob kind answers: which targets it may touch (as patterns,
checked before any read or write, whoever asks: a plan file, crash
recovery, `tune revert`, a snapshot's journal), how to read and write one,
how a person reads its value, whether the kernel's value is the one
written, and the shell line that does the same. One module per kind
(quietcore.knobs.KINDS) says it for that kind."""

from __future__ import annotations

import os
import posixpath
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass

from quietcore.errors import UsageError
from quietcore.facts.root import Root
from quietcore.safe import plain


class TargetError(UsageError):
    """A target that its kind may not touch: refused before anything is read or written."""


class Gone(Exception):
    """The target no longer exists (a thread that exited, an IRQ that went away)."""


def normal(target: str, kind: str) -> str:
    """An absolute path with no '..', '.', '//' or trailing '/': else TargetError."""
    if not target.startswith("/") or posixpath.normpath(target) != target or "\0" in target:
        raise TargetError(f"refused {kind} target {target!r}: not a normalised absolute path")
    return target


def matching(target: str, kind: str, patterns: Iterable[re.Pattern[str]], allowed: str) -> str:
    normal(target, kind)
    if not any(p.fullmatch(target) for p in patterns):
        raise TargetError(f"refused {kind} target {target!r}: not one {kind} may write (valid: {allowed})")
    return target


def within(fd: int, root: Root, prefix: str) -> None:
    """The opened file really is under the root's `prefix` (sys, proc, dev):
    a link in the middle of the path (sysfs's own, say) may be followed,
    but it may not lead anywhere else."""
    real = os.readlink(f"/proc/self/fd/{fd}")
    base = os.path.join(os.path.realpath(root.path), prefix)
    if not real.startswith(base.rstrip("/") + "/") and real != base:
        raise OSError(f"{real} is outside {base}")


@dataclass(frozen=True)
class ThreadTarget:
    """A thread, by id and start time: a revert must never touch another
    thread that got the id since."""

    tid: int
    start: str

    @staticmethod
    def parse(target: str, kind: str) -> ThreadTarget:
        tid, sep, start = target.partition("@")
        if not (sep and tid.isdigit() and start.isdigit() and 0 < int(tid) < 2**22):
            raise TargetError(f"refused {kind} target {target!r} (valid: TID@START, a thread id and its start time)")
        return ThreadTarget(int(tid), start)

    def __str__(self) -> str:
        return f"{self.tid}@{self.start}"


class Kind(ABC):
    """A knob kind. Subclasses set `name` and `allowed` and define the abstract methods."""

    name = ""
    allowed = ""  # the targets it may touch, as a person reads them

    @abstractmethod
    def check(self, root: Root, target: str) -> str:
        """The target when this kind may touch it; else TargetError. Every
        kind defines its own: there is no default permission."""

    def check_value(self, root: Root, target: str, value: str) -> None:
        """A value this kind may write (a cpuset place names a directory too)."""
        if "\0" in value or "\n" in value.rstrip("\n"):
            raise TargetError(f"refused {self.name} value {value!r}: one line, no NUL")

    @abstractmethod
    def read(self, root: Root, target: str) -> str | None:
        """The value now; None when the target is gone."""

    @abstractmethod
    def write(self, root: Root, target: str, value: str) -> None:
        """Set it; OSError (or Gone) as the kernel refuses."""

    @abstractmethod
    def render(self, target: str, value: str) -> str:
        """The command a person would type."""

    @abstractmethod
    def export_line(self, target: str, value: str, knob: str) -> str:
        """One line of a POSIX shell script that does it, saying when refused."""

    def restorable(self, root: Root, target: str) -> str | None:
        """The value now, as a revert writes it back."""
        return self.read(root, target)

    def shown(self, target: str, value: str | None) -> str | None:
        return value

    def same(self, target: str, now: str | None, wanted: str) -> bool:
        return now == wanted

    def describe(self, target: str) -> str:
        """The knob as a person names it in a message."""

        return plain(target)

    def gone(self, root: Root, target: str) -> bool:
        """The target no longer exists: an entry for it is closed as gone."""
        return self.read(root, target) is None


class ThreadKind(Kind, ABC):
    """A kind whose target is a thread, "TID@START"."""

    def check(self, root: Root, target: str) -> str:
        ThreadTarget.parse(target, self.name)
        return target

    def describe(self, target: str) -> str:
        return f"thread {ThreadTarget.parse(target, self.name).tid}"
