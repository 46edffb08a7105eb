"""One owner per node and crashes undone by any command, as a user meets
them: two `quietcore run thp` at once, and a `kill -9` in the middle of one.
THP is this node's real setting; the fixture puts it back whatever happens,
and every process started here is killed with its group at the end."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from quietcore.errors import CommandError
from quietcore.lock import NodeLock
from tests.conftest import CliRunner, as_nobody
from tests.integration.test_cli_interrupt import _probes_of
from tests.integration.test_cli_run import thp_guard, thp_now

__all__ = ["thp_guard"]  # the fixture, imported for the tests below


@pytest.fixture
def spawn(cli_env: dict[str, str]) -> Iterator[list[subprocess.Popen[str]]]:
    """Start `quietcore ARGS` in its own process group; all are killed after."""
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


#: Long enough for a second and a third to start while it holds THP; its
#: runs untraced, since what is tested is the lock.
THP_RUN = ("run", "thp", "--quick", "--reps", "4", "--warmup", "0", "--intrusions", "off")


def _start(procs: list[subprocess.Popen[str]], env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-m", "quietcore", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    procs.append(proc)
    return proc


def _wait_for_change(proc: subprocess.Popen[str], original: str) -> None:
    deadline = time.monotonic() + 30
    while thp_now() == original or not _probes_of(proc.pid):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "THP was never changed"
        time.sleep(0.02)


def _stop_while_changed(proc: subprocess.Popen[str], original: str) -> None:
    """Stop the run's process group at a moment THP is changed: the run
    puts THP back after every run, so between two looks it may be back."""
    for _ in range(50):
        _wait_for_change(proc, original)
        os.killpg(proc.pid, signal.SIGSTOP)
        if thp_now() != original:
            return
        os.killpg(proc.pid, signal.SIGCONT)
    pytest.fail("never caught the run with THP changed")


@pytest.mark.slow
def test_a_second_run_is_refused_naming_the_first_and_thp_ends_as_it_began(
    cli: CliRunner, cli_env: dict[str, str], spawn: list[subprocess.Popen[str]], thp_guard: str, journal_file: Path
) -> None:
    # GIVEN one `run thp` that has changed THP
    first = _start(spawn, cli_env, *THP_RUN, "--json")
    _wait_for_change(first, thp_guard)
    # WHEN a second starts without --wait THEN it exits 3 with one line naming the first
    second = cli("run", "thp", "--quick")
    assert second.returncode == 3, second.stderr
    (line,) = second.stderr.strip().splitlines()
    assert f"is in use by quietcore pid {first.pid} (`quietcore {' '.join(THP_RUN)} --json`" in line
    assert "--wait S" in line
    # AND a third that waits runs after the first, from the original value
    # (it only has to change THP after the first: one run of each mode)
    third = _start(spawn, cli_env, "run", "thp", "--quick", "--cells", "seq *", "--reps", "1", "--warmup", "0",
                   "--intrusions", "off", "--json", "--wait", "120")  # fmt: skip
    first_out, first_err = first.communicate(timeout=120)
    assert first.returncode == 0, first_err
    # (The first is also the thp experiment's run, measured once for both tests: THP never gives
    # no huge pages, always gives some.)
    cells = {row["cell"]: row for row in json.loads(first_out)["rows"]}
    assert cells["seq never"]["extra"]["huge pages"] == "0%"
    assert cells["seq always"]["extra"]["huge pages"] != "0%"
    _, err = third.communicate(timeout=120)
    assert third.returncode == 0, err
    assert f"waiting for lever thp, held by pid {first.pid}" in err
    assert thp_now() == thp_guard
    conn = sqlite3.connect(journal_file)
    olds = {old for (old,) in conn.execute("SELECT old_value FROM journal")}
    assert olds == {thp_guard}, "a run journaled another run's temporary value as the original"
    assert {state for (state,) in conn.execute("SELECT state FROM journal")} == {"reverted"}


@pytest.mark.slow
def test_kill_9_is_undone_by_the_next_command_whatever_it_is(
    cli: CliRunner, cli_env: dict[str, str], spawn: list[subprocess.Popen[str]], thp_guard: str
) -> None:
    run = _start(spawn, cli_env, "run", "thp", "--quick", "--reps", "50")
    _stop_while_changed(run, thp_guard)
    # WHILE it holds the change, the audit shows it and who will put it back
    audit = {f["id"]: f for f in json.loads(cli("audit", "--json").stdout)}["quietcore.journal"]
    assert audit["status"] == "warn" and "thp.enabled=" in audit["summary"], audit
    (action,) = audit["actions"]
    assert action["value"] == thp_guard and action["target"].endswith("transparent_hugepage/enabled")
    assert f"put back when pid {run.pid} ends" in action["note"]
    # WHEN it is killed with SIGKILL (its workload too), nothing of it can undo the change
    os.killpg(run.pid, signal.SIGKILL)
    run.wait()
    assert thp_now() != thp_guard
    # THEN a read-only command puts THP back first, and says so
    listed = cli("results", "list", "--verbose")  # the journal's housekeeping: said when asked
    assert listed.returncode == 0, listed.stderr
    said = " ".join(listed.stderr.split())  # its sentences, whatever the width wrapped
    assert f"quietcore: put back thp.enabled to '{thp_guard}'" in said
    assert f"pid {run.pid} (`quietcore run thp --quick --reps 50`) ended without undoing it" in said
    assert thp_now() == thp_guard
    after = {f["id"]: f for f in json.loads(cli("audit", "--json").stdout)}["quietcore.journal"]
    assert after["status"] == "ok" and after["actions"] == []


def test_the_lock_is_per_cpu(cli_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Two measurements of different CPUs do not wait for each other; the
    same CPU does, and the holder is named with its pid and command."""
    with NodeLock(cpus=[0], levers=["thp"]):
        other = subprocess.run(
            [sys.executable, "-c", "from quietcore.lock import NodeLock\nwith NodeLock(cpus=[1]): print('ok')"],
            env=cli_env, capture_output=True, text=True, check=False, timeout=60,
        )  # fmt: skip
        assert other.stdout.strip() == "ok", other.stderr
        busy = subprocess.run(
            [sys.executable, "-m", "quietcore", "noise", "--cpus", "0", "--duration", "0.1"],
            env=cli_env, capture_output=True, text=True, check=False, timeout=60,
        )  # fmt: skip
        assert busy.returncode == 3
        assert f"CPU 0 is in use by quietcore pid {os.getpid()}" in busy.stderr
        with pytest.raises(CommandError, match=r"lever thp is in use .* waited 0.2 s"):
            NodeLock(levers=["thp"], wait_s=0.2).__enter__()
    with NodeLock(cpus=[0], levers=["thp"]):
        pass  # released with the block: free again


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to nobody")
def test_another_user_shares_the_lock_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Root makes its state directory and a lock file per CPU there (root's,
    read-only for others); a normal user then locks a free CPU through
    root's file, and is told who holds a busy one. The user can write
    nothing there."""
    base = Path(tempfile.mkdtemp(prefix="qc-lock-"))  # not under pytest's root-only tmp
    base.chmod(0o755)
    monkeypatch.setenv("QUIETCORE_STATE_DIR", str(base / "quietcore"))
    with NodeLock(cpus=[0]):
        st = (base / "quietcore" / "lock-cpu-1").stat()
        assert (st.st_uid, st.st_mode & 0o777) == (0, 0o644)

        def work(answer: dict[str, Any]) -> None:  # as nobody: lock a free CPU, then the busy one
            with NodeLock(cpus=[1]):
                answer["free"] = "held"
            try:
                NodeLock(cpus=[0]).__enter__()
            except CommandError as exc:
                answer["busy"] = str(exc)
            try:
                (base / "quietcore" / "planted").write_text("x")
                answer["planted"] = "yes"
            except OSError:
                answer["planted"] = "no"

        answer = as_nobody(work)
    shutil.rmtree(base)
    assert answer.get("free") == "held", answer
    assert answer.get("planted") == "no", answer
    assert f"CPU 0 is in use by quietcore pid {os.getpid()}" in answer.get("busy", ""), answer
