"""The jobs `watch` finds, from trees laid out as Slurm's cgroup plugins lay them (v1's cpuset hierarchy,
v2's unified one), and the metrics it writes: hostile names stay text, a link is never followed, and a
job's series are bounded whatever its tasks call themselves."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from quietcore.facts import cgroup
from quietcore.facts.root import Root
from quietcore.watch import jobs, metrics
from quietcore.watch.charge import Charge, Source


def _tree(base: Path, version: int) -> tuple[Root, cgroup.Hierarchy]:
    if version == 1:
        mount, line = "sys/fs/cgroup/cpuset", "cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0"
    else:
        mount, line = "sys/fs/cgroup", "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0"
    (base / "proc").mkdir(parents=True)
    (base / "proc" / "mounts").write_text(line + "\n")
    top = base / mount
    top.mkdir(parents=True)
    if version == 2:
        (top / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
        (top / "cgroup.subtree_control").write_text("cpuset cpu\n")
    root = Root(base)
    h = cgroup.find(root)
    assert h is not None and h.version == version and h.mount == mount and h.prefix == "cpuset.", h
    return root, h


def _cg(where: Path, cpus: str, threads: list[int], version: int) -> None:
    where.mkdir(parents=True)
    (where / ("cpuset.effective_cpus" if version == 1 else "cpuset.cpus.effective")).write_text(cpus + "\n")
    (where / ("tasks" if version == 1 else "cgroup.threads")).write_text("".join(f"{t}\n" for t in threads))


@pytest.mark.parametrize("version", [1, 2])
def test_slurm_jobs_are_found_with_their_cpus_and_every_steps_threads(tmp_path: Path, version: int) -> None:
    root, h = _tree(tmp_path, version)
    base = tmp_path / h.mount / ("slurm/uid_1000" if version == 1 else "system.slice/slurmstepd.scope")
    _cg(base / "job_4711", "4-7", [], version)
    _cg(base / "job_4711" / "step_0", "4-7", [101, 102], version)
    _cg(base / "job_4711" / "step_batch", "4-7", [100], version)
    _cg(base / "job_12", "8-9", [200], version)
    found = {j.name: j for j in jobs.slurm_jobs(root, h)}
    assert set(found) == {"4711", "12"}
    assert found["4711"].cpus == frozenset({4, 5, 6, 7}) and found["4711"].threads == frozenset({100, 101, 102})
    assert found["12"].cpus == frozenset({8, 9}) and found["12"].threads == frozenset({200})


def test_names_links_and_junk_from_a_job_are_not_followed_or_believed(tmp_path: Path) -> None:
    root, h = _tree(tmp_path, 1)
    base = tmp_path / h.mount / "slurm" / "uid_0"
    _cg(base / "job_7", "1", [10], 1)
    # a job's own cgroups below it: a link out of the hierarchy, a thread list of junk, a name like a job's
    elsewhere = tmp_path / "elsewhere"
    _cg(elsewhere / "job_666", "0", [1], 1)
    os.symlink(elsewhere, base / "job_7" / "step_0")
    _cg(base / "job_7" / "step_1", "1", [], 1)
    (base / "job_7" / "step_1" / "tasks").write_text("11\n-3\nx\n99999999999999\n\x1b[2J\n")
    _cg(base / "job_8; rm -rf", "1", [12], 1)
    found = {j.name: j for j in jobs.slurm_jobs(root, h)}
    assert set(found) == {"7"}, found  # not the link's job_666, nor the name that is only like a job's
    assert found["7"].threads == frozenset({10, 11})


@pytest.mark.parametrize("given", ["../../etc", "/../x", "a/../../b", "", "a\x1bb", "missing/cg"])
def test_a_named_cgroup_must_be_a_plain_path_to_a_cgroup(tmp_path: Path, given: str) -> None:
    root, h = _tree(tmp_path, 2)
    _cg(tmp_path / h.mount / "system.slice" / "app.service", "2-3", [42], 2)
    with pytest.raises(ValueError, match="--cgroup"):
        jobs.named(root, h, given)
    app = jobs.named(root, h, "system.slice/app.service")
    assert app.cpus == frozenset({2, 3}) and app.threads == frozenset({42})


def test_the_metrics_are_bounded_and_a_tasks_name_stays_a_label() -> None:
    c = Charge("4711", frozenset({1}), 3, traced_ns=3e9, job_ns=2.9e9)
    for i in range(metrics.TOP + 20):
        c.sources[("task", f"t{i}")] = Source("task", f"t{i}", ns=1e6 * (i + 1))
    evil = 'x"} 1\nquietcore_watch_taken_seconds{jobid="root'
    c.sources[("task", evil)] = Source("task", evil, ns=1e9)
    page = metrics.text([c], 3.0, at=0.0).decode()
    taken = [line for line in page.splitlines() if line.startswith("quietcore_watch_taken_seconds{")]
    assert len(taken) == metrics.TOP + 1  # the TOP largest, and the rest as one "other"
    assert any('source="other"' in line for line in taken)
    assert all(line.count('jobid="') == 1 for line in taken), taken  # the name forged no series of its own
    assert not any('jobid="root' in line for line in taken)
