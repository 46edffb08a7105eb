"""Knobs that are one file of the kernel's (sysfs, procfs, an IRQ's
affinity): what they share. The file is opened without following a link
at its end, must be a regular file, and must really lie under the root's
sys/ or proc/ once opened, whatever links the path went through."""

from __future__ import annotations

import os
import re
import shlex
import stat

from quietcore.facts.cpulist import format_cpulist, parse_cpumask
from quietcore.facts.fingerprint import selected
from quietcore.facts.root import Root
from quietcore.knobs.base import Kind, matching, within

MASK_FILES = ("smp_affinity", "cpumask", "default_smp_affinity")


def mask_file(target: str) -> bool:
    return target.endswith(MASK_FILES)


class FileKind(Kind):
    prefix = ""  # the tree the file must be in: "sys" or "proc"
    patterns: tuple[re.Pattern[str], ...] = ()

    def extra(self, root: Root) -> tuple[re.Pattern[str], ...]:
        """Patterns that depend on the node (where its cpuset is mounted)."""
        return ()

    def check(self, root: Root, target: str) -> str:
        return matching(target, self.name, (*self.patterns, *self.extra(root)), self.allowed)

    def _open(self, root: Root, target: str, flags: int) -> int:
        self.check(root, target)
        fd = os.open(root.resolve(target), flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(f"{target} is not a regular file")
            within(fd, root, self.prefix)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def read(self, root: Root, target: str) -> str | None:
        try:
            fd = self._open(root, target, os.O_RDONLY)
        except OSError:
            return None
        try:
            return os.read(fd, 1 << 16).decode(errors="replace").strip()
        except OSError:
            return None
        finally:
            os.close(fd)

    def write(self, root: Root, target: str, value: str) -> None:
        fd = self._open(root, target, os.O_WRONLY | os.O_TRUNC)  # a fixture tree's file; the kernel ignores it
        try:
            os.write(fd, value.encode())
        finally:
            os.close(fd)

    def restorable(self, root: Root, target: str) -> str | None:
        """A selector file's selected word (it takes one word back), else the content."""
        value = self.read(root, target)
        return selected(value) or value if value is not None and ("[" in value or "(" in value) else value

    def render(self, target: str, value: str) -> str:
        return f"echo {value} > {target}"

    def export_line(self, target: str, value: str, knob: str) -> str:
        refused = shlex.quote(f"refused: {knob} ({target})")
        return f"echo {shlex.quote(value)} > {shlex.quote(target)} || echo {refused} >&2"

    def shown(self, target: str, value: str | None) -> str | None:
        """Masks as CPU lists, selector files as the selected word."""
        if value is None:
            return None
        if mask_file(target):
            try:
                return format_cpulist(parse_cpumask(value))
            except ValueError:
                return value
        return selected(value) or value

    def same(self, target: str, now: str | None, wanted: str) -> bool:
        """Masks as CPU sets ("3" and "00000003" are one), selector files by
        the selected word."""
        if now is None:
            return False
        if mask_file(target):
            try:
                return parse_cpumask(now) == parse_cpumask(wanted)
            except ValueError:
                return False
        return (selected(now) or now) == wanted
