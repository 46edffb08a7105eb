"""One rule for a valid CPU, in Python and in C: a measurement may use the
CPUs this process may run on. Narrowed by its affinity (as a cgroup cpuset or
taskset narrows a job), quietcore and its native core refuse the same CPU in
the same words, before anything is measured."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from quietcore.probes.runner import probe_path
from tests.conftest import allowed_cpus

pytestmark = pytest.mark.skipif(len(allowed_cpus()) < 2, reason="narrowing the affinity needs two CPUs")


def _narrowed() -> None:
    os.sched_setaffinity(0, {min(allowed_cpus())})


def test_python_and_the_native_core_refuse_the_same_cpu(cli_env: dict[str, str]) -> None:
    first, other = min(allowed_cpus()), max(allowed_cpus())
    words = f"invalid --cpus {other}: not a CPU this process may run on (valid: {first})"
    probe = subprocess.run(
        [str(probe_path()), "noise", "--cpus", str(other), "--duration", "0.1"],
        capture_output=True, text=True, preexec_fn=_narrowed, timeout=30,
    )  # fmt: skip
    assert probe.returncode == 2
    assert words in probe.stderr
    command = subprocess.run(
        [sys.executable, "-m", "quietcore", "noise", "--cpus", str(other), "--duration", "0.1"],
        capture_output=True, text=True, preexec_fn=_narrowed, timeout=60, env=cli_env,
    )  # fmt: skip
    assert command.returncode == 2, command.stderr
    assert command.stderr.strip() == f"quietcore: error: {words}"
    # Both accept the CPU that is left.
    assert subprocess.run([str(probe_path()), "noise", "--cpus", str(first), "--duration", "0.05"],
                          capture_output=True, preexec_fn=_narrowed, timeout=30).returncode == 0  # fmt: skip
