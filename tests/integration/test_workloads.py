"""The native workloads, run for real with small sizes: each reports its
metric and the measured region's figures, refuses options it does not take,
and leaves nothing behind (io's file)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from quietcore.probes.runner import probe_path
from tests.conftest import allowed_cpus

CPU = str(allowed_cpus()[-1])

CASES = {
    "compute": ["--iters", "2000000"],
    "memory": ["--size", "16M", "--passes", "1"],
    "cpuburn": ["--seconds", "0.05", "--threads", "2"],
    "memscan": ["--size", "8M", "--pattern", "random"],
    "stride": ["--size", "8M", "--stride", "16", "--accesses", "100000"],
    "stream": ["--size", "4M", "--passes", "2"],
    "numa": ["--cpu-node", "0", "--mem-node", "0", "--size", "8M", "--accesses", "10000"],
    "io": ["--size", "1M", "--mode", "fsync"],
    "mixed": ["--iters", "20", "--every", "10", "--checkpoint", "64K"],
    "matmul": ["--n", "64", "--threads", "1"],
}


def probe(*args: str) -> tuple[int, dict[str, Any], str]:
    proc = subprocess.run([str(probe_path()), *args], capture_output=True, text=True, timeout=60, check=False)
    return proc.returncode, json.loads(proc.stdout) if proc.stdout.strip() else {}, proc.stderr


@pytest.mark.parametrize("workload", sorted(CASES))
def test_workload_reports_metric_and_measured_region(workload: str) -> None:
    args = [*CASES[workload], "--cpus", CPU] if workload not in ("numa", "cpuburn") else CASES[workload]
    code, envelope, err = probe(workload, *args)
    assert code == 0, err
    result = envelope["result"]
    metric = result["metric"]
    assert metric["value"] > 0 and metric["better"] in ("lower", "higher") and metric["unit"]
    measured = result["measured"]
    assert measured["wall_ns"] > 0 and measured["cpu_ns"] > 0
    for name, value in measured["counters"].items():
        # Either a count or the reason there is none: never missing, never a failure.
        assert isinstance(value, int) or value.startswith("unsupported"), (name, value)
    if workload not in ("numa", "cpuburn", "matmul"):
        assert envelope["ran_on"]["cpus"] == [int(CPU)]


def test_memscan_equal_work_and_random_chase_is_slower() -> None:
    seq = probe("memscan", "--size", "32M", "--pattern", "seq", "--cpus", CPU)[1]["result"]
    rnd = probe("memscan", "--size", "32M", "--pattern", "random", "--cpus", CPU)[1]["result"]
    assert seq["accesses"] == rnd["accesses"] == 32 * 2**20 // 64
    # A dependent chase over 32 MiB misses the caches on every hop.
    assert rnd["metric"]["value"] > 3 * seq["metric"]["value"]


def test_memscan_reports_huge_pages_obtained() -> None:
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if not thp.exists() or "[never]" in thp.read_text():
        pytest.skip("transparent huge pages are off or missing")
    result = probe("memscan", "--size", "16M", "--hugepage")[1]["result"]
    assert result["madvise_hugepage"] is True
    assert result["anon_huge_kb"] > 0, "madvise(MADV_HUGEPAGE) on an aligned buffer got no huge page"


def test_cpuburn_two_threads_on_one_cpu_share_it() -> None:
    result = probe("cpuburn", "--seconds", "0.2", "--threads", "2", "--cpus", CPU)[1]["result"]
    assert result["threads_share_a_cpu"] is True
    assert {t["cpu_start"] for t in result["per_thread"]} == {int(CPU)}
    alone = probe("cpuburn", "--seconds", "0.2", "--cpus", CPU)[1]["result"]
    # Time-sharing one CPU: each thread does about half the work.
    assert 1.6 < result["metric"]["value"] / alone["metric"]["value"] < 2.4


def test_io_removes_its_file_and_says_what_it_measures(tmp_path: Path) -> None:
    code, envelope, err = probe("io", "--size", "2M", "--mode", "buffered", "--dir", str(tmp_path))
    assert code == 0, err
    assert list(tmp_path.iterdir()) == []
    assert "page cache" in envelope["result"]["measures"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["compute", "--size", "3"],
            "compute does not take --size (valid: --cpus, --policy, --priority, --force, --iters)",
        ),
        (["memscan", "--pattern", "zigzag"], "invalid --pattern 'zigzag' (valid: seq, stride, random)"),
        (["memscan", "--stride", "100"], "invalid --stride 100 (valid: a multiple of 64"),
        (["io", "--mode", "sync"], "invalid --mode 'sync' (valid: buffered, fsync, direct)"),
        (["io", "--dir", "/nonexistent/dir"], "invalid --dir '/nonexistent/dir'"),
        (["memory", "--size", "12X"], "invalid --size '12X'"),
        (["compute", "--policy", "fast"], "invalid --policy 'fast' (valid: other, batch, idle, fifo, rr, deadline)"),
        (["compute", "--policy", "deadline", "--cpus", "0"], "--policy deadline cannot be combined with --cpus"),
        (["numa", "--cpu-node", "77", "--mem-node", "0"], "invalid --cpu-node 77"),
    ],
)
def test_bad_options_are_one_line_exit_2(args: list[str], message: str) -> None:
    code, envelope, err = probe(*args)
    assert code == 2
    assert message in err and err.count("\n") == 1
    assert envelope["error"]["code"] == 2


def test_matmul_takes_the_shared_workload_options() -> None:
    # One parser for every workload: a policy factor reaches matmul too.
    code, envelope, err = probe("matmul", "--n", "64", "--threads", "1", "--cpus", CPU, "--policy", "batch")
    assert code == 0, err
    assert envelope["ran_on"]["policy"] == "SCHED_BATCH" and envelope["result"]["policy"] == "batch"
    code, _, err = probe("matmul", "--policy", "deadline", "--n", "64", "--threads", "2")
    assert code == 2 and "--policy deadline needs --threads 1" in err
