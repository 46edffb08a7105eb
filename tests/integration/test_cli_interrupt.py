"""Ctrl-C and SIGTERM: what was measured is stored, the session says
interrupted, the exit code is 130, and no probe is left spinning."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import allowed_cpus, as_terminal_job


def _noise_probe_of(pid: int) -> bool:
    """A `quietcore-probe noise` of `pid` runs (the calibration before it is another probe)."""
    for child in _probes_of(pid):
        try:
            if (Path("/proc") / child / "cmdline").read_bytes().split(b"\0")[1:2] == [b"noise"]:
                return True
        except OSError:
            continue
    return False


def _probes_of(pid: int) -> list[str]:
    """quietcore-probe processes whose parent is `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if "(quietcore-probe)" in stat and int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(entry.name)
    return found


@pytest.mark.slow
@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_interrupt_stores_partial_run(db_file: Path, how: str) -> None:
    env = {**os.environ, "QUIETCORE_DB": str(db_file)}
    cmd = [sys.executable, "-m", "quietcore", "lab", "--duration", "20"]
    # Its own process group, as a shell job in a terminal would have, and SIGINT as such a job takes it.
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=as_terminal_job)  # fmt: skip
    try:
        deadline = time.monotonic() + 15
        while not _noise_probe_of(proc.pid) or not db_file.exists():
            assert time.monotonic() < deadline, "the noise probe never started"
            time.sleep(0.02)
        time.sleep(0.8)  # into the first noise round: more than the 0.5 s checked below
        if how == "ctrl-c":
            os.killpg(proc.pid, signal.SIGINT)  # the terminal signals the whole group
        else:
            proc.send_signal(signal.SIGTERM)  # a batch system signals the main process
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err
    assert "interrupted: what was measured is stored as session 1" in err
    assert "Traceback" not in err
    assert _probes_of(proc.pid) == []
    conn = sqlite3.connect(db_file)
    assert conn.execute("SELECT status FROM sessions").fetchone()[0] == "interrupted"
    runs = conn.execute("SELECT kind, status, envelope FROM runs ORDER BY seq").fetchall()
    # calibrate finished, the first noise round was cut short, no second round ran
    assert [(k, s) for k, s, _ in runs] == [("calibrate", "complete"), ("noise", "interrupted")]
    cpus = json.loads(runs[1][2])["result"]["cpus"]
    assert 0.5e9 < cpus[0]["measured_ns"] < 10e9
    assert conn.execute("SELECT COUNT(*) FROM noise_cpu").fetchone()[0] == len(cpus) <= len(allowed_cpus())
