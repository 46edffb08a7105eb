"""Shared test helpers: fixture roots, a results database per test, and the
CLI run as a user runs it: a process of its own, forked with quietcore
already imported (`cli`), or `python -m quietcore` itself (`cli_process`)."""

from __future__ import annotations

import contextlib
import gc
import io
import json
import locale
import os
import select
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar, NoReturn

import pytest

from quietcore.store import db, journal

ROOTS = Path(__file__).parent / "fixtures" / "roots"
KVM_ROOT = ROOTS / "firecracker-kvm-2cpu"
XEON_ROOT = ROOTS / "xeon-2s-tuned"
ARM_ROOT = ROOTS / "ampere-altra-arm64"
ALL_ROOTS = (KVM_ROOT, XEON_ROOT, ARM_ROOT)
#: A real 16-vCPU H200 GPU node (KVM guest, one NUMA node), as `quietcore snapshot` packed it: --root takes it whole
GPU_ROOT = ROOTS / "gpu-node-h200.tar.gz"

CliRunner = Callable[..., subprocess.CompletedProcess[str]]


TMPFS = Path("/dev/shm")

#: Two processes on a CPU hand a byte back and forth through pipes, on each CPU given: each hand-over a
#: wake-up and a switch, some 500,000 events a second a CPU, faster than a reader could keep up with by
#: reading at set times, and a burst that overflows a small trace buffer in a few ms.
PINGPONG = """
import os, sys
pairs = []
for cpu in sys.argv[1:]:
    pid = os.fork()
    if pid == 0:
        os.sched_setaffinity(0, {int(cpu)})
        a, b = os.pipe(); c, d = os.pipe()
        if os.fork() == 0:
            for _ in range(20000):
                os.read(a, 1); os.write(d, b"x")
            os._exit(0)
        for _ in range(20000):
            os.write(b, b"x"); os.read(c, 1)
        os.wait()
        os._exit(0)
    pairs.append(pid)
for pid in pairs:
    os.waitpid(pid, 0)
"""


def pytest_configure(config: pytest.Config) -> None:
    """The tests' files (databases, node state, reports) on tmpfs where there
    is one: the node's own state is on tmpfs too (/run/quietcore under
    systemd), and on this VM's disk the journal's synchronous commits (0.7 ms
    each on an idle disk, more under the suite's own writes) were about 9 s of
    a suite by py-spy's samples. --basetemp, or a TMPDIR of the user's, still wins."""
    free = config.option.basetemp is None and "TMPDIR" not in os.environ
    if free and db.fs_type(TMPFS) == "tmpfs" and os.access(TMPFS, os.W_OK):
        tempfile.tempdir = str(TMPFS)


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


@pytest.fixture(scope="session")
def sched_quick(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """One `quietcore run sched --quick --seed 3` over the cells a test reads
    (each workload's baseline and its three loaded cells: 16 of 24, about
    20 s here), measured once for the whole suite: its database (the session
    tagged try=1) and the table it printed. No warm-up runs: the tests read
    ratios of 2 against 1, and the experiment smoke test shows warm-ups.
    Untraced (--intrusions off): tracing every run cost it 4 s here, and
    tests/integration/test_intruders.py tests the intrusions of runs.
    The sched test reads the table; the report tests draw the session. It
    runs alone: run in the background beside the pure tests (tried, to save
    its 30 s), the sched test lost a claimed
    difference (an io or mixed cell read "no detectable difference") in 2
    suites of 8, one of them with another pytest beside it."""
    path = tmp_path_factory.mktemp("sched") / "results.db"
    state = tmp_path_factory.mktemp("sched-state") / "quietcore"
    state.mkdir(mode=0o755)
    env = {**os.environ, "QUIETCORE_DB": str(path), "QUIETCORE_STATE_DIR": str(state)}
    argv = [sys.executable, "-m", "quietcore", "run", "sched", "--quick", "--seed", "3", "--cells", "* other,* +load",
            "--warmup", "0", "--intrusions", "off", "--tag", "try=1", "--json"]  # fmt: skip
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    return path, json.loads(proc.stdout)


@pytest.fixture(scope="session")
def lab_quick(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, subprocess.CompletedProcess[str]]:
    """One `quietcore lab --quick --report DIR --prometheus DIR` for the suite: its
    database (the metrics file in `metrics` beside it), the report directory and what it printed.
    The lab test checks the session, the terminal and the metrics; the browser
    test opens the report."""
    base = tmp_path_factory.mktemp("lab")
    path, out = base / "results.db", base / "lab-report"
    state = base / "state"
    state.mkdir(mode=0o755)
    env = {**os.environ, "QUIETCORE_DB": str(path), "QUIETCORE_STATE_DIR": str(state)}
    (base / "metrics").mkdir()
    argv = [sys.executable, "-m", "quietcore", "lab", "--quick", "--report", str(out), "--prometheus",
            str(base / "metrics")]  # fmt: skip
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    return path, out, proc


@pytest.fixture
def conn(state_dir: Path) -> Iterator[sqlite3.Connection]:
    """The node journal of this test's state directory, open."""
    connection = journal.open_node()
    assert connection is not None
    yield connection
    connection.close()


@pytest.fixture
def journal_file(state_dir: Path) -> Path:
    """The node journal the commands of this test write."""
    return state_dir / "journal.db"


@pytest.fixture
def cli_env(db_file: Path, state_dir: Path) -> dict[str, str]:
    """This test's database and state directory, for a `quietcore` subprocess."""
    return {**os.environ, "QUIETCORE_DB": str(db_file), "QUIETCORE_STATE_DIR": str(state_dir)}


@pytest.fixture
def cli_process(cli_env: dict[str, str]) -> CliRunner:
    """`python -m quietcore ARGS`, the entry point a user runs, with this test's
    database and state directory: for what only a new interpreter shows
    (its start-up, `PYTHONPATH`, the working directory, a kill while it
    imports) and, once, for each command (tests/integration/test_cli_lab.py
    holds that list)."""

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return read_as_a_person(subprocess.run([sys.executable, "-m", "quietcore", *args], capture_output=True,
                                               text=True, env={**cli_env, **(env or {})}, timeout=timeout,
                                               check=False))  # fmt: skip

    return run


@pytest.fixture
def cli(cli_env: dict[str, str]) -> CliRunner:
    """`quietcore ARGS` as a process of its own, with this test's database and
    state directory: quietcore's main in a child forked from this process,
    where quietcore is already imported (`forked_main`)."""

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return forked_main(args, {**cli_env, **(env or {})}, timeout)

    return run


@pytest.fixture
def cli_main(cli_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    """`quietcore ARGS` run by its main in this process, with this test's database
    and state directory (or `env`'s): for the tables of bad input, refused before
    anything is measured or changed, and for commands that neither measure nor
    change the node (reading the store or a fixture root: `results`, `audit
    --root`, `tune plan`, `simulate --pattern`, `report`, `compare`), which it
    runs in about 0.05 s where a forked child (`cli`) takes 0.1 s and `python
    -m quietcore` 0.35-0.5 s here. What it returns is what `cli` returns;
    test_cli_noise runs a refusal of each command, and one reading command of
    each kind, all three ways and asks for the same output. What measures,
    changes the node or is signalled runs in a process of its own (`cli`)."""

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        from quietcore import cli as entry

        handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}  # main sets its own
        out, err = io.StringIO(), io.StringIO()
        with monkeypatch.context() as patch:
            patch.setattr(sys, "argv", ["quietcore", *args])  # stored with the session, as a process stores it
            for name, value in {**cli_env, **(env or {})}.items():
                if os.environ.get(name) != value:
                    patch.setenv(name, value)
            try:
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                    code = entry.main(list(args))
            except SystemExit as exc:  # argparse's --help, or a command that exits
                code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
            finally:
                for sig, handler in handlers.items():
                    signal.signal(sig, handler)
        return read_as_a_person(subprocess.CompletedProcess(["quietcore", *args], code, out.getvalue(),
                                                            err.getvalue()))  # fmt: skip

    return run


@pytest.fixture(autouse=True)
def no_forked_child_left() -> Iterator[None]:
    """A forked quietcore (`Forked`) that a failing test left running (a
    `run tickless` with the shield up, a `tune apply`) is killed, with its
    process group if it has one, before the next test starts."""
    yield
    for child in list(Forked.live):
        with contextlib.suppress(ProcessLookupError):
            if child.new_session:
                os.killpg(child.pid, signal.SIGKILL)
            else:
                os.kill(child.pid, signal.SIGKILL)
        child.wait()


class Forked:
    """quietcore's main in a child forked from the test: `quietcore ARGS` as a
    process of its own, as a user's quietcore is (its own pid, affinity,
    cgroup, signal dispositions, environment and `sys.argv`; what it changes
    of itself goes with it, and a kill -9 ends it as it ends any process),
    with stdin from /dev/null and stdout and stderr kept in files (and, with
    `new_session`, a process group of its own, as `start_new_session`). Only
    Python's start-up and quietcore's imports, 0.3-0.5 s a command here, are
    not paid again: every command module is imported once, here, first. What
    a new interpreter alone shows runs as one (`cli_process`)."""

    live: ClassVar[set[Forked]] = set()  # started and not yet waited for

    def __init__(self, args: Sequence[str], env: dict[str, str], new_session: bool = False) -> None:
        from quietcore import cli as entry
        from quietcore.commands import COMMANDS, common, load

        assert common  # what main imports for every command
        for name in COMMANDS:
            load(name)
        self.args = ["quietcore", *args]
        self.new_session = new_session
        self.returncode: int | None = None
        self._out = tempfile.TemporaryFile()  # noqa: SIM115 (closed by communicate)
        self._err = tempfile.TemporaryFile()  # noqa: SIM115
        self.pid = os.fork()
        if self.pid == 0:
            _child(entry.main, list(args), env, self._out.fileno(), self._err.fileno(), new_session)
        Forked.live.add(self)

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
                Forked.live.discard(self)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Its exit code (negative for a signal); killed, and TimeoutExpired
        raised, if it runs longer than `timeout`."""
        if self.returncode is None:
            pidfd = os.pidfd_open(self.pid)
            try:
                if not select.select([pidfd], [], [], timeout)[0]:
                    os.kill(self.pid, signal.SIGKILL)
                    self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
                    Forked.live.discard(self)
                    raise subprocess.TimeoutExpired(self.args, timeout or 0)
            finally:
                os.close(pidfd)
            self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
            Forked.live.discard(self)
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Waits, then what it printed, decoded as `subprocess.run(text=True)` does."""
        self.wait(timeout)
        texts = []
        for f in (self._out, self._err):
            f.seek(0)
            with io.TextIOWrapper(f, encoding=locale.getpreferredencoding(False)) as text:
                texts.append(text.read())
        return texts[0], texts[1]


def forked_main(args: Sequence[str], env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`quietcore ARGS` in a forked child (Forked), waited for as
    `subprocess.run` waits for `python -m quietcore`."""
    child = Forked(args, env)
    out, err = child.communicate(timeout)
    return read_as_a_person(subprocess.CompletedProcess(child.args, child.wait(), out, err))


def screen_table(text: str, title: str) -> list[list[str]]:
    """The rows of the table printed under the line `title` (report.screen's style: a header, a rule, then
    rows, cells two spaces apart or more), a cell's wrapped lines joined to it: empty when there is none."""
    import re

    lines = text.splitlines()
    at = next((i for i, line in enumerate(lines) if line.strip().startswith(title)), None)
    if at is None:
        return []
    rule = next((i for i in range(at + 1, min(at + 6, len(lines))) if lines[i].startswith("─")), None)
    if rule is None:
        return []
    head = lines[rule - 1]
    starts = [m.start() for m in re.finditer(r"(?:(?<=  )|^)\S", head)]
    rows: list[list[str]] = []
    for line in lines[rule + 1 :]:
        # a row has cells two spaces apart, or is a wrapped cell's line (indented past a prose line's hang)
        if not line.strip() or not (re.search(r"\S {2,}\S", line) or line.startswith("   ")):
            break
        cells = _cut(line, starts)
        if rows and not cells[0]:  # a wrapped cell's next line
            rows[-1] = [f"{a} {b}".strip() for a, b in zip(rows[-1], cells, strict=True)]
        else:
            rows.append(cells)
    return rows


def _cut(line: str, starts: list[int]) -> list[str]:
    """A row's cells, by where the header's columns start (a right-aligned cell may start before its header:
    each cell is what lies between two gaps of two spaces, put in the column it ends in)."""
    import re

    cells = [""] * len(starts)
    for m in re.finditer(r"\S+(?: \S+)*", line):
        column = max((k for k, s in enumerate(starts) if s <= m.end() - 1), default=0)
        cells[column] = f"{cells[column]} {m.group()}".strip()
    return cells


#: Commands whose output is for a program, not a person: JSON, CSV, a metrics file, help from argparse.
FOR_PROGRAMS = ("--json", "--help", "-h", "--format", "export", "schema", "--version")


def read_as_a_person(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    """Every output a command of the suite printed for a person, checked as issue 56 reads it (tests/readable.py):
    no line over 120 characters but a command or a path, no sentence over 40 words, no parenthesis inside a
    parenthesis. A test's command output that reads badly fails it. QUIETCORE_READABLE_LOG=FILE: writes what
    reads badly to FILE instead, for a survey of the whole suite."""
    from tests import readable

    args = [str(a) for a in proc.args]
    if any(a in FOR_PROGRAMS for a in args):
        return proc
    from quietcore.report.screen import FILE_WIDTH

    bad = readable.problems(proc.stdout, FILE_WIDTH) + readable.problems(proc.stderr, FILE_WIDTH)
    if bad:
        log = os.environ.get("QUIETCORE_READABLE_LOG")
        if log:
            with open(log, "a", encoding="utf-8") as f:
                f.write(f"## {' '.join(args)}\n" + "\n".join(bad) + "\n")
        else:
            raise AssertionError(f"{' '.join(args)} reads badly:\n" + "\n".join(bad))
    return proc


def _child(
    main: Callable[[list[str]], int], args: list[str], env: dict[str, str], out: int, err: int, new_session: bool
) -> NoReturn:
    """The forked child: made to look to quietcore as a new `python -m quietcore`
    does (standard streams, environment, argv, signal dispositions), then
    main. It never returns to the test's code, whatever happens: a signal
    that comes as main ends is held while the streams are flushed."""
    code = 1
    try:
        try:
            if new_session:
                os.setsid()
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            os.dup2(out, 1)
            os.dup2(err, 2)
            encoding = locale.getpreferredencoding(False)
            sys.stdin = open(0, encoding=encoding, closefd=False)  # noqa: SIM115 (the process's own)
            sys.stdout = open(1, "w", encoding=encoding, closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", encoding=encoding, errors="backslashreplace", closefd=False, buffering=1)  # noqa: SIM115
            os.environ.clear()
            os.environ.update(env)
            sys.argv = ["quietcore", *args]
            signal.signal(signal.SIGINT, signal.default_int_handler)
            for sig in (signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, signal.SIG_DFL)
            # The test's objects are the child's too, but not a new interpreter's: a full collection went
            # through them all (200,000 and more late in a suite), copying each page it wrote, 190-300 ms in
            # a `report` here; the likely cause of the 0.57 s a CI run's noise child spent outside its probe,
            # inside the counters' window (its log shows no collection, only that time). Frozen, the
            # collector passes them over, as a new `python -m quietcore` has none to pass.
            gc.freeze()
            code = main(args)
        except SystemExit as exc:  # argparse's --help, or a command that exits
            code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        except BaseException:  # what an uncaught exception does to a process: a traceback, and 1
            traceback.print_exc()
        finally:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
    finally:
        os._exit(code)


def as_terminal_job() -> None:
    """A Popen preexec_fn: the child takes SIGINT as a terminal's job does.
    A job a non-interactive shell starts in the background (`pytest &`, a
    CI runner's step) starts with SIGINT ignored, and Python keeps an
    ignored SIGINT ignored: the Ctrl-C a test sends would never arrive, and
    a run went on to its end (seen: `run thp --reps 50` past a 30 s wait)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def allowed_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def mpi_loads() -> bool:
    """mpi4py is installed and finds an MPI library to load: a venv gets
    mpi4py from the package index whether or not the node has one (mpi4py
    loads it at import, and fails there without it)."""
    import ctypes.util
    import importlib.util

    return importlib.util.find_spec("mpi4py") is not None and ctypes.util.find_library("mpi") is not None


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


HAVE_SLURM = all(shutil.which(x) for x in ("slurmctld", "slurmd", "srun", "sinfo", "munged"))


def _slurm_conf(where: Path, cgroups: bool = False) -> str:
    cpus = len(os.sched_getaffinity(0))
    host = socket.gethostname()
    # with cgroups, each job is a cgroup of its CPUs, as sites run Slurm: proctrack/cgroup, task/cgroup
    track, task = ("proctrack/cgroup", "task/cgroup,task/affinity") if cgroups else ("proctrack/linuxproc",
                                                                                       "task/affinity")  # fmt: skip
    return "\n".join([
        "ClusterName=quietcore", f"SlurmctldHost={host}", "SlurmUser=root", "SlurmdUser=root",
        "AuthType=auth/munge", "CredType=cred/munge", f"StateSaveLocation={where}/state",
        f"SlurmdSpoolDir={where}/spool", f"SlurmctldPidFile={where}/slurmctld.pid", f"SlurmdPidFile={where}/slurmd.pid",
        f"SlurmctldLogFile={where}/slurmctld.log", f"SlurmdLogFile={where}/slurmd.log",
        "SlurmctldPort=16817", "SlurmdPort=16818",
        f"ProctrackType={track}", f"TaskPlugin={task}",
        "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core", "MpiDefault=none", "ReturnToService=2",
        f"NodeName={host} CPUs={cpus} RealMemory=1000 State=UNKNOWN",
        f"PartitionName=test Nodes={host} Default=YES MaxTime=INFINITE State=UP", "",
    ])  # fmt: skip


@contextlib.contextmanager
def slurm_node(where: Path, extra: Sequence[str] = (), cgroups: bool = False) -> Iterator[dict[str, str]]:
    """A single-node Slurm of this host: munged (if none runs), slurmctld
    and slurmd on their own configuration (plus `extra` lines), state and
    ports, waited for until the node is idle; every daemon it started is
    stopped afterwards, even when the test fails. Yields the environment
    that points srun and scontrol at it. With `cgroups`, each job is a
    cgroup v1 cpuset of its CPUs (proctrack/cgroup, task/cgroup)."""
    if not HAVE_SLURM or os.geteuid() != 0:
        pytest.skip("needs slurm-wlm and munge, as root")
    for d in ("state", "spool"):
        (where / d).mkdir()
    (where / "slurm.conf").write_text(_slurm_conf(where, cgroups) + "".join(f"{line}\n" for line in extra))
    if cgroups:
        conf = ("CgroupPlugin=cgroup/v1", "ConstrainCores=yes", "CgroupMountpoint=/sys/fs/cgroup")
        (where / "cgroup.conf").write_text("\n".join(conf) + "\n")
    env = {**os.environ, "SLURM_CONF": str(where / "slurm.conf")}
    cpusets = Path("/sys/fs/cgroup/cpuset")
    before = {d.name for d in cpusets.glob("slurm*")} if cgroups and cpusets.is_dir() else set()
    # In the foreground (-D), as children of the test: stopped by it whatever happens.
    daemons: list[subprocess.Popen[bytes]] = []
    logs = open(where / "daemons.log", "wb")  # noqa: SIM115 (closed in the finally)
    try:
        if subprocess.run(["pgrep", "-x", "munged"], capture_output=True, check=False).returncode != 0:
            Path("/run/munge").mkdir(parents=True, exist_ok=True)
            daemons.append(subprocess.Popen(["munged", "--foreground", "--force"], stdout=logs, stderr=logs))
            time.sleep(0.3)
        for daemon in ("slurmctld", "slurmd"):
            daemons.append(subprocess.Popen([daemon, "-D"], env=env, stdout=logs, stderr=logs))
        deadline, state = time.monotonic() + 60, ""
        while time.monotonic() < deadline:
            state = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True,
                                   check=False).stdout.strip()  # fmt: skip
            if state == "idle":
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"the test Slurm node never became idle ({state!r}); see {where}/daemons.log")
        yield env
    finally:
        for proc in reversed(daemons):
            proc.send_signal(signal.SIGTERM)
        for proc in daemons:
            try:
                # Their state is this test's to throw away: slurmctld, after a job, took 2.4 s to save it.
                proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        logs.close()
        if cgroups:
            # Slurm's cgroup v1 plugin leaves its slurm_<node> cpuset of every CPU: a sibling that overlaps
            # makes `tune`'s exclusive housekeeping cpuset fail with EINVAL in the tests that follow
            for made in [d for d in cpusets.glob("slurm*") if d.name not in before]:
                for cpuset in [*sorted((p for p in made.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)), made]:
                    with contextlib.suppress(OSError):
                        cpuset.rmdir()


BENCH_PEERS = Path(__file__).resolve().parents[1] / "bench" / "compare_peers.py"


@pytest.fixture(scope="session")
def peer_bench(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """One short run of bench/compare_peers.py for the suite (oslat, cyclictest and
    quietcore's probes, 1 s each on the last CPU): what it printed, and the
    directory it kept oslat's and cyclictest's JSON files in. The bench test reads
    the first; the import test imports the files."""
    if not shutil.which("oslat") or not shutil.which("cyclictest") or os.geteuid() != 0:
        pytest.skip("needs rt-tests (oslat, cyclictest), as root")
    kept = tmp_path_factory.mktemp("peers")
    proc = subprocess.run([sys.executable, str(BENCH_PEERS), "--rounds", "1", "--seconds", "1", "--keep", str(kept)],
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc, kept


FIRST_INTEGRATION = "tests/integration/test_fleet.py"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The fleet's tests first of the integration tests, as they are written: the fleet
    sets its reference from `quiet_noise`, measured as its first test starts, and checks
    against it at once (this VM's host has noise episodes of minutes: a reference from
    minutes earlier once hid a planted source's shift). The tick's and simulate's tests
    read the same session later, which costs them nothing."""
    fleet = [i for i in items if i.nodeid.startswith(FIRST_INTEGRATION)]
    if not fleet:
        return
    rest = [i for i in items if not i.nodeid.startswith(FIRST_INTEGRATION)]
    at = next((n for n, i in enumerate(rest) if i.nodeid.startswith("tests/integration/")), len(rest))
    items[:] = rest[:at] + fleet + rest[at:]


@pytest.fixture(scope="session")
def quiet_noise(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database whose session 1 is 5 s of noise on every CPU of the node at rest
    (untraced), for the suite: the tick's attribution and simulate's trace. Copy
    it before writing to it."""
    where = tmp_path_factory.mktemp("quiet")
    state = where / "state"
    state.mkdir(mode=0o755)
    env = {**os.environ, "QUIETCORE_DB": str(where / "results.db"), "QUIETCORE_STATE_DIR": str(state)}
    cpus = ",".join(str(c) for c in allowed_cpus())
    proc = subprocess.run([sys.executable, "-m", "quietcore", "noise", "--cpus", cpus, "--duration", "5", "--trace",
                           "off"], env=env, capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return where / "results.db"
