"""`cpuset-dir`: one of the shield's two cpusets, "present" or "absent".
Removing one first moves whatever tasks are still in it to its parent:
children born there since the shield went up are not in the journal."""

from __future__ import annotations

import contextlib
import os
import shlex

from quietcore.facts.root import Root
from quietcore.knobs.base import Kind, TargetError
from quietcore.knobs.cgroups import HOUSEKEEPING, SHIELD, cgroup_dir, mount, open_file, tasks_name


class CpusetDir(Kind):
    name = "cpuset-dir"
    allowed = f"MOUNT/{SHIELD} or MOUNT/{HOUSEKEEPING}, under the cpuset mount"

    def check(self, root: Root, target: str) -> str:
        cgroup_dir(root, target, self.name)
        base = "/" + mount(root, self.name).mount
        if target not in (f"{base}/{SHIELD}", f"{base}/{HOUSEKEEPING}"):
            raise TargetError(f"refused {self.name} target {target!r} (valid: {self.allowed})")
        return target

    def check_value(self, root: Root, target: str, value: str) -> None:
        if value not in ("present", "absent"):
            raise TargetError(f"refused {self.name} value {value!r} (valid: present, absent)")

    def read(self, root: Root, target: str) -> str:
        self.check(root, target)
        return "present" if os.path.isdir(root.resolve(target)) and not root.resolve(target).is_symlink() else "absent"

    def write(self, root: Root, target: str, value: str) -> None:
        """Make or remove it (removing an absent one does nothing); OSError as the kernel refuses."""
        self.check(root, target)
        self.check_value(root, target, value)
        path = root.resolve(target)
        if value == "present":
            path.mkdir(exist_ok=True)
            return
        if self.read(root, target) == "absent":
            return
        name = tasks_name(root, target)
        fd = open_file(root, target, name, os.O_RDONLY, self.name)
        with os.fdopen(fd) as tasks:
            tids = tasks.read().split()
        parent = target.rsplit("/", 1)[0]
        for tid in tids:
            with contextlib.suppress(ProcessLookupError):  # exited meanwhile
                out = open_file(root, parent, name, os.O_WRONLY, self.name)
                try:
                    os.write(out, tid.encode())
                finally:
                    os.close(out)
        path.rmdir()

    def gone(self, root: Root, target: str) -> bool:
        return False  # "absent" is a value a revert may write back

    def render(self, target: str, value: str) -> str:
        return f"mkdir {target}" if value == "present" else f"rmdir {target}"

    def export_line(self, target: str, value: str, knob: str) -> str:
        where = shlex.quote(target)
        if value == "present":
            return f"mkdir -p {where}"
        return (f"for t in $(cat {where}/tasks); do echo $t > {where}/../tasks; done 2>/dev/null; "
                f"rmdir {where} || echo {shlex.quote(f'refused: {knob}')} >&2")  # fmt: skip


KIND = CpusetDir()
