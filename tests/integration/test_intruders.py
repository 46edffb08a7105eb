"""`quietcore intruders` as a user runs it: a task planted on the watched
CPU while the workload runs is named, with the time it really ran there
(its own /proc/self/schedstat) and how it came; the session is stored and
reported; bad input and a user without root get one line."""

from __future__ import annotations

import contextlib
import heapq  # noqa: F401  (loaded before as_nobody forks: nobody cannot read /root)
import io
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import quietcore.attribution.sampled
import quietcore.commands.intruders  # noqa: F401
from quietcore import cli as quietcore_cli
from quietcore.attribution import instances
from quietcore.attribution.intruders import came_of
from quietcore.facts.procstat import CpuTimes, parse_proc_stat, steal_delta_ns
from quietcore.probes.runner import probe_path
from quietcore.report.came import words
from quietcore.report.spread import runs
from tests.conftest import PINGPONG, CliRunner, allowed_cpus, as_nobody

ROOT = os.geteuid() == 0
TRACEFS = Path("/proc/filesystems").read_text().count("tracefs") > 0
CPU = max(allowed_cpus())
#: 2 ms of work every 10 ms for 1 s, pinned to the watched CPU; at its end it
#: prints how long it ran, from the kernel's own account of it, and leaves at
#: once: Python's own shutdown ran 5-15 ms after that account here, which the
#: trace saw and the account did not.
PLANTED = """
import os, time
end = time.monotonic() + 1.0
while time.monotonic() < end:
    t = time.monotonic()
    while time.monotonic() - t < 0.002:
        pass
    time.sleep(0.008)
print(open("/proc/self/schedstat").read().split()[0], flush=True)
os._exit(0)
"""


def said(came: object) -> dict[str, int]:
    """How a stored source came, each way in its words (report.came), with its count."""
    return {words(c): n for c, n in came_of(came)}


def _cpu_times() -> dict[int, CpuTimes]:
    return parse_proc_stat(Path("/proc/stat").read_text())


def _tracing(pid: int) -> bool:
    """Whether that quietcore's tracefs instance is tracing (it may be half made)."""
    for base in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing"):
        try:
            if (Path(base) / "instances" / f"quietcore-{pid}" / "tracing_on").read_text().strip() == "1":
                return True
        except OSError:
            continue
    return False


@pytest.mark.skipif(not ROOT or not TRACEFS, reason="tracefs needs root")
def test_a_planted_task_is_named_with_the_time_it_ran_and_its_waker(
    cli_env: dict[str, str], db_file: Path, tmp_path: Path
) -> None:
    # GIVEN intruders watching CPU while `sleep 1.8` (pinned there) is the workload
    argv = [sys.executable, "-m", "quietcore", "intruders", "--cpus", str(CPU), "--explain-above", "1000", "--json",
            "--", "sleep", "1.8"]  # fmt: skip
    proc = subprocess.Popen(argv, env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    planted = None
    try:
        deadline = time.monotonic() + 20
        while not _tracing(proc.pid):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.01)
        time.sleep(0.05)  # past the trace's first mark, which bounds the window counted
        # WHEN another task takes 20 % of that CPU meanwhile
        times = _cpu_times()
        planted = subprocess.Popen([sys.executable, "-c", PLANTED], stdout=subprocess.PIPE, text=True,
                                   preexec_fn=lambda: os.sched_setaffinity(0, {CPU}))  # fmt: skip
        ran_ns = int(planted.communicate(timeout=30)[0])
        stolen = steal_delta_ns(times, _cpu_times(), os.sysconf("SC_CLK_TCK")).get(CPU, 0.0)  # the host's, of that vCPU
        out, err = proc.communicate(timeout=60)
    finally:
        for p in (proc, planted):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
    assert proc.returncode == 0, err
    data = json.loads(out)
    (cpu,) = data["cpus"]
    assert cpu["cpu"] == CPU and 1.7e9 < cpu["traced_ns"] < 2.8e9
    assert data["lost_events"] == 0 and data["exit_status"] == 0
    # quietcore's own reader: off the watched CPU, a few ms of CPU a second (issue 33 aims at 2 % of one at 384
    # CPUs; 0.7 % here at 2), counted from its own thread's CPU time
    reader = data["reader"]
    assert CPU not in reader["cpus"] and reader["cpu_ms"] > 0 and reader["share_of_one"] < 0.05, reader
    # each CPU's buffer read raw, a page at a time, and told as text after the run
    assert reader["read"] == "per-CPU raw pages" and reader["told_ms"] > 0, reader
    # THEN it is named by pid, with the time the kernel says it ran (the trace counts it net of interrupts;
    # the kernel's account, unlike the trace, leaves out what the host stole, which /proc/stat counts in
    # 10 ms steps: one more step is allowed when there was any)
    mine = [s for s in cpu["sources"] if s["kind"] == "task" and s["pid"] == planted.pid]
    traced = sum(s["ns"] for s in mine)
    steal = stolen + 10e6 if stolen else 0.0
    assert -0.03 * ran_ns - 3e6 <= traced - ran_ns <= 0.03 * ran_ns + 3e6 + steal, (traced, ran_ns, stolen, mine)
    # AND woken by its sleep's timer on that CPU, about once per 10 ms
    came = {how: n for s in mine for how, n in said(s["came"]).items()}
    assert sum(n for how, n in came.items() if how.startswith("woken by hrtimer_wakeup")) >= 50, came
    assert all(s["fix"].startswith("the shield") and "Audit: task.placement." in s["fix"] for s in mine)
    # AND the workload (sleep) is not an intruder; the whole window is accounted for
    assert not any(s.get("pid") == data.get("workload_pid") for s in cpu["sources"] if s["kind"] == "task")
    total = cpu["workload_ns"] + cpu["idle_ns"] + cpu["intruded_ns"]
    assert total == pytest.approx(cpu["traced_ns"], rel=1e-6)
    assert data["lost_events"] == 0 and data["exit_status"] == 0
    # AND --explain-above 1000: the stretches it took, each with its slice, its waker and the waker's kernel stack
    (stretches,) = data["explained"]["cpus"]
    assert stretches["over"] >= 50 and len(stretches["gaps"]) == 20
    slices = [e for g in stretches["gaps"] for e in g["inside"] if e["kind"] == "task" and e["pid"] == planted.pid]
    woken = [e for e in slices if any(h.startswith("woken by hrtimer_wakeup") for h in said(e["came"]))]
    # Most by its sleep's timer (the longest stretches also hold its start-up, woken by block I/O, and slices
    # another task cut in two, which are shorter)
    assert len(woken) >= 10 and len(woken) >= 2 * len(slices) / 3, [e["came"] for e in slices]
    assert sum(e["ns"] >= 1.5e6 for e in woken) >= 10, slices
    # Kernel stacks where this kernel records them (not from idle on CPU 1 here), each with its own context
    stacked = [e for g in stretches["gaps"] for e in g["inside"] if e["stack"]]
    assert len(stacked) >= 3, stretches["gaps"]
    entry = {"task": ("try_to_wake_up",), "vector": ("sysvec_",), "softirq": ("handle_softirqs",),
             "timer": ("__run_timers", "__hrtimer_run_queues"), "work": ("process_one_work",), "irq": ("handle_irq",),
             "ipi": ("__flush_smp_call_function_queue", "generic_smp_call_function_single_interrupt")}  # fmt: skip
    for e in stacked:
        assert any(f.startswith(entry[e["kind"]]) for f in e["stack"]), e


@pytest.mark.skipif(not ROOT or not TRACEFS, reason="tracefs needs root")
def test_a_watch_without_workload_is_stored_and_reported(
    cli_process: CliRunner, cli_main: CliRunner, db_file: Path, tmp_path: Path
) -> None:
    # As `python -m quietcore`: the bound on the traced span is quietcore's own pace between its marks, which
    # a child forked from this large process slows (its first writes copy pages: 205.8 ms once, forked)
    proc = cli_process("intruders", "--cpus", str(CPU), "--duration", "0.2")
    assert proc.returncode == 0, proc.stderr
    assert f"Who ran on CPU {CPU} besides nothing (no workload):" in proc.stdout
    # the whole 0.2 s is traced (and a little more: the marks around it, on a loaded VM up to a few ms)
    traced = re.search(rf"CPU {CPU}: ([\d.]+) ms traced", proc.stdout)
    assert traced and 200.0 <= float(traced[1]) < 205.0, proc.stdout
    shown = cli_main("results", "show", "1")
    assert shown.returncode == 0 and f"CPU {CPU}: {traced[1]} ms traced" in shown.stdout, shown.stderr
    report = cli_main("report", "1", "--out", str(tmp_path / "rep"))
    assert report.returncode == 0, report.stderr
    assert f"### Intruders on CPU {CPU}\n" in (tmp_path / "rep" / "report.md").read_text()
    # Tracing is as it was: quietcore's instance is gone.
    for base in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing"):
        assert not list(Path(base).glob("instances/quietcore-*"))


@pytest.mark.skipif(not ROOT or not TRACEFS, reason="tracefs needs root")
def test_an_instance_a_killed_quietcore_left_tracing_is_removed_by_the_next_command(cli: CliRunner) -> None:
    # GIVEN the instance of a quietcore killed outright: every CPU traced, events on, a stacktrace trigger set
    dead = _dead_pid()
    base = instances.mounted()
    assert base is not None
    left = base / "instances" / f"quietcore-{dead}"
    left.mkdir()
    try:
        (left / "events" / "sched" / "sched_switch" / "enable").write_text("1")
        (left / "events" / "sched" / "sched_waking" / "trigger").write_text("stacktrace if cpu == 0")
        assert (left / "tracing_on").read_text().strip() == "1"
        # WHEN any command runs next, one that only reads the node
        done = cli("audit", "--json", "--verbose")  # the journal's housekeeping: said when asked
        # THEN the instance is gone, and it says so
        assert done.returncode == 0, done.stderr
        assert not left.exists()
        assert f"removed the tracefs instance quietcore-{dead}, left tracing every CPU" in done.stderr
    finally:
        if left.exists():
            (left / "events" / "sched" / "sched_waking" / "trigger").write_text("!stacktrace")
            left.rmdir()


def _dead_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cpus", "1"], "intruders needs exactly one of --duration S or -- CMD [ARGS...]"),
        (["--cpus", "1", "--duration", "1", "--", "true"], "intruders needs exactly one of --duration S or -- CMD"),
        (["--cpus", "99", "--duration", "1"], "invalid --cpus 99: not a CPU this process may run on"),
        (["--cpus", "1", "--duration", "0"], "invalid --duration '0' (valid: 0.01-3600)"),
        (["--cpus", "1", "--no-pin", "--duration", "1"], "--no-pin goes with a command (-- CMD)"),
        (["--cpus", "1", "--", "no-such-command-qc"], "invalid command: command not found: 'no-such-command-qc'"),
        (["--cpus", "", "--duration", "1"], "invalid --cpus ''"),
        (["--cpus", "1", "--duration", "1", "--buffer-kb", "2"], "invalid --buffer-kb '2' (valid: 4-1048576)"),
        (["--cpus", "1", "--duration", "1", "--explain-above", "-5"], "invalid --explain-above '-5'"),
    ],
)  # fmt: skip
def test_bad_input(cli_main: CliRunner, db_file: Path, args: list[str], message: str) -> None:
    proc = cli_main("intruders", *args)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and proc.stderr.count("\n") == 1
    assert not db_file.exists()


@pytest.fixture
def nobodys() -> Iterator[Path]:
    """A directory user nobody may write, under one anyone may enter."""
    base = Path(tempfile.mkdtemp(prefix="qc-nobody-"))
    base.chmod(0o777)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _as_nobody(argv: list[str], tmp: Path) -> dict[str, Any]:
    """quietcore's main, run by user nobody in a forked child (nobody cannot
    read this machine's Python under /root: what it needs is loaded first)."""
    env = {"QUIETCORE_DB": str(tmp / "r.db"), "XDG_DATA_HOME": str(tmp), "QUIETCORE_STATE_DIR": str(tmp / "state")}

    def work(answer: dict[str, Any]) -> None:
        os.environ.update(env)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            answer["code"] = quietcore_cli.main(argv)
        answer["out"], answer["err"] = out.getvalue(), err.getvalue()

    return as_nobody(work)


@pytest.mark.skipif(not ROOT, reason="plays a user without root: needs root to become one")
def test_without_root_it_samples_and_names_the_task_with_its_time(nobodys: Path) -> None:
    # GIVEN a task taking 20 % of the CPU, and a user without root
    pin = lambda: os.sched_setaffinity(0, {CPU})  # noqa: E731
    planted = subprocess.Popen([sys.executable, "-c", PLANTED.replace("1.0", "3.0")], stdout=subprocess.DEVNULL,
                               preexec_fn=pin)  # fmt: skip
    try:
        time.sleep(0.3)
        before = int(Path(f"/proc/{planted.pid}/schedstat").read_text().split()[0])
        t0 = time.monotonic()
        answer = _as_nobody(["intruders", "--cpus", str(CPU), "--duration", "1", "--json"], nobodys)
        ran = int(Path(f"/proc/{planted.pid}/schedstat").read_text().split()[0]) - before
        elapsed = time.monotonic() - t0
    finally:
        planted.kill()
        planted.wait()
    # THEN it samples, says so and what sampling misses, and names the task with the time it ran
    assert answer.get("code") == 0, answer
    data = json.loads(answer["out"])
    assert data["mode"] == "sampled" and data["misses"].startswith("it samples every 50 ms.")
    (cpu,) = data["cpus"]
    mine = [s for s in cpu["sources"] if s["kind"] == "task" and s["pid"] == planted.pid]
    assert mine, cpu["sources"]
    # its own CPU time over the sampled second: 20 % of the run (the child's life is a little longer)
    assert 0.8 * ran * 1.0 / elapsed <= mine[0]["ns"] <= 1.2 * ran, (mine[0]["ns"], ran, elapsed)
    assert mine[0]["fix"].startswith("the shield")
    # AND what needs the tracer says so
    refused = _as_nobody(["intruders", "--cpus", str(CPU), "--duration", "1", "--explain-above", "50"], nobodys)
    assert refused.get("code") == 3, refused
    expected = (
        "quietcore: error: --explain-above needs the tracer: tracefs needs root: run as root for traced attribution"
    )
    assert refused["err"].strip() == expected


#: Spins half of each second on the watched CPU, for 10 s at most.
BURSTS = """
import time
end = time.monotonic() + 10
while time.monotonic() < end:
    t = time.monotonic()
    while time.monotonic() - t < 0.5:
        pass
    time.sleep(0.5)
"""


@pytest.mark.skipif(not ROOT or not TRACEFS, reason="tracefs needs root")
def test_run_names_the_task_that_made_some_runs_slow(cli: CliRunner, db_file: Path) -> None:
    # GIVEN a task that takes CPU half of each second, then runs of a user's command pinned there (16: Sen's
    # interval over two clusters of runs, with and without the task, is wide; with 10 runs its lower bound
    # fell to 13 % once here, under the 20 % the claim needs, with 98 % of the excess explained)
    bursts = subprocess.Popen([sys.executable, "-c", BURSTS], preexec_fn=lambda: os.sched_setaffinity(0, {CPU}))
    try:
        proc = cli("run", "custom", "--cmd", "python3 -c 'sum(range(4000000))'", "--factor", f"cpus={CPU}",
                   "--reps", "16", "--warmup", "0", "--seed", "1", "--json")  # fmt: skip
    finally:
        bursts.kill()
        bursts.wait()
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    (row,) = data["rows"]
    assert row["extra"]["intruders"].endswith(" ms")
    # THEN the spread is explained by that task, named by pid, with the method and its interval
    (spread,) = data["spread"]
    assert spread["explained"], spread
    assert spread["source"]["name"].endswith(f"(pid {bursts.pid})") and spread["source"]["slow_ms"] > 10
    lo, hi = spread["interval"]
    assert 0.2 <= lo <= spread["share"] <= hi
    assert "Theil-Sen" in spread["method"]
    # AND every run stored its intrusions and covariates
    conn = sqlite3.connect(db_file)
    stored = [json.loads(a) for (a,) in conn.execute("SELECT analysis FROM runs WHERE kind = 'exec' ORDER BY seq")]
    assert len(stored) == 16
    # AND the slow runs it names are those that had the task (runs numbered in the order they ran)
    hit = {i + 1 for i, a in enumerate(stored)
           if sum(x["ns"] for x in a["context"]["intrusions"]["sources"] if x["pid"] == bursts.pid) > 10e6}  # fmt: skip
    assert len(set(spread["slow"]) & hit) >= 2 * len(spread["slow"]) / 3, (spread["slow"], hit)
    for analysis in stored:
        context = analysis["context"]
        assert context["cpus"] == [CPU] and context["intrusions"]["lost_events"] == 0
        assert {"ctxsw_involuntary", "minor_faults", "steal_ns"} <= set(context["covariates"])


def test_run_without_intrusions_says_why_in_every_run(cli: CliRunner, db_file: Path) -> None:
    proc = cli("run", "custom", "--cmd", "true", "--reps", "3", "--warmup", "0", "--intrusions", "off", "--json")
    assert proc.returncode == 0, proc.stderr
    (spread,) = json.loads(proc.stdout)["spread"]
    assert spread["why_not"] == "--intrusions off"
    assert runs(spread)[0] == "true: intrusions are not accounted, since --intrusions off."
    conn = sqlite3.connect(db_file)
    for (a,) in conn.execute("SELECT analysis FROM runs WHERE kind = 'exec'"):
        assert json.loads(a)["context"]["intrusions"] == {"why_not": "--intrusions off"}


@pytest.mark.skipif(not ROOT or not TRACEFS, reason="tracefs and SCHED_FIFO need root")
def test_noise_explains_each_long_gap_with_the_task_that_ran_in_it(cli: CliRunner) -> None:
    # GIVEN a SCHED_FIFO disturber that runs 800 µs every 10 ms on the measured CPU: longer than most of the
    # host's stalls on this VM (0.5-1.5 ms, in three suites of 2026-11-29 5 to 7 of the 20 longest gaps
    # beside 300 µs slices)
    argv = [str(probe_path()), "disturb", "--cpus", str(CPU), "--period-us", "10000", "--burst-us", "800",
            "--policy", "fifo", "--priority", "1", "--duration", "5"]  # fmt: skip
    disturber = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert disturber.stderr is not None and "running" in disturber.stderr.readline()
        tids = {int(t) for t in os.listdir(f"/proc/{disturber.pid}/task")}
        # WHEN noise measures it with --explain-above 200 µs
        proc = cli("noise", "--cpus", str(CPU), "--duration", "1", "--explain-above", "200", "--json")
    finally:
        disturber.kill()  # never leave a real-time spinner behind
        disturber.wait()
    assert proc.returncode == 0, proc.stderr
    explained = json.loads(proc.stdout)["explained"]
    (cpu,) = explained["cpus"]
    assert explained["above_ns"] == 200e3 and cpu["over"] >= 50 and len(cpu["gaps"]) == 20
    # THEN half of the 20 longest gaps or more hold a slice of the disturber, woken by its timer (the rest, the
    # host's stalls: 7 of 20 once in 16 runs here, at 800 µs; 13 at 300 µs in a suite)
    held = 0
    for gap in cpu["gaps"]:
        mine = [e for e in gap["inside"] if e["kind"] == "task" and e["pid"] in tids]
        if mine and mine[0]["ns"] >= 650e3 and any(h.startswith("woken by hrtimer_wakeup")
                                                   for h in said(mine[0]["came"])):  # fmt: skip
            held += 1
        assert 0 <= gap["untraced_ns"] <= gap["duration_ns"]
    assert held >= 10, cpu["gaps"]


@pytest.mark.skipif(not ROOT or not TRACEFS, reason="tracefs and SCHED_FIFO need root")
def test_noise_stops_at_the_first_long_gap_keeps_its_trace_and_runs_the_command(
    cli: CliRunner, cli_main: CliRunner, db_file: Path, tmp_path: Path
) -> None:
    argv = [str(probe_path()), "disturb", "--cpus", str(CPU), "--period-us", "10000", "--burst-us", "300",
            "--policy", "fifo", "--priority", "1", "--duration", "5"]  # fmt: skip
    disturber = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = tmp_path / "env.txt"
    hook = f"sh -c 'env | grep ^QUIETCORE_ > {seen}'"
    try:
        assert disturber.stderr is not None and "running" in disturber.stderr.readline()
        tids = {int(t) for t in os.listdir(f"/proc/{disturber.pid}/task")}
        proc = cli("noise", "--cpus", str(CPU), "--duration", "5", "--stop-above", "200", "--on-threshold", hook)
    finally:
        disturber.kill()  # never leave a real-time spinner behind
        disturber.wait()
    assert proc.returncode == 0, proc.stderr
    # THEN it stops at the first burst (one a 10 ms), not after 5 s
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("Stopped at a gap of ")]
    kept = Path(line.rsplit(": ", 1)[1])
    assert kept == db_file.parent / "traces" / "session-1-gap.txt"
    measured = json.loads(cli_main("results", "export", "1").stdout)["runs"][0]["envelope"]["result"]["cpus"][0]
    assert measured["stopped_above"] and measured["measured_ns"] < 1e9 and measured["events"][-1][1] >= 200e3
    # AND the kept trace, in the kernel's text format, holds the disturber switching in
    text = kept.read_text()
    assert text.startswith("# quietcore: the trace around the gap of ") and "sched_switch" in text
    assert any(f"next_pid={tid} " in text for tid in tids), text[-2000:]
    # AND the command ran with the gap in its environment
    env = dict(x.split("=", 1) for x in seen.read_text().split())
    assert env["QUIETCORE_GAP_CPU"] == str(CPU) and env["QUIETCORE_TRACE"] == str(kept)
    assert float(env["QUIETCORE_GAP_NS"]) >= 200e3 and env["QUIETCORE_SESSION"] == "1"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--on-threshold", "true"], "--on-threshold goes with --stop-above US"),
        (["--stop-above", "50", "--on-threshold", "no-such-command-qc"], "invalid --on-threshold: command not found"),
        (["--stop-above", "50", "--mode", "ftq"], "--stop-above needs --mode spin (the tracer's gaps)"),
        (["--explain-above", "0"], "invalid --explain-above '0' (valid: 1-10000000)"),
        (["--explain-above", "50", "--mode", "fwq"], "--explain-above needs --mode spin (the tracer's gaps)"),
        (["--explain-above", "50", "--trace", "off"], "--explain-above needs the tracer: leave out --trace off"),
    ],
)  # fmt: skip
def test_explain_above_bad_input(cli_main: CliRunner, db_file: Path, args: list[str], message: str) -> None:
    proc = cli_main("noise", "--cpus", str(CPU), "--duration", "0.1", *args)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and proc.stderr.count("\n") == 1
    assert not db_file.exists()


#: One thread spins on the watched CPU; another, on the other CPU, maps and
#: unmaps memory of the same process: each unmap flushes the spinner's TLB
#: with an IPI. The spinner hashes, which runs without the GIL: a spinning
#: Python loop held it, the unmapper waited for it, and while the spinner in
#: turn waited its CPU idled, lazy, and was sent no flush (22-104 of ~400
#: unmaps were; hashing, 437-448).
UNMAPPER = """
import hashlib, mmap, os, sys, threading, time
watched, other = int(sys.argv[1]), int(sys.argv[2])
stop = time.monotonic() + 1.0
def spin():
    os.sched_setaffinity(0, {watched})
    block = bytes(1 << 22)
    while time.monotonic() < stop:
        hashlib.sha256(block)
def unmap():
    os.sched_setaffinity(0, {other})
    while time.monotonic() < stop:
        m = mmap.mmap(-1, 1 << 20)
        m[0] = m[4096] = 1
        m.close()
        time.sleep(0.002)
a, b = threading.Thread(target=spin), threading.Thread(target=unmap)
a.start(); time.sleep(0.05); b.start(); a.join(); b.join()
"""


@pytest.mark.skipif(not ROOT or not TRACEFS or len(allowed_cpus()) < 2, reason="tracefs needs root; two CPUs")
def test_an_ipi_is_named_with_its_sender_and_call_site(cli: CliRunner) -> None:
    other = min(allowed_cpus())
    proc = cli("intruders", "--cpus", str(CPU), "--no-pin", "--json", "--",
               sys.executable, "-c", UNMAPPER, str(CPU), str(other))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (cpu,) = json.loads(proc.stdout)["cpus"]
    (tlb,) = [s for s in cpu["sources"] if s["kind"] == "ipi" and s["name"] == "flush_tlb_func"]
    # THEN the TLB flushes are named, most sent by the workload's own thread on the other CPU, with the call site
    ours = sum(
        n for how, n in said(tlb["came"]).items() if how.startswith(f"sent by the workload on CPU {other} from ")
    )
    assert tlb["count"] >= 10 and ours >= 2 * tlb["count"] / 3, tlb  # (KVM flushes a preempted vCPU without one)
    assert tlb["fix"].startswith("the workload's own munmap or mprotect") and "nothing isolation can fix" in tlb["fix"]


@pytest.mark.skipif(not ROOT or not TRACEFS or len(allowed_cpus()) < 2, reason="tracefs needs root; two CPUs")
def test_a_burst_wakes_the_reader_and_a_buffer_too_small_says_what_it_lost(cli: CliRunner) -> None:
    # A burst in the default 1 MB buffers: read as the kernel says a buffer is a quarter full, nothing lost.
    # (Read at set times, a quiet buffer every 0.25 s, the same burst lost 44,000 events of each such run.)
    burst = cli("intruders", "--cpus", str(CPU), "--no-pin", "--json", "--", sys.executable, "-c", PINGPONG, str(CPU))
    assert burst.returncode == 0, burst.stderr
    data = json.loads(burst.stdout)
    assert data["lost_events"] == 0 and data["reader"]["read"] == "per-CPU raw pages", (
        data["lost_by_cpu"],
        data["reader"],
    )
    # The same burst into 4 KB a CPU, and another on the reader's CPU, which it shares with two more: the
    # kernel lost some, and the run says how many and where
    other = min(allowed_cpus())
    proc = cli("intruders", "--cpus", str(CPU), "--buffer-kb", "4", "--no-pin", "--", sys.executable, "-c", PINGPONG,
               str(CPU), str(other))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())  # a warning wrapped to the width of a file, as one line
    lost = re.search(r"warning: the kernel lost ([\d,]+) trace events, its buffer full between reads: "
                     r"((?:CPU \d+ [\d,]+(?:; )?)+)(?: and \d+ more CPUs)?\.", text)  # fmt: skip
    assert lost and int(lost[1].replace(",", "")) > 0, proc.stdout
    # and which CPUs' buffers lost them (every CPU is traced, to see senders and wakers)
    listed = [int(n.replace(",", "")) for n in re.findall(r"CPU \d+ ([\d,]+)", lost[2])]
    assert listed and sum(listed) <= int(lost[1].replace(",", "")), lost[0]
    assert "more --buffer-kb keeps them" in text
