"""Shared test helpers: fixture roots, a results database per test, and the
CLI run as a user runs it (a subprocess, `python -m quietcore`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOTS = Path(__file__).parent / "fixtures" / "roots"
KVM_ROOT = ROOTS / "firecracker-kvm-2cpu"
XEON_ROOT = ROOTS / "xeon-2s-tuned"
ARM_ROOT = ROOTS / "ampere-altra-arm64"
ALL_ROOTS = (KVM_ROOT, XEON_ROOT, ARM_ROOT)

CliRunner = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def db_file(tmp_path: Path) -> Path:
    return tmp_path / "results.db"


@pytest.fixture(autouse=True)
def state_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's node state directory (journal, locks, holder), apart
    from tmp_path, which tests inspect, and from the machine's own, so that
    tests never wait for a quietcore someone runs on the machine meanwhile.
    Made as quietcore would: only its owner may write it."""
    path = tmp_path_factory.mktemp("state") / "quietcore"
    path.mkdir(mode=0o755)
    monkeypatch.setenv("QUIETCORE_STATE_DIR", str(path))
    return path


# The suite's one `quietcore run sched --quick --seed 3` (about 30 s here) starts in the
# background when the session does, and the pure tests (tests/unit and tests/native, which run
# first) take about as long meanwhile: once collection is over (skip conditions read the CPUs),
# pytest is kept off the CPU the experiment measures (node.work_cpu, the last one) and niced.
# Before the first integration test, which may measure that CPU too, the experiment is waited
# for and pytest put back. Tests that change a node setting are integration tests for this.
_SCHED: dict[str, Any] = {}


def _sched_argv() -> list[str]:
    return [sys.executable, "-m", "quietcore", "run", "sched", "--quick", "--seed", "3", "--tag", "try=1", "--json"]


def pytest_sessionstart(session: pytest.Session) -> None:
    # Before collection (3 s here) when the whole suite runs: `python -m pytest`, as CI does.
    if not session.config.args or session.config.args == session.config.getini("testpaths"):
        _sched_start()


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    wanted = any("sched_quick" in getattr(item, "fixturenames", ()) for item in items)
    if wanted:
        if "proc" not in _SCHED:
            _sched_start()
        # Only now, once collected: skip conditions and parameters read the CPUs at collection.
        _sched_pin()
    elif "proc" in _SCHED:  # -k or -m left it out: stop it
        proc = _SCHED.pop("proc")
        proc.terminate()
        proc.communicate(timeout=30)


def _sched_start() -> None:
    base = Path(tempfile.mkdtemp(prefix="quietcore-sched-"))
    state = base / "state"
    state.mkdir(mode=0o755)
    env = {**os.environ, "QUIETCORE_DB": str(base / "results.db"), "QUIETCORE_STATE_DIR": str(state)}
    _SCHED["base"] = base
    _SCHED["proc"] = subprocess.Popen(_sched_argv(), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True)  # fmt: skip


def _sched_pin() -> None:
    cpus = os.sched_getaffinity(0)
    if len(cpus) > 1:
        _SCHED["affinity"] = cpus
        os.sched_setaffinity(0, cpus - {max(cpus)})
    if os.geteuid() == 0:
        # The experiment's own process shares those CPUs with pytest: let it go first (only
        # root can take the nice value back afterwards).
        _SCHED["nice"] = os.getpriority(os.PRIO_PROCESS, 0)
        os.setpriority(os.PRIO_PROCESS, 0, _SCHED["nice"] + 10)


def _sched_done() -> None:
    """Put pytest back on every CPU and wait for the background experiment."""
    if "affinity" in _SCHED:
        os.sched_setaffinity(0, _SCHED.pop("affinity"))
    if "nice" in _SCHED:
        os.setpriority(os.PRIO_PROCESS, 0, _SCHED.pop("nice"))
    proc = _SCHED.get("proc")
    if proc is not None and "out" not in _SCHED:
        out, err = proc.communicate(timeout=300)
        _SCHED.update(out=out, err=err, code=proc.returncode)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if "proc" in _SCHED and "out" not in _SCHED and "integration" in item.path.parts:
        _sched_done()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    proc = _SCHED.get("proc")
    if proc is not None and proc.poll() is None:  # interrupted before it was waited for
        proc.terminate()
        proc.wait(timeout=30)
    if "base" in _SCHED:
        shutil.rmtree(_SCHED["base"], ignore_errors=True)


@pytest.fixture(scope="session")
def sched_quick() -> tuple[Path, dict[str, Any]]:
    """The suite's one `quietcore run sched --quick --seed 3`: its database (the
    session tagged try=1) and the table it printed. The sched test reads the
    table; the report tests draw the session."""
    if "proc" not in _SCHED:  # not started at collection: run it now
        _sched_start()
    _sched_done()
    assert _SCHED["code"] == 0, _SCHED["err"]
    return _SCHED["base"] / "results.db", json.loads(_SCHED["out"])


@pytest.fixture(scope="session")
def lab_quick(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, subprocess.CompletedProcess[str]]:
    """One `quietcore lab --quick --report DIR` for the suite: its database, the
    report directory and what it printed. The lab test checks the session and
    the terminal; the browser test opens the report."""
    base = tmp_path_factory.mktemp("lab")
    path, out = base / "results.db", base / "lab-report"
    state = base / "state"
    state.mkdir(mode=0o755)
    env = {**os.environ, "QUIETCORE_DB": str(path), "QUIETCORE_STATE_DIR": str(state)}
    argv = [sys.executable, "-m", "quietcore", "lab", "--quick", "--report", str(out)]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    return path, out, proc


@pytest.fixture
def journal_file(state_dir: Path) -> Path:
    """The node journal the commands of this test write."""
    return state_dir / "journal.db"


@pytest.fixture
def cli_env(db_file: Path, state_dir: Path) -> dict[str, str]:
    """This test's database and state directory, for a `quietcore` subprocess."""
    return {**os.environ, "QUIETCORE_DB": str(db_file), "QUIETCORE_STATE_DIR": str(state_dir)}


@pytest.fixture
def cli(cli_env: dict[str, str]) -> CliRunner:
    """Run `python -m quietcore ARGS` with this test's database and lock directory."""

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        full_env = {**cli_env, **(env or {})}
        return subprocess.run(
            [sys.executable, "-m", "quietcore", *args],
            capture_output=True,
            text=True,
            env=full_env,
            timeout=timeout,
            check=False,
        )

    return run


def allowed_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


NOBODY = 65534


def as_nobody(work: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Run work(answer) in a forked child that dropped to user nobody, and
    return what it put in `answer` (an exception as answer["error"]). Only
    modules imported before the fork are usable: nobody cannot read this
    machine's Python, which lives under /root."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        answer: dict[str, Any] = {}
        try:
            os.close(read_end)
            os.setgroups([])
            os.setresgid(NOBODY, NOBODY, NOBODY)
            os.setresuid(NOBODY, NOBODY, NOBODY)
            work(answer)
        except BaseException as exc:  # reported to the parent, which fails the test
            answer["error"] = repr(exc)
        finally:
            os.write(write_end, json.dumps(answer).encode())
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        answer = json.loads(pipe.read())
    os.waitpid(pid, 0)
    return answer
