"""`cgroup-controller`: the cpuset controller in the cgroup v2 root's
subtree_control, "on" or "off" (target "MOUNT/cgroup.subtree_control#cpuset"):
written as +cpuset or -cpuset, since writing back the old list would not
turn one off."""

from __future__ import annotations

import os
import shlex

from quietcore.facts.root import Root
from quietcore.knobs.base import Kind, TargetError
from quietcore.knobs.cgroups import mount, open_file


class CgroupController(Kind):
    name = "cgroup-controller"
    allowed = "MOUNT/cgroup.subtree_control#cpuset, at the cgroup v2 mount"

    def check(self, root: Root, target: str) -> str:
        if target != f"/{mount(root, self.name).mount}/cgroup.subtree_control#cpuset":
            raise TargetError(f"refused {self.name} target {target!r} (valid: {self.allowed})")
        return target

    def check_value(self, root: Root, target: str, value: str) -> None:
        if value not in ("on", "off"):
            raise TargetError(f"refused {self.name} value {value!r} (valid: on, off)")

    def _fd(self, root: Root, target: str, flags: int) -> int:
        self.check(root, target)
        return open_file(root, "/" + mount(root, self.name).mount, "cgroup.subtree_control", flags, self.name)

    def read(self, root: Root, target: str) -> str | None:
        try:
            fd = self._fd(root, target, os.O_RDONLY)
        except OSError:
            return None
        with os.fdopen(fd) as handle:
            return "on" if "cpuset" in handle.read().split() else "off"

    def write(self, root: Root, target: str, value: str) -> None:
        self.check_value(root, target, value)
        fd = self._fd(root, target, os.O_WRONLY)
        try:
            os.write(fd, f"{'+' if value == 'on' else '-'}cpuset".encode())
        finally:
            os.close(fd)

    def render(self, target: str, value: str) -> str:
        path, _, name = target.partition("#")
        return f"echo {'+' if value == 'on' else '-'}{name} > {path}"

    def export_line(self, target: str, value: str, knob: str) -> str:
        path, _, name = target.partition("#")
        refused = shlex.quote(f"refused: {knob}")
        return f"echo {'+' if value == 'on' else '-'}{name} > {shlex.quote(path)} || echo {refused} >&2"


KIND = CgroupController()
