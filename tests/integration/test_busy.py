"""A measured CPU busy with a task is a task, not noise (issue 35): a CPU-bound
process pinned where quietcore measures. `noise` names it and does not read
its time slices as periodic sources; `check` answers UNKNOWN (exit 3), so
`--slurm-drain` never drains a node for the job it runs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import CliRunner, allowed_cpus

HOG = "import time\nend = time.monotonic() + 30\nwhile time.monotonic() < end:\n    pass\n"


@pytest.fixture
def hog() -> Iterator[tuple[int, int]]:
    """(pid, CPU) of a CPU-bound process pinned to the last CPU we may use; killed after."""
    cpu = allowed_cpus()[-1]
    proc = subprocess.Popen(["taskset", "-c", str(cpu), sys.executable, "-c", HOG])
    try:
        yield proc.pid, cpu
    finally:
        proc.kill()
        proc.wait()


def test_a_task_sharing_the_cpu_is_named_and_its_slices_are_no_source(
    cli: CliRunner, hog: tuple[int, int], db_file: Path
) -> None:
    pid, cpu = hog
    done = cli("noise", "--cpus", str(cpu), "--duration", "1.5", "--trace", "off", "--json")
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    (task,) = [t for t in said["busy"][str(cpu)] if t["pid"] == pid]
    comm = Path(sys.executable).name[:15]  # the kernel's comm: the command's name, 15 bytes
    assert 0.2 < task["share"] <= 1.0 and task["comm"] == comm
    (mine,) = said["cpus"]
    assert all(p["median_duration_ns"] < 500_000 for p in mine["periodic"]), mine["periodic"]
    shown = cli("results", "show", "1")
    said = " ".join(shown.stdout.split())  # its lines as one: a sentence wrapped to the width of a file
    assert f"CPU {cpu} was shared: {comm} (pid {pid}) ran " in said and "A task is work, not noise" in said
    # as slurmd's health check runs it: UNKNOWN, and Slurm is not asked to drain (no scontrol runs: the node
    # named does not exist, and asking for it would say so)
    drain = ["--slurm-drain", "--slurm-node", "no-such-node"] if shutil.which("scontrol") else []
    checked = cli("check", "--cpus", str(cpu), "--duration", "0.5", "--max-lost-ratio", "0.5", "--once", *drain)
    assert checked.returncode == 3, (checked.stdout, checked.stderr)
    assert checked.stdout.startswith(f"UNKNOWN CPU {cpu} was shared: {comm} (pid {pid}) ran ")
    assert "Slurm" not in checked.stdout + checked.stderr
