"""An attacker's suite: each test plays an unprivileged user of the node
(nobody, by setpriv or a forked child that dropped to it), then runs the
root command a careful administrator would, and asserts that nothing
outside quietcore's own state changed: a canary file keeps its content,
mode and owner, and a canary process still runs."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from quietcore.owner import start_time
from tests.conftest import KVM_ROOT, NOBODY, XEON_ROOT, CliRunner, allowed_cpus, as_nobody

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                                reason="plays another user: needs root and setpriv")  # fmt: skip


def as_user(*argv: str, cwd: str | None = None) -> subprocess.CompletedProcess[str]:
    """A command as the unprivileged user (nobody), as a local user would run it."""
    return subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--", *argv],
                          capture_output=True, text=True, check=False, cwd=cwd, timeout=60)  # fmt: skip


@pytest.fixture
def lair() -> Iterator[Path]:
    """A directory the attacker owns, under a directory anyone may enter."""
    base = Path(tempfile.mkdtemp(prefix="qc-attack-"))
    base.chmod(0o755)
    mine = base / "nobody"
    mine.mkdir(mode=0o755)
    os.chown(mine, NOBODY, NOBODY)
    try:
        yield mine
    finally:
        shutil.rmtree(base, ignore_errors=True)


class Canary:
    """A root-only file: what an attack would overwrite, chmod or chown."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.write_text("canary: root's, untouched\n")
        path.chmod(0o600)
        self.before = self.look()

    def look(self) -> tuple[str, int, int, int]:
        st = os.lstat(self.path)
        return self.path.read_text(), st.st_mode, st.st_uid, st.st_gid

    def untouched(self) -> bool:
        return self.look() == self.before


@pytest.fixture
def canary() -> Iterator[Canary]:
    base = Path(tempfile.mkdtemp(prefix="qc-canary-"))
    base.chmod(0o755)  # the attacker may name the file (in a link), not read or write it
    try:
        yield Canary(base / "root-only")
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def canary_process() -> Iterator[subprocess.Popen[bytes]]:
    """A process of root's that no quietcore has any reason to signal."""
    proc = subprocess.Popen(["sleep", "600"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_lock_directory_made_first_with_links_planted_changes_nothing(
    cli: CliRunner, cli_env: dict[str, str], lair: Path, canary: Canary
) -> None:
    # GIVEN the old shared lock directories, made by the user with a lock file that links to a root file
    planted = []
    for where in (Path("/run/lock/quietcore"), Path("/tmp/quietcore-lock")):
        made = as_user("sh", "-c", f"mkdir -p {where} && ln -sf {canary.path} {where}/cpu-1.lock")
        if made.returncode == 0:
            planted.append(where)
    # AND a state directory of the user's, with a lock file that links to it too
    evil = lair / "state"
    assert as_user("sh", "-c", f"mkdir {evil} && ln -s {canary.path} {evil}/lock-cpu-1").returncode == 0
    try:
        # WHEN root measures CPU 1, first pointed at the user's directory
        pointed = cli("noise", "--cpus", "1", "--duration", "0.2", env={"QUIETCORE_STATE_DIR": str(evil)})
        # THEN it refuses it, naming why, and writes nothing
        assert pointed.returncode == 3, pointed.stderr
        assert f"refusing the state directory {evil}" in pointed.stderr and "owned by uid 65534" in pointed.stderr
        # AND as it runs by default (root's own state directory) it measures, and the old ones play no part
        default_env = {k: v for k, v in cli_env.items() if k != "QUIETCORE_STATE_DIR"}
        ran = subprocess.run([sys.executable, "-m", "quietcore", "noise", "--cpus", "1", "--duration", "0.2"],
                             env=default_env, capture_output=True, text=True, check=False, timeout=60)  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        st = os.lstat("/run/quietcore")
        assert (st.st_uid, st.st_mode & 0o777) == (0, 0o755)
        assert canary.untouched()
    finally:
        for where in planted:
            shutil.rmtree(where, ignore_errors=True)


def _forge(db: Path, target: Path) -> None:
    """As the database's owner (nobody): a journal row of an older
    quietcore that 'changed' `target`, left by a process that ended."""
    conn = sqlite3.connect(db)
    with conn:
        conn.execute(
            "INSERT INTO journal (host, pid, pid_start, command, lever, kind, target, old_value, new_value, lasting,"
            " state, changed_at) VALUES (?, 999999, '1', 'quietcore run thp', 'thp', 'sysfs', ?, 'PWNED', 'x',"
            " 'temporary', 'temporary', '2999-01-01T00:00:00+00:00')",
            (socket.gethostname(), str(target)),
        )
    conn.close()


def test_a_forged_journal_row_in_a_users_database_writes_nothing(cli: CliRunner, lair: Path, canary: Canary) -> None:
    from quietcore.store import db

    # GIVEN a results database the user owns, with a forged journal row naming a root file
    path = lair / "results.db"

    def forge(answer: dict[str, Any]) -> None:  # as nobody: quietcore's own database, then the row
        db.open_db(path).close()
        _forge(path, canary.path)
        answer["done"] = True

    answer = as_nobody(forge)
    assert answer == {"done": True}, answer
    # WHEN root lists that database's results
    listed = cli("results", "--db", str(path), "list")
    # THEN it lists them, says what it found, and writes nothing anywhere
    assert listed.returncode == 0, listed.stderr
    said = " ".join(listed.stderr.split())  # one message, wrapped to the width of a file
    assert "holds 1 open journal entry of an older quietcore. They are not replayed" in said
    assert canary.untouched()
    assert sqlite3.connect(path).execute("SELECT state FROM journal").fetchone() == ("temporary",)


def test_a_forged_row_in_roots_own_database_is_moved_but_its_target_refused(
    cli: CliRunner, db_file: Path, canary: Canary, journal_file: Path
) -> None:
    from quietcore.store import db

    # GIVEN root's own results database of an older quietcore, with an open entry naming a non-knob file
    db.open_db(db_file).close()
    _forge(db_file, canary.path)
    # WHEN any command runs
    listed = cli("results", "list", "--verbose")  # the journal's housekeeping: said when asked
    # THEN the entry moves to the node journal, and its kind refuses the target: nothing is written
    assert listed.returncode == 0, listed.stderr
    assert "moved 1 open journal entry" in listed.stderr
    assert f"did not put back thp ({canary.path})" in listed.stderr and "refused sysfs target" in listed.stderr
    assert canary.untouched()
    states = sqlite3.connect(journal_file).execute("SELECT state FROM journal").fetchall()
    assert states == [("failed",)]
    assert sqlite3.connect(db_file).execute("SELECT count(*) FROM journal").fetchone() == (0,)


def test_a_forged_holder_is_never_signalled(
    cli: CliRunner, canary_process: subprocess.Popen[bytes], journal_file: Path
) -> None:
    from quietcore.store import journal

    # GIVEN the old holder pid file, written by the user, naming root's process
    old = Path("/run/lock/quietcore/cpu_dma_latency.holder")
    planted = as_user("sh", "-c", f"mkdir -p {old.parent} && echo '{canary_process.pid}@1 0' > {old}")
    # AND a node journal whose holder names that process, as a pid reused since would
    conn = journal.open_node()
    assert conn is not None
    started = start_time(canary_process.pid)
    assert started is not None
    journal.set_holder(conn, "pm-qos", canary_process.pid, started, "0")
    with conn:
        conn.execute("INSERT INTO journal (host, boot_id, pid, lever, kind, target, old_value, new_value, lasting, "
                     "state, changed_at) VALUES (?, ?, 1, 'tune', 'pm-qos', '/dev/cpu_dma_latency', 'none', '0', "
                     "'kept', 'kept', '2026-01-01')", (socket.gethostname(), journal.boot_id()))  # fmt: skip
    conn.close()
    try:
        # WHEN root reverts its tuning, which ends quietcore's holder
        back = cli("tune", "revert")
        # THEN the process that is not the holder is left alone
        assert back.returncode == 0, back.stderr
        time.sleep(0.2)
        assert canary_process.poll() is None, "quietcore signalled a process that was not its holder"
        assert "back to none" in back.stdout
    finally:
        if planted.returncode == 0:
            shutil.rmtree(old.parent, ignore_errors=True)


@pytest.mark.skipif(not Path("/dev/cpu_dma_latency").exists() or len(allowed_cpus()) < 2,
                    reason="needs /dev/cpu_dma_latency and two CPUs")  # fmt: skip
def test_a_package_planted_in_the_working_directory_is_never_imported(
    cli: CliRunner, cli_env: dict[str, str], lair: Path, canary: Canary
) -> None:
    from tests.integration.test_tune import changed, restored

    # GIVEN a `quietcore` package in the directory root works from, which would overwrite a root file
    package = lair / "quietcore"
    code = f"open({str(canary.path)!r}, 'w').write('PWNED')\n"
    made = as_user("sh", "-c", f"mkdir -p {package}/knobs && printf %s \"$0\" > {package}/__init__.py && "
                   f"cp {package}/__init__.py {package}/knobs/__init__.py && "
                   f"cp {package}/__init__.py {package}/knobs/pmqos.py", code)  # fmt: skip
    assert made.returncode == 0, made.stderr
    command = Path(sys.executable).parent / "quietcore"  # the installed command, as an administrator runs it
    with restored() as saved:
        # WHEN root applies the latency profile from there (its C-state limit starts a Python holder)
        argv = [str(command), "tune", "apply", "--profile", "latency", "--yes", "--json"]
        applied = subprocess.run(argv, cwd=lair, env=cli_env, capture_output=True, text=True, check=False,
                                 timeout=120)  # fmt: skip
        try:
            assert applied.returncode == 0, applied.stderr
            knobs_set = {o["knob"]: o for o in json.loads(applied.stdout)}
            # THEN the holder holds the limit, and the planted package never ran
            assert knobs_set["C-state limit"]["result"] == "set"
            assert canary.untouched()
        finally:
            back = subprocess.run([str(command), "tune", "revert"], cwd=lair, env=cli_env, capture_output=True,
                                  text=True, check=False, timeout=120)  # fmt: skip
        assert back.returncode == 0, back.stderr
        assert changed(saved) == []
    assert canary.untouched()


HOSTILE = '"><img src=x onerror="document.title=\'pwned\'"><script>document.title="pwned"</script>'


def test_a_hostile_experiment_name_runs_no_script_in_the_report_and_no_formula_in_csv(
    cli: CliRunner, tmp_path: Path
) -> None:
    from tests.integration.test_report_browser import chromium

    sync_api = pytest.importorskip("playwright.sync_api")
    # GIVEN an experiment whose name and workload label are markup and a spreadsheet formula (the label short
    # enough for the table to show it whole)
    spec = tmp_path / "e.toml"
    spec.write_text(f"name = {json.dumps(HOSTILE)}\nreps = 2\nwarmup = 0\n[factors]\npolicy = [\"other\", \"batch\"]\n"
                    '[[workload]]\ncmd = "true"\nlabel = "=1+1[bold]"\n')  # fmt: skip
    ran = cli("run", "custom", "--file", str(spec))
    assert ran.returncode == 0, ran.stderr
    assert "Traceback" not in ran.stderr and "[bold]" in ran.stdout  # rich markup shown as text
    out = tmp_path / "report"
    assert cli("report", "--out", str(out)).returncode == 0
    # WHEN the report is opened in a real browser
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        try:
            page = browser.new_page()
            dialogs: list[str] = []

            def dialog(d: Any) -> None:
                dialogs.append(d.message)
                d.dismiss()

            page.on("dialog", dialog)
            page.goto((out / "index.html").as_uri())
            page.wait_for_load_state("load")
            # THEN no script ran and no element broke out: the name is text
            assert page.title() != "pwned" and not dialogs
            assert page.query_selector_all("img") == [] and page.query_selector_all("script") == []
            assert HOSTILE in page.inner_text("body")
            ids = [f.get_attribute("id") or "" for f in page.query_selector_all("figure")]
            assert ids and all(c.isalnum() or c in "-_" for i in ids for c in i), ids
        finally:
            browser.close()
    assert all(c.isalnum() or c in "-_." for f in (out / "figures").iterdir() for c in f.name)
    # AND the CSV export neutralises the formula
    csv = cli("results", "export", "1", "--format", "csv")
    assert csv.returncode == 0, csv.stderr
    assert "'=1+1[bold]" in csv.stdout and ",=1+1" not in csv.stdout


#: A task's name that would retitle a terminal and clear its screen (OSC 2, then CSI 2J), 15 bytes: the most
#: prctl(PR_SET_NAME) keeps.
ESCAPES = b"\x1b]2;PWN\x07\x1b[2J"


def _named_spinner(cpu: int, name: bytes) -> int:
    """A process of nobody's that names itself `name` and spins on `cpu` until killed: its pid."""
    import ctypes

    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setresgid(NOBODY, NOBODY, NOBODY)
            os.setresuid(NOBODY, NOBODY, NOBODY)
            os.sched_setaffinity(0, {cpu})
            ctypes.CDLL(None).prctl(15, ctypes.c_char_p(name), 0, 0, 0)  # PR_SET_NAME
            end = time.monotonic() + 60  # never past the test, whatever happens to it
            while time.monotonic() < end:
                pass
        finally:
            os._exit(0)
    return pid


def test_a_task_named_with_a_terminals_escapes_is_text_in_every_output(cli: CliRunner, tmp_path: Path) -> None:
    """Issue 56: as nobody, a task named `\\x1b]2;PWN\\x07\\x1b[2J` spun on CPU 1 while root ran `noise
    --explain-above`; the terminal showed it escaped, but `report` wrote the raw bytes into report.md, and
    matplotlib's warning ("Glyph 27 missing") carried one to root's terminal. Every output is checked:
    the command's own, `results show`, the report's Markdown, HTML and figures, the CSV and JSON exports."""
    cpus = allowed_cpus()
    if len(cpus) < 2:
        pytest.skip("the spinner takes a CPU of two")
    # GIVEN nobody's task, named with escapes, sharing the CPU measured
    spinner = _named_spinner(cpus[-1], ESCAPES)
    try:
        time.sleep(0.3)  # named and spinning before the measurement starts
        ran = cli("noise", "--cpus", str(cpus[-1]), "--duration", "2", "--explain-above", "100", timeout=120)
    finally:
        os.kill(spinner, signal.SIGKILL)
        os.waitpid(spinner, 0)
    assert ran.returncode == 0, ran.stderr
    # WHEN root reads the session every way quietcore gives it
    out = tmp_path / "report"
    said = {"noise": ran, "results show": cli("results", "show", "1"), "report": cli("report", "--out", str(out)),
            "csv": cli("results", "export", "1", "--format", "csv"),
            "json": cli("results", "export", "1", "--format", "json")}  # fmt: skip
    # THEN its name is there, as text: its escapes shown as \x1b, never sent
    assert "\\x1b]2;PWN\\x07" in ran.stdout, ran.stdout
    for what, proc in said.items():
        assert proc.returncode == 0, (what, proc.stderr)
        for stream in (proc.stdout, proc.stderr):
            assert "\x1b" not in stream and "\x07" not in stream, (what, stream[-2000:])
    files = [out / "report.md", out / "index.html", *sorted((out / "figures").iterdir())]
    assert len(files) > 3
    for f in files:
        data = _png_text(f.read_bytes()) if f.suffix == ".png" else f.read_bytes()
        assert b"\x1b" not in data and b"\x07" not in data, f
    # the name, said, in the Markdown: its escapes shown, its backslashes and brackets escaped as Markdown reads them
    from quietcore.safe import md

    assert md("\x1b]2;PWN\x07") in (out / "report.md").read_text()


def _png_text(data: bytes) -> bytes:
    """A PNG's text chunks (its title, its software): the only bytes of it a program prints; the pixels'
    compressed stream holds any byte."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at, said = 8, b""
    while at < len(data):
        size, kind = int.from_bytes(data[at : at + 4], "big"), data[at + 4 : at + 8]
        if kind in (b"tEXt", b"iTXt", b"zTXt"):
            said += data[at + 8 : at + 8 + size]
        at += 12 + size
    return said


def test_a_command_that_writes_100_mb_to_stderr_is_measured(cli: CliRunner) -> None:
    flood = f"{sys.executable} -c 'import sys; sys.stderr.buffer.write(b\"x\" * 100_000_000)'"
    ran = cli("run", "custom", "--cmd", flood, "--reps", "1", "--warmup", "0", "--json", timeout=120)
    assert ran.returncode == 0, ran.stderr[-500:]


def test_timeout_ends_the_commands_whole_process_group(cli: CliRunner, tmp_path: Path) -> None:
    marker = tmp_path / "child.pid"
    slow = f"sh -c 'sleep 60 & echo $! > {marker}; wait'"
    started = time.monotonic()
    ran = cli("run", "custom", "--cmd", slow, "--reps", "1", "--warmup", "0", "--timeout", "1", timeout=60)
    assert time.monotonic() - started < 30
    assert "ran over --timeout 1 s" in ran.stdout + ran.stderr
    child = int(marker.read_text())
    assert start_time(child) is None or _zombie_or_gone(child), "the command's child outlived --timeout"


def _zombie_or_gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2 :].split()[0] in ("Z", "X")


def _probes() -> list[int]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"quietcore-probe") and not _zombie_or_gone(int(cmdline.parent.name)):
            found.append(int(cmdline.parent.name))
    return found


@pytest.mark.skipif(len(allowed_cpus()) < 2, reason="the load goes on another CPU")
def test_kill_9_of_run_custom_leaves_no_load_behind(cli_env: dict[str, str], tmp_path: Path) -> None:
    assert _probes() == [], "a probe from elsewhere is running"
    cpu = str(allowed_cpus()[1])
    proc = subprocess.Popen([sys.executable, "-m", "quietcore", "run", "custom", "--cmd", "sleep 5", "--factor",
                             f"cpus={cpu}", "--factor", "load=same-cpu", "--reps", "3", "--warmup", "0"],
                            env=cli_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not _probes():
            assert proc.poll() is None and time.monotonic() < deadline, "the load never started"
            time.sleep(0.05)
        # WHEN quietcore is killed outright, as the OOM killer or a scheduler would
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        # THEN its competing load dies with it
        deadline = time.monotonic() + 5
        while _probes() and time.monotonic() < deadline:
            time.sleep(0.05)
        left = _probes()
        assert left == [], f"spinners left behind: {left}"
    finally:
        for pid in _probes():
            os.kill(pid, signal.SIGKILL)


def test_a_gzip_bomb_a_link_loop_a_fifo_and_a_link_out_in_a_root_tree(
    cli: CliRunner, tmp_path: Path, canary: Canary
) -> None:
    root = tmp_path / "root"
    shutil.copytree(KVM_ROOT, root, symlinks=True)
    (root / "proc" / "config.gz").write_bytes(gzip.compress(b"\0" * (200 << 20), compresslevel=1))
    (root / "proc" / "cmdline").unlink()
    (root / "proc" / "cmdline").symlink_to("cmdline.loop")
    (root / "proc" / "cmdline.loop").symlink_to("cmdline")
    (root / "proc" / "softirqs").unlink()
    os.mkfifo(root / "proc" / "softirqs")
    (root / "proc" / "version").unlink()
    (root / "proc" / "version").symlink_to(canary.path)
    started = time.monotonic()
    audited = cli("audit", "--root", str(root), "--json", timeout=120)
    assert time.monotonic() - started < 60
    assert audited.returncode in (0, 1), audited.stderr
    assert "Traceback" not in audited.stderr and "canary" not in audited.stdout
    json.loads(audited.stdout)
    assert canary.untouched()


def test_a_tarball_too_large_to_unpack_is_refused(cli: CliRunner, tmp_path: Path) -> None:
    bomb = tmp_path / "snap.tar.gz"
    with tarfile.open(bomb, "w:gz", compresslevel=1) as tar:
        info = tarfile.TarInfo("proc/interrupts")
        info.size = 40 << 20
        with tempfile.TemporaryFile() as zeros:
            zeros.truncate(info.size)
            tar.addfile(info, zeros)
    audited = cli("audit", "--root", str(bomb))
    assert audited.returncode == 2 and "larger than 32 MiB" in audited.stderr, audited.stderr
    assert len(audited.stderr.strip().splitlines()) == 1


def _plan(action: dict[str, Any]) -> dict[str, Any]:
    cpus = allowed_cpus()
    return {"housekeeping": str(cpus[0]), "targets": str(cpus[-1]), "profile": "throughput",
            "runtime": [{"knob": "THP", "current": "always", "planned": "madvise", "reason": "harmless",
                         "action": {"kind": "sysfs", "target": "/sys/kernel/mm/transparent_hugepage/enabled",
                                    "value": "madvise", "note": "THP"}},
                        {"knob": "THP (really)", "current": "-", "planned": "-", "reason": "harmless",
                         "action": action}]}  # fmt: skip


@pytest.mark.parametrize(
    ("action", "says"),
    [
        ({"kind": "sysfs", "target": "/etc/passwd", "value": "x"}, "refused sysfs target '/etc/passwd'"),
        (
            {"kind": "sysfs", "target": "/sys/kernel/mm/transparent_hugepage/../../../../etc/passwd", "value": "x"},
            "not a normalised absolute path",
        ),
        (
            {"kind": "procfs", "target": "/proc/sys/kernel/core_pattern", "value": "|/tmp/x"},
            "refused procfs target '/proc/sys/kernel/core_pattern'",
        ),
        ({"kind": "command", "target": "rm -rf /", "value": ""}, "refused knob kind 'command'"),
        (
            {"kind": "service-state", "target": "sshd.service", "value": "inactive"},
            "refused service-state target 'sshd.service'",
        ),
    ],
    ids=["etc-passwd", "dot-dot", "core_pattern", "command", "sshd"],
)
def test_a_plan_file_naming_a_file_outside_its_kinds_patterns_is_refused(
    cli: CliRunner, lair: Path, action: dict[str, Any], says: str
) -> None:
    before = hashlib.sha256(Path("/etc/passwd").read_bytes()).hexdigest()
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    plan = lair / "plan.json"
    plan.write_text(json.dumps(_plan(action)))
    for extra in (["--dry-run"], ["--yes"]):
        applied = cli("tune", "apply", "--plan", str(plan), *extra)
        assert applied.returncode == 2, applied.stderr
        assert says in applied.stderr and len(applied.stderr.strip().splitlines()) == 1, applied.stderr
    assert hashlib.sha256(Path("/etc/passwd").read_bytes()).hexdigest() == before
    assert Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text() == thp  # not even the harmless one


def test_a_probe_another_user_could_write_is_refused_as_root(cli: CliRunner, lair: Path, canary: Canary) -> None:
    evil = lair / "quietcore-probe"
    assert as_user("sh", "-c", f"printf '#!/bin/sh\\necho PWNED > {canary.path}\\n' > {evil} && chmod 755 {evil}"
                   ).returncode == 0  # fmt: skip
    ran = cli("noise", "--cpus", str(allowed_cpus()[0]), "--duration", "0.1", env={"QUIETCORE_PROBE": str(evil)})
    assert ran.returncode == 3, ran.stderr
    assert f"refusing $QUIETCORE_PROBE={evil} as root: owned by uid 65534" in ran.stderr
    assert canary.untouched()


def test_an_import_with_a_hostile_host_is_refused_field_by_field(cli: CliRunner, tmp_path: Path) -> None:
    assert cli("noise", "--cpus", str(allowed_cpus()[0]), "--duration", "0.2").returncode == 0
    exported = json.loads(cli("results", "export", "1", "--format", "json").stdout)
    exported["session"]["host"] = "../../etc"
    exported["session"]["uuid"] = "not-a-uuid; drop table"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(exported))
    imported = cli("results", "import", str(bad))
    assert imported.returncode == 2, imported.stderr
    lines = imported.stderr.strip().splitlines()
    assert "2 bad fields, nothing imported" in lines[0]
    assert any("session/host" in line for line in lines) and any("session/uuid" in line for line in lines)


def _listing(where: Path) -> list[str]:
    return sorted(str(p.relative_to(where)) for p in where.rglob("*"))


#: Every writer of quietcore's, as root would run it, with OUT the path the attacker prepared (an existing directory
#: where the writer takes only one: `exists`), and the option each must name when it refuses.
WRITERS = [
    ("report", ["report", "1", "--out", "OUT"], "--out", False),
    ("lab", ["lab", "--quick", "--report", "OUT"], "--report", False),
    ("results-export", ["results", "export", "1", "--format", "json", "--out", "OUT"], "--out", False),
    ("results-traces", ["results", "export", "1", "--format", "trace", "--out", "OUT"], "--out", False),
    ("snapshot", ["snapshot", "--out", "OUT"], "--out", False),
    ("snapshot-tar", ["snapshot", "--out", "OUT.tar.gz"], "--out", False),
    ("prometheus", ["noise", "--cpus", "0", "--duration", "0.2", "--prometheus", "OUT"], "--prometheus", True),
    ("simulate", ["simulate", "--pattern", "100:200", "--ranks", "1k", "--export-trace", "OUT"], "--export-trace",
     False),
    ("tune-tuned", ["tune", "plan", "--root", str(XEON_ROOT), "--cpus", "2-3,10-11", "--export", "tuned", "OUT"],
     "--export tuned", False),
    ("tune-script", ["tune", "plan", "--root", str(XEON_ROOT), "--cpus", "2-3,10-11", "--export", "script", "OUT"],
     "--export script", False),
]  # fmt: skip


@pytest.mark.parametrize("how", ["link-in-a-sticky-directory", "users-directory"])
@pytest.mark.parametrize(("argv", "option", "exists"), [w[1:] for w in WRITERS], ids=[w[0] for w in WRITERS])
def test_no_writer_follows_a_link_or_writes_in_a_directory_another_user_owns(
    cli: CliRunner, db_file: Path, quiet_noise: Path, lair: Path, canary: Canary, argv: list[str], option: str,
    exists: bool, how: str,
) -> None:  # fmt: skip
    """Root writes a report, an export, a snapshot, a metrics file, traces or
    a tuned profile where it is told. The user has planted a link to a
    directory only root may write (the canary's) in a directory anyone may
    write (as /tmp), or owns a directory on the path. Refused with one line
    naming the option, exit 2; nothing written in the canary's directory or
    the user's."""
    shutil.copy(quiet_noise, db_file)  # session 1, for report and export
    # GIVEN the user's link to root's directory in a sticky directory, or a directory of the user's
    sticky = lair.parent / "tmp"
    sticky.mkdir(mode=0o1777)
    sticky.chmod(0o1777)  # past the umask
    if how == "link-in-a-sticky-directory":
        assert as_user("ln", "-s", str(canary.path.parent), str(sticky / "link")).returncode == 0
        where, why = sticky / "link", f"{sticky / 'link'} is a link owned by uid 65534, not root"
    else:
        where, why = lair, f"{lair} is owned by uid 65534, not root"
    out = where if exists else where / "new"
    before = _listing(canary.path.parent), _listing(lair), _listing(sticky)
    # WHEN root runs the writer there
    proc = cli(*[str(out) + a[3:] if a.startswith("OUT") else a for a in argv])
    # THEN it refuses, naming the option and why, and writes nothing anywhere
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"refusing {option} " in proc.stderr and why in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert (_listing(canary.path.parent), _listing(lair), _listing(sticky)) == before
    assert canary.untouched()


def test_a_new_output_in_a_sticky_directory_is_roots_and_written(cli: CliRunner, db_file: Path, quiet_noise: Path,
                                                                 lair: Path) -> None:  # fmt: skip
    """What quietcore makes in a directory anyone may write (/tmp) is new and
    root's: allowed. A name there another user took first is refused."""
    shutil.copy(quiet_noise, db_file)
    sticky = lair.parent / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    made = cli("report", "1", "--out", str(sticky / "report"))
    assert made.returncode == 0, made.stderr
    st = os.lstat(sticky / "report" / "index.html")
    assert st.st_uid == 0 and not st.st_mode & 0o022
    assert as_user("mkdir", str(sticky / "taken")).returncode == 0
    taken = cli("report", "1", "--out", str(sticky / "taken"), "--force")
    assert taken.returncode == 2 and f"{sticky / 'taken'} is owned by uid 65534" in taken.stderr, taken.stderr
    assert not any((sticky / "taken").iterdir())
    dumped = cli("results", "export", "1", "--format", "json", "--out", str(sticky / "s.json"))
    assert dumped.returncode == 0 and os.lstat(sticky / "s.json").st_uid == 0, dumped.stderr
    assert as_user("touch", str(sticky / "theirs.json")).returncode == 0
    theirs = cli("results", "export", "1", "--format", "json", "--out", str(sticky / "theirs.json"), "--force")
    assert theirs.returncode == 2 and "owned by uid 65534" in theirs.stderr, theirs.stderr
    assert (sticky / "theirs.json").read_text() == ""


def test_the_default_report_beside_a_users_database_is_refused(
    cli: CliRunner, quiet_noise: Path, lair: Path, canary: Canary
) -> None:
    """The user's own database in the user's own directory, and beside it a
    link `reports` to a directory only root may write. Root runs `report`
    on that database with no --out: quietcore wrote session-1/index.html,
    report.md and figures/ through the link. Refused now, naming --out; a
    report with --out somewhere of root's still works."""
    # GIVEN the user's database and the link beside it
    user_db = lair / "user.db"
    shutil.copy(quiet_noise, user_db)
    os.chown(user_db, NOBODY, NOBODY)
    assert as_user("ln", "-s", str(canary.path.parent), str(lair / "reports")).returncode == 0
    before = _listing(canary.path.parent)
    # WHEN root reports on it, by default beside it
    proc = cli("report", "1", "--db", str(user_db))
    # THEN refused, naming --out, and nothing is written through the link
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "refusing the default report directory" in proc.stderr and "--out" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and _listing(canary.path.parent) == before
    assert canary.untouched()
    # AND --stop-above's traces beside it are refused the same way, before anything is measured
    stopped = cli("noise", "--db", str(user_db), "--cpus", "0", "--duration", "0.2", "--stop-above", "5000")
    assert stopped.returncode == 2 and "refusing --stop-above's trace directory" in stopped.stderr, stopped.stderr
    assert not (lair / "traces").exists() and canary.untouched()
