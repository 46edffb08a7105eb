"""Every file quietcore takes from a user, fed what a careless or hostile one
gives it (issue 61): each input path gets a FIFO with no writer, /dev/zero, a
sparse 3 GB file of one line, random bytes, text that is not UTF-8, deep
nesting, a huge number, a negative one, NaN, an empty file and a link to a
file only root may read. Each ends in one line on stderr and exit 2, within
2 s and 300 MB of memory, with nothing stored and nothing changed.

Each command runs in a child forked from the test (conftest's `_child`, as
`cli` runs one), waited for with wait4: its ru_maxrss, less the resident
memory it had from the test at the fork, is the memory the command took."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import _child, read_as_a_person

SECONDS = 2.0
MEGABYTES = 300
#: A file only root may read, for the link (any will do; /etc/shadow is one on every Linux)
SECRET = Path("/etc/shadow")


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


@dataclass
class Ran:
    proc: subprocess.CompletedProcess[str]
    seconds: float
    grown_mb: float


def run(args: list[str], env: dict[str, str], timeout: float = 20) -> Ran:
    """`quietcore ARGS` in a forked child: what it printed, its wall time and the memory it took."""
    from quietcore import cli as entry
    from quietcore.commands import COMMANDS, common, load

    assert common
    for name in COMMANDS:
        load(name)  # imported here, before the fork: the child pays for no import
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        base = _rss_mb()
        began = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            _child(entry.main, args, env, out.fileno(), err.fileno(), False)
        pidfd = os.pidfd_open(pid)
        try:
            import select

            if not select.select([pidfd], [], [], timeout)[0]:
                os.kill(pid, signal.SIGKILL)
        finally:
            os.close(pidfd)
        _, status, usage = os.wait4(pid, 0)
        seconds = time.perf_counter() - began
        texts = []
        for f in (out, err):
            f.seek(0)
            texts.append(f.read().decode("utf-8", "replace"))
    proc = subprocess.CompletedProcess(["quietcore", *args], os.waitstatus_to_exitcode(status), texts[0], texts[1])
    return Ran(read_as_a_person(proc), seconds, usage.ru_maxrss / 1024 - base)


# --- the inputs ---------------------------------------------------------------------------------------------------


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _zero(path: Path) -> None:
    path.symlink_to("/dev/zero")  # root's own link (the test's): followed, and the device refused


def _sparse(path: Path) -> None:
    with open(path, "wb") as f:
        f.truncate(3 << 30)  # 3 GB of NUL bytes, not one newline, on no disk


def _bytes(data: bytes) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        path.write_bytes(data)

    return write


def _secret(path: Path) -> None:
    path.symlink_to(SECRET)
    if os.geteuid() == 0:
        os.lchown(path, 65534, 65534)  # another user's link, as root: not followed


INPUTS: dict[str, Callable[[Path], None]] = {
    "a FIFO with no writer": _fifo,
    "/dev/zero": _zero,
    "a sparse 3 GB file of one line": _sparse,
    "random bytes": _bytes(random.Random(61).randbytes(64 << 10)),
    "text that is not UTF-8": _bytes(b"caf\xe9 \xff\xfe\n" * 100),
    "deep nesting": _bytes(b"[" * 100_000),
    "deep TOML": _bytes(b"a = " + b"[" * 100_000),
    "a huge number": _bytes(b"9" * 5000 + b"\n"),
    "a negative number": _bytes(b"-1\n"),
    "NaN": _bytes(b"NaN\n"),
    "an empty file": _bytes(b""),
    "a link to a file only root may read": _secret,
}
#: A trace's lines of the same kinds: a number past float's range, a negative start, NaN
TRACE_INPUTS: dict[str, Callable[[Path], None]] = {
    "a trace: a huge number": _bytes(b"0\t" + b"9" * 400 + b"\n"),
    "a trace: a line past 64 bytes": _bytes(b"0\t" + b"1" * 100 + b"\n"),
    "a trace: a negative start": _bytes(b"-5\t3\n"),
    "a trace: NaN": _bytes(b"nan\t5\n"),
    "a trace: 1e400": _bytes(b"1e400\t5\n"),
}
#: A plan that parses, with values a plan never holds
PLAN_INPUTS: dict[str, Callable[[Path], None]] = {
    "a plan: a number as a target": _bytes(
        json.dumps(
            {
                "housekeeping": "0",
                "targets": "1",
                "runtime": [
                    {
                        "knob": "x",
                        "current": "",
                        "planned": "",
                        "reason": "",
                        "action": {"kind": "sysctl", "target": 7, "value": "1"},
                    }
                ],
            }
        ).encode()
    ),
    "a plan: a CPU past any machine's": _bytes(
        json.dumps({"housekeeping": "0", "targets": "99999999999999", "runtime": []}).encode()
    ),
    "a plan: negative CPUs": _bytes(json.dumps({"housekeeping": "-1", "targets": "1", "runtime": []}).encode()),
}


# --- the input paths ----------------------------------------------------------------------------------------------


def _trace_dir(given: Path) -> list[str]:
    """The bad file as one CPU's trace of a directory."""
    directory = given.parent / f"{given.name}.d"
    directory.mkdir()
    os.rename(given, directory / "node-rank0-cpu0.trace")
    return ["results", "import", "--from", "trace", str(directory), "--duration", "1"]


def _good_traces(given: Path) -> Path:
    """A directory of one good trace, beside the bad file."""
    directory = given.parent / "good"
    directory.mkdir(exist_ok=True)
    (directory / "node-rank0-cpu0.trace").write_text("1000\t5000\n2000000\t7000\n")
    return directory


PATHS: dict[str, Callable[[Path], list[str]]] = {
    "results import": lambda f: ["results", "import", str(f)],
    "results import --from oslat": lambda f: ["results", "import", "--from", "oslat", str(f)],
    "results import --from cyclictest": lambda f: ["results", "import", "--from", "cyclictest", str(f)],
    "results import --from rtla-osnoise": lambda f: ["results", "import", "--from", "rtla-osnoise", str(f)],
    "results import --from trace (a file of the directory)": _trace_dir,
    "results import --from trace (the directory)": lambda f: ["results", "import", "--from", "trace", str(f)],
    "results import --from trace --root": lambda f: [
        "results",
        "import",
        "--from",
        "trace",
        str(_good_traces(f)),
        "--root",
        str(f),
    ],
    "tune apply --plan": lambda f: ["tune", "apply", "--plan", str(f), "--yes"],
    "run custom --file": lambda f: ["run", "custom", "--file", str(f)],
    "audit --root": lambda f: ["audit", "--root", str(f)],
    "tune plan --root": lambda f: ["tune", "plan", "--root", str(f)],
    "--db": lambda f: ["results", "list", "--db", str(f)],
}
#: (path, input) pairs that are not bad input: an empty file is a new database, SQLite's own rule
ACCEPTED = {("--db", "an empty file")}
CASES = [(p, i) for p in PATHS for i in INPUTS if (p, i) not in ACCEPTED]
CASES += [(p, i) for p in ("results import --from trace (a file of the directory)",) for i in TRACE_INPUTS]
CASES += [("tune apply --plan", i) for i in PLAN_INPUTS]
MADE = {**INPUTS, **TRACE_INPUTS, **PLAN_INPUTS}


def _stored(db: Path) -> int:
    if not db.is_file():
        return 0
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0])


def _journaled(state_dir: Path) -> int:
    journal = state_dir / "journal.db"
    if not journal.is_file():
        return 0
    with sqlite3.connect(f"file:{journal}?mode=ro", uri=True) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM journal").fetchone()[0])


@pytest.mark.parametrize(("path", "given"), CASES, ids=[f"{p}: {i}" for p, i in CASES])
def test_a_bad_input_gets_one_line_and_exit_2_in_bounded_time_and_memory(
    path: str, given: str, tmp_path: Path, db_file: Path, state_dir: Path, cli_env: dict[str, str]
) -> None:
    if given == "a link to a file only root may read" and not SECRET.exists():
        pytest.skip(f"{SECRET} is not on this machine")
    bad = tmp_path / "given"
    MADE[given](bad)
    args = PATHS[path](bad)
    before = bad.lstat() if path == "--db" else None
    ran = run(args, cli_env)
    said = ran.proc.stderr.strip()
    assert ran.proc.returncode == 2, (ran.proc.returncode, said[-2000:])
    assert len(said.splitlines()) == 1 and said.startswith("quietcore: error: "), said[-2000:]
    assert "Traceback" not in said and "RecursionError" not in said
    assert ran.seconds < SECONDS, f"{ran.seconds:.2f} s: {said}"
    assert ran.grown_mb < MEGABYTES, f"{ran.grown_mb:.0f} MB: {said}"
    assert _stored(db_file) == 0 and _journaled(state_dir) == 0
    if before is not None:  # the file given as the database is as it was
        after = bad.lstat()
        assert (after.st_size, after.st_mtime_ns, stat.S_IFMT(after.st_mode)) == (
            before.st_size, before.st_mtime_ns, stat.S_IFMT(before.st_mode))  # fmt: skip


def _experiment_of_200_mb(path: Path) -> None:
    """An experiment file whose command string runs on for 200 MB (NUL bytes past its start, on no disk)."""
    path.write_bytes(b'name = "big"\n[[workload]]\nname = "w"\ncmd = "')
    with open(path, "r+b") as f:
        f.truncate(200 << 20)


def _trace_of_3_gb(path: Path) -> None:
    path.mkdir()
    _sparse(path / "node-rank0-cpu0.trace")


def test_the_five_cases_of_the_issue_as_a_user_runs_them(tmp_path: Path, db_file: Path, state_dir: Path,
                                                          cli_env: dict[str, str]) -> None:  # fmt: skip
    """Issue 61's five, each by `python -m quietcore` (its memory its own, VmHWM, as bench/peak.py reads it):
    a 3 GB trace of one line took 22 GB; a FIFO blocked for good; 100,000 `[` in a plan raised
    RecursionError; a 200 MB command string took 1 GB and 60 s; /dev/zero as a plan read until killed."""
    from bench.peak import quietcore as measured

    made = {"trace": tmp_path / "trace", "fifo": tmp_path / "fifo", "deep": tmp_path / "deep.json",
            "big": tmp_path / "big.toml", "zero": Path("/dev/zero")}  # fmt: skip
    _trace_of_3_gb(made["trace"])
    _fifo(made["fifo"])
    made["deep"].write_bytes(b"[" * 100_000)
    _experiment_of_200_mb(made["big"])
    cases = [("results", "import", "--from", "trace", str(made["trace"]), "--duration", "1"),
             ("results", "import", "--from", "cyclictest", str(made["fifo"])),
             ("tune", "apply", "--plan", str(made["deep"]), "--yes"),
             ("run", "custom", "--file", str(made["big"])),
             ("tune", "apply", "--plan", str(made["zero"]), "--yes")]  # fmt: skip
    for args in cases:
        proc, wall, _, peak_mb = measured(cli_env, *args)
        said = proc.stderr.strip()
        assert proc.returncode == 2 and len(said.splitlines()) == 1, (args, proc.returncode, said[-1000:])
        assert said.startswith("quietcore: error: ") and "Traceback" not in said, said
        # its start-up is in both: 0.35-0.5 s and 60-70 MB here
        assert wall < SECONDS and peak_mb < MEGABYTES, (args, wall, peak_mb, said)
    assert _stored(db_file) == 0 and _journaled(state_dir) == 0


def _many_traces(where: Path, cpus: int) -> None:
    """`cpus` CPUs' traces, each a copy of one of this VM's recorded 10 s (11,500 gaps a CPU)."""
    import gzip

    noise = Path(__file__).parents[1] / "fixtures" / "noise"
    texts = [gzip.decompress((noise / f"vm-10s-cpu{c}.trace.gz").read_bytes()) for c in (0, 1)]
    where.mkdir()
    for cpu in range(cpus):
        (where / f"replay-rank0-cpu{cpu}.trace").write_bytes(texts[cpu % 2])


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_ends_an_import_within_a_second_with_nothing_stored(
    sig: signal.Signals, tmp_path: Path, db_file: Path, cli_env: dict[str, str]
) -> None:
    """An import of 384 CPUs' 10 s (4.4 million gaps, about 7 s of reading and analysis here), signalled a
    second in (at 192 CPUs and 3.5 s, a CI run's import had ended by then): it ends within a second of the
    signal, exit 130, and stores nothing (it committed the session, then each run, so a signal between two
    left half a session)."""
    from tests.conftest import Forked

    _many_traces(tmp_path / "traces", 384)
    child = Forked(["results", "import", "--from", "trace", str(tmp_path / "traces"), "--duration", "10"], cli_env)
    time.sleep(1.0)
    assert child.poll() is None, "the import ended before the signal: give it more to read"
    os.kill(child.pid, sig)
    sent = time.perf_counter()
    code = child.wait(timeout=10)
    took = time.perf_counter() - sent
    _, err = child.communicate()
    assert code == 130 and "interrupted" in err, (code, err[-2000:])
    assert took < 1.0, f"{took:.2f} s from the signal to its end"
    assert _stored(db_file) == 0


@pytest.mark.parametrize("facts", ["[" * 100_000, "{not json", "9" * 5000], ids=["deep", "broken", "huge"])
def test_a_database_whose_stored_json_another_hand_wrote_gets_one_line(
    facts: str, tmp_path: Path, cli_env: dict[str, str]
) -> None:
    """A database is input too: a session whose facts are 100,000 `[` raised RecursionError in `results
    show`, and text that is not JSON a JSONDecodeError, each a traceback."""
    from quietcore.store import db

    made = tmp_path / "made.db"
    db.open_db(made).close()  # quietcore's own schema, then a row no quietcore wrote
    with sqlite3.connect(made) as conn:
        conn.execute("INSERT INTO sessions (uuid, command, argv, host, pid, started_at, status, tool_version, "
                     "fingerprint, facts) VALUES ('u', 'noise', '[]', 'h', 1, '2026-11-29T00:00:00', 'complete', "
                     "'0.1.0', 'f', ?)", (facts,))  # fmt: skip
    ran = run(["results", "show", "1", "--db", str(made)], cli_env)
    said = ran.proc.stderr.strip()
    assert ran.proc.returncode == 2 and len(said.splitlines()) == 1, said[-2000:]
    assert "the database holds a session's facts that is not JSON quietcore wrote" in said
    assert ran.seconds < SECONDS and ran.grown_mb < MEGABYTES
