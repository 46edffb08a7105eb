"""`quietcore watch` on a real Slurm: the single-node Slurm of the tests, run as sites run it (proctrack/cgroup,
task/cgroup: each job a cgroup v1 cpuset of its CPUs), with the Epilog line docs/fleet.md gives. A job on CPU
1 beside a planted intruder there gets a record naming the intruder, its time within 10 % of what `intruders`
measures for the same plant, and a job on CPU 0 gets nothing of it; the Epilog puts the job's line in its
AdminComment."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import HAVE_SLURM, forked_main, slurm_node
from tests.integration.test_watch import CPUS, HIERARCHY, JOB_CPU, ROOT, _taken, planted

pytestmark = pytest.mark.skipif(
    not ROOT or not HAVE_SLURM or CPUS != [0, 1] or HIERARCHY is None or HIERARCHY.version != 1,
    reason="needs root, slurm-wlm, CPUs 0 and 1 and cgroup v1's cpuset hierarchy (Slurm's cgroup/v1 plugin)",
)


def _scontrol(env: dict[str, str], *args: str) -> str:
    return subprocess.run(["scontrol", *args], env=env, capture_output=True, text=True, check=False).stdout


def _state(env: dict[str, str], job: str) -> str:
    m = re.search(r"JobState=(\w+)", _scontrol(env, "show", "job", job))
    return m.group(1) if m else "GONE"


def _until(what: str, ok: object, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if callable(ok) and ok():
            return
        time.sleep(0.2)
    pytest.fail(f"{what} within {seconds:g} s")


def _sbatch(env: dict[str, str], where: Path, name: str, script: str) -> str:
    done = subprocess.run(["sbatch", "--parsable", "-n1", "-o", str(where / f"{name}.out"), "--wrap", script],
                          env=env, capture_output=True, text=True, check=True)  # fmt: skip
    return done.stdout.strip().split(";")[0]


def _record(env: dict[str, str], job: str) -> dict[str, object]:
    exported = forked_main(["results", "export", f"job_{job}"], env)
    assert exported.returncode == 0, exported.stderr
    (run,) = json.loads(exported.stdout)["runs"]
    assert run["kind"] == "job"
    return dict(run["analysis"])


def test_a_slurm_job_beside_a_planted_intruder_gets_its_record_by_the_epilog(tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = {**os.environ, "QUIETCORE_DB": str(tmp_path / "results.db"), "QUIETCORE_STATE_DIR": str(state)}
    log = tmp_path / "epilog.log"
    epilog = tmp_path / "epilog.sh"
    # slurmd runs an Epilog with a bare environment: what quietcore needs is exported in it, as fleet.md says
    exports = "".join(f"export {k}={shlex.quote(env[k])}\n" for k in ("QUIETCORE_DB", "QUIETCORE_STATE_DIR", "PATH"))
    slurm_conf = tmp_path / "slurm" / "slurm.conf"
    epilog.write_text(f"#!/bin/sh\n{exports}export SLURM_CONF={slurm_conf}\n"
                      f"{shlex.quote(sys.executable)} -m quietcore watch --ended \"$SLURM_JOB_ID\" --admin-comment "
                      f">> {log} 2>&1\nexit 0\n")  # fmt: skip
    epilog.chmod(0o755)
    (tmp_path / "slurm").mkdir()
    watcher = None
    with slurm_node(tmp_path / "slurm", [f"Epilog={epilog}"], cgroups=True) as slurm_env:
        env |= {"SLURM_CONF": slurm_env["SLURM_CONF"]}
        watcher = subprocess.Popen([sys.executable, "-m", "quietcore", "watch", "--interval", "30", "--json"],
                                   env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        jobs: list[str] = []
        try:
            _until("the watcher to start", lambda: (state / "watch.pid").exists(), 30)
            # GIVEN a job on CPU 0 (the first a job is given), then one on CPU 1 beside a plant there
            began = time.monotonic()
            jobs.append(_sbatch(env, tmp_path, "a", "sleep 60"))
            _until("job a to run", lambda: _state(env, jobs[0]) == "RUNNING")
            with planted(30):
                jobs.append(_sbatch(env, tmp_path, "b", "timeout 6 sh -c 'while :; do :; done'; exit 0"))
                # WHEN job b ends, and its Epilog asks the watcher for its record
                _until("job b to end", lambda: _state(env, jobs[1]) in ("COMPLETED", "GONE"), 60)
                _until("job b's Epilog", lambda: log.exists() and "Job" in log.read_text(), 30)
                # AND `intruders` measures the same plant on the same CPU
                measured = forked_main(["intruders", "--cpus", str(JOB_CPU), "--duration", "3", "--json"], env)
            subprocess.run(["scancel", jobs[0]], env=env, check=False)
            _until("job a to end", lambda: _state(env, jobs[0]) in ("COMPLETED", "CANCELLED", "GONE"), 60)
            lived = time.monotonic() - began
            _until("job a's Epilog", lambda: log.read_text().count("Job ") >= 2, 30)
            comment = _scontrol(env, "show", "job", jobs[1])
        finally:
            for job in jobs:
                subprocess.run(["scancel", job], env=env, check=False)
            # every job ended before the daemons stop: a slurmstepd left behind retries for minutes
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and any(_state(env, j) in ("RUNNING", "COMPLETING") for j in jobs):
                time.sleep(0.2)
            if watcher is not None:
                watcher.send_signal(signal.SIGTERM)
                out, err = watcher.communicate(timeout=30)
    assert watcher.returncode == 0, err
    assert measured.returncode == 0, measured.stderr
    said = log.read_text()
    # THEN job b's record holds its CPU, its own threads' time, and the plant at intruders' rate within 10 %
    b = _record(env, jobs[1])
    assert b["cpus"] == [JOB_CPU] and b["job_ns"] > 0.5 * b["traced_ns"], b  # type: ignore[operator]
    sources = b["sources"]
    assert isinstance(sources, list)
    mine = _taken(sources, "quietcore-probe") / float(b["traced_ns"])  # type: ignore[arg-type]
    (cpu,) = json.loads(measured.stdout)["cpus"]
    theirs = _taken(cpu["sources"], "quietcore-probe") / cpu["traced_ns"]
    assert theirs > 0.015 and abs(mine / theirs - 1) <= 0.10, (mine, theirs)
    plant = next(s for s in sources if s["name"] == "quietcore-probe")
    assert not plant["shared"], plant  # met alone: no other CPU had it
    # AND job a has CPU 0's time alone, none of CPU 1's: its CPU-seconds are at most the seconds it lived
    a = _record(env, jobs[0])
    assert a["cpus"] == [0] and 0.5 * lived < float(a["traced_ns"]) / 1e9 <= lived, (a, lived)  # type: ignore[arg-type]
    # AND of the plant only what ran on CPU 0: its start, before it pinned itself to CPU 1
    assert _taken(a["sources"], "quietcore-probe") < 0.02 * _taken(sources, "quietcore-probe"), a  # type: ignore[arg-type]
    # AND the Epilog printed each job's line
    assert f"Job {jobs[1]}, CPU {JOB_CPU}, as it ended: the OS took" in said, said
    # AND its AdminComment is set where slurmctld takes it; a finished job's needs slurmdbd, which this test's
    # Slurm has not: the Epilog says so in a line, and why
    if f"AdminComment=quietcore: Job {jobs[1]}" not in comment:
        assert f"warning: job {jobs[1]}'s AdminComment is not set (scontrol: " in said, said
        assert "sacctmgr, which needs the site's slurmdbd" in said, said
    # AND the watcher said each job as it ended, once
    ended = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert sorted(e["job"] for e in ended if e["ended"]) == sorted(jobs), ended
