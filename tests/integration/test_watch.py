"""`quietcore watch` as an administrator runs it: a job's cgroup laid out as Slurm's cgroup v1 plugin lays it
(cpuset/slurm/uid_0/job_4711/step_0), a task of the job spinning on its CPU, and a planted intruder on that
CPU. The intruder is charged to the job with the time `intruders` measures for the same plant, nothing from
the CPU it does not hold is, and the metrics file passes promtool."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import statistics  # noqa: F401  (as above)
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import quietcore.commands.watch  # noqa: F401  (loaded before as_nobody forks: nobody cannot read /root)
from quietcore import cli as quietcore_cli
from quietcore.facts import cgroup
from quietcore.facts.root import Root
from quietcore.probes.runner import probe_path
from tests.conftest import allowed_cpus, as_nobody, forked_main

ROOT = os.geteuid() == 0
CPUS = allowed_cpus()
HIERARCHY = cgroup.find(Root("/"))
PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(
    not ROOT or len(CPUS) < 2 or HIERARCHY is None or HIERARCHY.version != 1,
    reason="needs root, two CPUs and cgroup v1's cpuset hierarchy, where a job's cgroup is made as Slurm makes it",
)
JOB_CPU = CPUS[-1]


def _write(path: Path, value: str) -> None:
    path.write_text(value)


@contextlib.contextmanager
def slurm_job(job: str) -> Iterator[int]:
    """A cgroup as slurmstepd makes one (its own top directory, so as not to touch a real Slurm's), holding
    a spinning task of the job on JOB_CPU; removed, with its task, whatever the test does."""
    assert HIERARCHY is not None
    top = Path("/") / HIERARCHY.mount / f"qc-test-{uuid.uuid4().hex[:8]}"
    step = top / "uid_0" / f"job_{job}" / "step_0"
    made: list[Path] = []
    spinner = None
    try:
        for d in (top, top / "uid_0", top / "uid_0" / f"job_{job}", step):
            d.mkdir()
            made.append(d)
            _write(d / f"{HIERARCHY.prefix}mems", "0")
            _write(d / f"{HIERARCHY.prefix}cpus", f"{JOB_CPU}" if d != top else ",".join(map(str, CPUS)))
        spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        _write(step / "tasks", str(spinner.pid))
        yield spinner.pid
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
        for d in reversed(made):
            for _ in range(50):  # a killed task leaves its cgroup a moment later
                with contextlib.suppress(OSError):
                    d.rmdir()
                    break
                time.sleep(0.02)


@contextlib.contextmanager
def planted(seconds: float) -> Iterator[None]:
    """200 µs of work every 10 ms on the job's CPU, by quietcore's own disturber: a task of no job."""
    argv = [str(probe_path()), "disturb", "--cpus", str(JOB_CPU), "--period-us", "10000", "--burst-us", "200",
            "--duration", str(seconds)]  # fmt: skip
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stderr is not None and "running" in child.stderr.readline()
        yield
    finally:
        child.kill()
        child.wait()


def _taken(sources: list[dict[str, Any]], name: str) -> float:
    return sum(float(s["ns"]) for s in sources if s["name"] == name)


def test_a_planted_intruder_is_charged_to_the_job_as_intruders_measures_it(tmp_path: Path) -> None:
    env = {**os.environ, "QUIETCORE_DB": str(tmp_path / "results.db")}
    with slurm_job("4711") as pid, planted(12):
        # WHEN the node is watched for 3 s, then the same CPU by `intruders` for 3 s, the plant running through
        watched = forked_main(["watch", "--once", "3", "--json", "--prometheus", str(tmp_path)], env)
        assert watched.returncode == 0, watched.stderr
        measured = forked_main(["intruders", "--cpus", str(JOB_CPU), "--duration", "3", "--json"], env)
        assert measured.returncode == 0, measured.stderr
        assert Path(f"/proc/{pid}").exists()
    jobs = {j["job"]: j for j in json.loads(watched.stdout)["jobs"]}
    # THEN the job is found by its cgroup, with its CPU and its task
    job = jobs["4711"]
    assert job["cpus"] == [JOB_CPU] and job["threads"] >= 1, job
    # AND the plant is charged to it, its time a second within 10 % of what intruders measures
    mine = _taken(job["sources"], "quietcore-probe") / job["traced_ns"]
    (cpu,) = json.loads(measured.stdout)["cpus"]
    theirs = _taken(cpu["sources"], "quietcore-probe") / cpu["traced_ns"]
    assert theirs > 0.015 and abs(mine / theirs - 1) <= 0.10, (mine, theirs)
    # AND nothing from a CPU the job does not hold: one CPU's time traced, and the job's own task not an intruder
    assert 2.9e9 < job["traced_ns"] < 3.2e9, job["traced_ns"]
    assert job["job_ns"] > 0.5 * job["traced_ns"] and _taken(job["sources"], "python3") == 0, job
    # AND the CPUs no job holds are "no job"'s
    assert JOB_CPU not in jobs["no job"]["cpus"] and jobs["no job"]["cpus"], jobs["no job"]
    # AND the metrics file has the job's series, and promtool has nothing to say of it
    prom = (tmp_path / "quietcore-watch.prom").read_text()
    assert 'quietcore_watch_taken_seconds{job="4711",kind="task",source="quietcore-probe"}' in prom, prom
    if PROMTOOL is not None:
        lint = subprocess.run([PROMTOOL, "check", "metrics"], input=prom, capture_output=True, text=True, check=False)
        assert lint.returncode == 0 and not (lint.stdout + lint.stderr).strip(), lint.stdout + lint.stderr


def test_the_jobs_table_reads_as_a_person_reads_it(tmp_path: Path) -> None:
    env = {**os.environ, "QUIETCORE_DB": str(tmp_path / "results.db")}
    with slurm_job("4712"):
        shown = forked_main(["watch", "--once", "1"], env)
    assert shown.returncode == 0, shown.stderr
    rows = [line.split() for line in shown.stdout.splitlines()]
    assert any(r[:2] == ["4712", str(JOB_CPU)] for r in rows if r), shown.stdout
    assert any(r[:2] == ["no", "job"] for r in rows if r), shown.stdout


def test_a_cgroup_that_is_no_path_is_refused_before_anything_is_traced(tmp_path: Path) -> None:
    env = {**os.environ, "QUIETCORE_DB": str(tmp_path / "results.db")}
    for bad in ("../../etc", "nonexistent/cgroup", "a\nb"):
        done = forked_main(["watch", "--once", "1", "--cgroup", bad], env)
        assert done.returncode == 2 and "--cgroup" in done.stderr and len(done.stderr.strip().splitlines()) == 1, (
            bad, done.stderr)  # fmt: skip
    done = forked_main(["watch", "--once", "0"], env)
    assert done.returncode == 2 and "--once" in done.stderr, done.stderr


def test_a_user_without_root_gets_one_line_and_exit_3() -> None:
    """Tracing every CPU needs root: a user gets why, in a line, and nothing is traced."""

    def work(answer: dict[str, Any]) -> None:
        os.environ["QUIETCORE_DB"] = "/nonexistent/r.db"
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            answer["code"] = quietcore_cli.main(["watch", "--once", "1"])
        answer["out"], answer["err"] = out.getvalue(), err.getvalue()

    answer = as_nobody(work)
    assert answer.get("code") == 3 and not answer["out"], answer
    assert len(answer["err"].strip().splitlines()) == 1 and "root" in answer["err"], answer


def test_watching_until_stopped_says_each_jobs_account_as_it_ends(tmp_path: Path) -> None:
    """The service's way: a look a second, counters in the metrics file; a job that ends has its account said
    at the next look and leaves the file; SIGTERM, as systemd stops it, ends it with the rest's accounts."""
    env = {**os.environ, "QUIETCORE_DB": str(tmp_path / "results.db")}
    argv = [sys.executable, "-m", "quietcore", "watch", "--interval", "1", "--json", "--prometheus", str(tmp_path)]
    prom = tmp_path / "quietcore-watch.prom"
    watcher = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with slurm_job("4713"):
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and 'job="4713"' not in (prom.read_text() if prom.exists() else ""):
                time.sleep(0.2)
            during = prom.read_text()
        # the job ended: the next look says so, and its series leave the file
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and 'job="4713"' in prom.read_text():
            time.sleep(0.2)
        after = prom.read_text()
    finally:
        watcher.terminate()
        out, err = watcher.communicate(timeout=30)
    assert watcher.returncode == 0, err
    assert 'quietcore_watch_job_seconds_total{job="4713"}' in during, during
    assert 'job="4713"' not in after and 'job="no job"' in after, after
    said = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    ended = [s for s in said if s["job"] == "4713"]
    assert len(ended) == 1 and ended[0]["ended"] and ended[0]["cpus"] == [JOB_CPU] and ended[0]["job_ns"] > 0, said
    assert any(s["job"] == "no job" and not s["ended"] for s in said), said  # said as watching stopped
    if PROMTOOL is not None:
        lint = subprocess.run([PROMTOOL, "check", "metrics"], input=during, capture_output=True, text=True)
        assert lint.returncode == 0 and not (lint.stdout + lint.stderr).strip(), lint.stdout + lint.stderr
