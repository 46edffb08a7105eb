"""Where the cpuset controller lives: a cgroup v1 hierarchy that has it,
else the v2 hierarchy when its root offers it (from the root's
/proc/mounts; a mount point with '..' in it is no mount of this root)."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from quietcore.facts.root import Root


@dataclass(frozen=True)
class Hierarchy:
    version: int  # 1 or 2
    mount: str  # the mount point, relative to the root ("sys/fs/cgroup/cpuset")
    prefix: str  # "cpuset." on v1 with the usual mount options, "" with noprefix

    def file(self, rel_dir: str, name: str) -> str:
        return f"{rel_dir}/{self.prefix}{name}"


def _mount_point(field: str) -> str | None:
    """The mount point relative to the root, or None when it is not a
    plain absolute path (a snapshot's mounts are input like any other)."""
    where = field.replace("\\040", " ")
    if not where.startswith("/") or posixpath.normpath(where) != where or ".." in where.split("/"):
        return None
    return where.lstrip("/")


def find(root: Root) -> Hierarchy | None:
    v2 = None
    for line in (root.read_text("proc/mounts") or "").splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        where, kind, options = _mount_point(fields[1]), fields[2], fields[3].split(",")
        if not where:
            continue
        if kind == "cgroup" and "cpuset" in options:
            return Hierarchy(1, where, "" if "noprefix" in options else "cpuset.")
        if kind == "cgroup2" and v2 is None:
            v2 = where
    if v2 is not None and "cpuset" in (root.read_line(f"{v2}/cgroup.controllers") or "").split():
        return Hierarchy(2, v2, "cpuset.")
    return None
