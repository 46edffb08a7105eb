"""A real JMH benchmark (JMH 1.37 from Maven Central, built here with javac)
under `intruders --metric jmh`: its iterations are read as JMH prints them,
each with the JVM's own threads by name and what intruded on it. The unit
tests read recorded JMH output (tests/unit/test_metric.py); this one holds
quietcore to the real thing. .ci/run installs the JDK and the jars."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import CliRunner, allowed_cpus

ROOT = os.geteuid() == 0
TRACEFS = Path("/proc/filesystems").read_text().count("tracefs") > 0
CPU = max(allowed_cpus())
M2 = Path.home() / ".m2" / "repository"
JARS = [
    M2 / "org/openjdk/jmh/jmh-core/1.37/jmh-core-1.37.jar",
    M2 / "org/openjdk/jmh/jmh-generator-annprocess/1.37/jmh-generator-annprocess-1.37.jar",
    M2 / "net/sf/jopt-simple/jopt-simple/5.0.4/jopt-simple-5.0.4.jar",
    M2 / "org/apache/commons/commons-math3/3.6.1/commons-math3-3.6.1.jar",
]
SOURCE = Path(__file__).parent.parent / "fixtures" / "jmh" / "qc" / "Spin.java"
MISSING = [str(j) for j in JARS if not j.is_file()] + [t for t in ("javac", "java") if shutil.which(t) is None]


@pytest.mark.skipif(not ROOT or not TRACEFS, reason="tracefs needs root")
@pytest.mark.skipif(bool(MISSING), reason=f"JMH needs a JDK and JMH 1.37's jars (.ci/run installs them): {MISSING}")
def test_a_real_jmh_run_iteration_by_iteration(cli: CliRunner, tmp_path: Path) -> None:
    classes = tmp_path / "classes"
    path = os.pathsep.join(map(str, JARS))
    built = subprocess.run(["javac", "-cp", path, "-d", str(classes), str(SOURCE)], capture_output=True, text=True,
                           timeout=120, check=False)  # fmt: skip
    assert built.returncode == 0, built.stderr
    assert (classes / "META-INF" / "BenchmarkList").is_file()  # JMH's annotation processor ran
    java = ["java", "-cp", f"{classes}{os.pathsep}{path}", "org.openjdk.jmh.Main", "-f", "1", "-wi", "1", "-w", "100ms",
            "-i", "3", "-r", "200ms", "qc.Spin"]  # fmt: skip
    r = cli("intruders", "--cpus", str(CPU), "--metric", "jmh", "--json", "--", *java, timeout=180)
    assert r.returncode == 0, r.stderr
    figures = json.loads(r.stdout)["metric"]
    rows = figures["samples"]["score"]
    assert [(row["fork"], row["iteration"]) for row in rows] == [(1, 1), (1, 2), (1, 3)]
    assert {row["unit"] for row in rows} == {"ops/s"} and figures["verdict"]["better"] == "higher"
    assert all(row["value"] > 0 for row in rows)
    for row in rows:
        # an iteration of 200 ms, from the line before (JMH prints a line tens of ms after its iteration ends)
        assert 0.1 < row["end_s"] - row["start_s"] < 1.0, row
        threads = row["threads"]
        # the benchmark's own thread (JMH names it after the benchmark) holds most of the CPU
        worker = max(threads, key=threads.get)
        assert "jmh-worke" in worker or worker.startswith("qc.Spin"), threads
        # (most of what ran there: not a share of the window, of which the host can take half on a VM, as
        # a CI run's 91 ms of its 200 ms iteration, beside the JIT's 22 ms and little else)
        assert threads[worker] > 0.5 * sum(threads.values()), threads
    # and the JVM's own threads are named beside it somewhere in the run (the JIT compiles the benchmark)
    names = {name for row in rows for name in row["threads"]}
    assert len(names) >= 2, names
