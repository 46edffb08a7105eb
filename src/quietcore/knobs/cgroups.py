"""What the three cpuset kinds share: the node's cpuset mount, and files
under it opened without following a link at their end and checked to lie
under the mount once opened."""

from __future__ import annotations

import os
import re

from quietcore.facts.cgroup import Hierarchy, find
from quietcore.facts.root import Root
from quietcore.knobs.base import TargetError, normal, within

SHIELD = "quietcore-shield"
HOUSEKEEPING = "quietcore-housekeeping"
_NAME = re.compile(r"[A-Za-z0-9_.@:+-]+")


def mount(root: Root, kind: str) -> Hierarchy:
    found = find(root)
    if found is None:
        raise TargetError(f"refused {kind}: this node has no cpuset controller mounted")
    return found


def cgroup_dir(root: Root, directory: str, kind: str) -> str:
    """A cgroup directory under the cpuset mount (any: a thread's old place
    may be a service's or a container's), as an absolute live path."""
    normal(directory, kind)
    base = "/" + mount(root, kind).mount
    rest = directory[len(base) :]
    if directory != base and not (directory.startswith(base + "/") and all(_NAME.fullmatch(p) for p in
                                                                            rest.strip("/").split("/"))):  # fmt: skip
        raise TargetError(f"refused {kind} directory {directory!r} (valid: a cgroup under {base})")
    return directory


def open_file(root: Root, directory: str, name: str, flags: int, kind: str) -> int:
    """`directory`/`name`, checked by `cgroup_dir` first."""
    cgroup_dir(root, directory, kind)
    fd = os.open(root.resolve(f"{directory}/{name}"), flags | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        within(fd, root, mount(root, kind).mount)
    except BaseException:
        os.close(fd)
        raise
    return fd


def tasks_name(root: Root, directory: str) -> str:
    return "tasks" if root.exists(f"{directory}/tasks") else "cgroup.threads"
