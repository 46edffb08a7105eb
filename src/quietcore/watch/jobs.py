"""The jobs on a node, as the site defines them: a Slurm job by its cgroup (`job_<id>`, with its `step_*`
below it, on cgroup v1's cpuset hierarchy or on v2), or any cgroup the user names. A job is its CPUs (the
cgroup's effective cpuset) and its threads (every `tasks` or `cgroup.threads` file under it).

Every name and file here is another user's: a job's cgroup is made by slurmstepd, but what is under it is
the job's. Directories are walked without following links, to a bounded depth and count; a file is read as
a regular file of bounded size (facts.root); a cgroup a user names must be a plain relative path."""

from __future__ import annotations

import os
import posixpath
import re
import stat
from dataclasses import dataclass

from quietcore.facts import cgroup
from quietcore.facts.cpulist import parse_cpulist
from quietcore.facts.root import Root

#: A Slurm job's cgroup: job_4711 (v1: slurm/uid_1000/job_4711; v2: system.slice/slurmstepd.scope/job_4711)
_JOB = re.compile(r"job_(\d{1,12})")
#: How deep below the hierarchy's mount a job's cgroup is looked for, and how deep below it its threads are
JOB_DEPTH, THREAD_DEPTH = 5, 6
#: The most cgroups walked in one look: a node runs hundreds of jobs, each with a few steps
MAX_CGROUPS = 20_000


@dataclass(frozen=True)
class Job:
    name: str  # "4711" for a Slurm job, else the cgroup's path as given
    path: str  # the cgroup, relative to the root ("sys/fs/cgroup/cpuset/slurm/uid_0/job_4711")
    cpus: frozenset[int]
    threads: frozenset[int]
    ids: frozenset[int] = frozenset()  # its cgroups' ids, itself and those below it


def _dirs(root: Root, rel: str) -> list[str]:
    """The subdirectories of `rel`, links left out."""
    try:
        with os.scandir(root.resolve(rel)) as it:
            return sorted(e.name for e in it if e.is_dir(follow_symlinks=False))
    except OSError:
        return []


def _is_dir(root: Root, rel: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(root.resolve(rel)).st_mode)
    except OSError:
        return False


def _threads(root: Root, rel: str, h: cgroup.Hierarchy) -> tuple[frozenset[int], frozenset[int]]:
    """Every thread in the cgroup and the cgroups below it, and those cgroups' ids (a cgroup's id is its
    directory's inode, what the in-kernel account keys each task's time by: a thread that ran and ended
    between two looks is still known as the job's), in one walk."""
    found: set[int] = set()
    ids: set[int] = set()
    stack, walked = [(rel, 0)], 0
    while stack and walked < MAX_CGROUPS:
        here, depth = stack.pop()
        walked += 1
        try:
            ids.add(os.lstat(root.resolve(here)).st_ino)
        except OSError:
            continue
        text = root.read_text(f"{here}/{'tasks' if h.version == 1 else 'cgroup.threads'}") or ""
        found.update(int(t) for t in text.split() if t.isdigit() and len(t) <= 10)
        if depth < THREAD_DEPTH:
            stack.extend((f"{here}/{d}", depth + 1) for d in _dirs(root, here))
    return frozenset(found), frozenset(ids)


def _cpus(root: Root, rel: str, h: cgroup.Hierarchy) -> frozenset[int]:
    name = "effective_cpus" if h.version == 1 else "cpus.effective"
    text = root.read_line(h.file(rel, name)) or root.read_line(h.file(rel, "cpus")) or ""
    try:
        return frozenset(parse_cpulist(text))
    except ValueError:
        return frozenset()


def slurm_jobs(root: Root, h: cgroup.Hierarchy) -> list[Job]:
    """Every `job_<id>` cgroup of the hierarchy, to JOB_DEPTH below its mount."""
    jobs: list[Job] = []
    stack, walked = [(h.mount, 0)], 0
    while stack and walked < MAX_CGROUPS:
        here, depth = stack.pop()
        walked += 1
        for d in _dirs(root, here):
            if m := _JOB.fullmatch(d):
                path = f"{here}/{d}"
                jobs.append(Job(m.group(1), path, _cpus(root, path, h), *_threads(root, path, h)))
            elif depth < JOB_DEPTH:
                stack.append((f"{here}/{d}", depth + 1))
    return sorted(jobs, key=lambda j: (len(j.name), j.name))


def named(root: Root, h: cgroup.Hierarchy, given: str, option: str = "--cgroup") -> Job:
    """A cgroup the user names, relative to the hierarchy's mount ("system.slice/app.service"); ValueError
    with the option's words when it is no such cgroup."""
    rel = given.strip("/")
    if not rel or posixpath.normpath(rel) != rel or ".." in rel.split("/") or any(c < " " for c in rel):
        raise ValueError(f"invalid {option} {given!r} (valid: a cgroup's path below {'/' + h.mount}, "
                         "without '..')")  # fmt: skip
    path = f"{h.mount}/{rel}"
    if not _is_dir(root, path):
        raise ValueError(f"invalid {option} {given!r}: no such cgroup under {'/' + h.mount}")
    return Job(rel, path, _cpus(root, path, h), *_threads(root, path, h))


def slurm_roots(root: Root, h: cgroup.Hierarchy) -> list[str]:
    """Where Slurm makes its jobs' cgroups: v1's slurm* directories at the mount (slurm, slurm_<node>), v2's
    slurmstepd.scope: the few directories a watcher lists between two full looks."""
    if h.version == 1:
        return [f"{h.mount}/{d}" for d in _dirs(root, h.mount) if d.startswith("slurm")]
    return [f"{h.mount}/system.slice/{d}" for d in _dirs(root, f"{h.mount}/system.slice") if d.startswith("slurmstepd")]


def job_dirs(root: Root, under: list[str]) -> frozenset[str]:
    """The job_<id> directories in each of `under` and one level below it (v1's uid_<n>): names only, a
    listing or two each, for a watcher to see a job start or end between its full looks."""
    found: set[str] = set()
    for top in under:
        for d in _dirs(root, top):
            if _JOB.fullmatch(d):
                found.add(f"{top}/{d}")
            else:
                found.update(f"{top}/{d}/{e}" for e in _dirs(root, f"{top}/{d}") if _JOB.fullmatch(e))
    return frozenset(found)
