"""`quietcore run` as a user runs it: every built-in experiment with
--quick, the sched effect that must show, levers restored after the run and
after Ctrl-C or SIGTERM, compare across sessions, and bad input."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliRunner, as_terminal_job
from tests.integration.test_cli_interrupt import _probes_of

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")
ROOT = os.geteuid() == 0


def thp_now() -> str:
    text = THP.read_text()
    return text[text.index("[") + 1 : text.index("]")]


@pytest.fixture
def thp_guard() -> Iterator[str]:
    """The node's THP setting, put back whatever the test does."""
    if not ROOT or not THP.exists():
        pytest.skip("changing THP needs root and a kernel with THP")
    before = thp_now()
    try:
        yield before
    finally:
        THP.write_text(before)


def run_json(cli: CliRunner, *args: str, timeout: float = 240) -> dict[str, Any]:
    proc = cli("run", *args, "--json", timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


def rows(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["cell"]: row for row in data["rows"]}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "warmup", "cells"),
    [("tickless", 0, "*"), ("preempt", 0, "*"), ("affinity", 0, "two on one CPU"), ("smt", 0, "*"),
     ("prefetch", 0, "random"), ("numa", 1, "*")],
)  # fmt: skip
def test_every_experiment_runs_quick_and_is_stored(
    cli: CliRunner, db_file: Path, name: str, warmup: int, cells: str
) -> None:
    """Each built-in experiment end to end, 2 runs a cell (the runner, its
    workloads and levers; the statistics have tests of their own). The
    runner is one for all, so one of them, the shortest, also has a warm-up
    a cell, to show that warm-ups are stored, and one, tickless (pinned and
    unpinned cells, the shield as a lever), has its runs traced. Where an
    experiment's cells differ only in the workload's arguments (affinity's
    layouts, prefetch's strides), one of them beside its baseline stands for
    the rest: the plans themselves are tested on fixture roots
    (tests/unit/test_experiments.py)."""
    traced = "auto" if name == "tickless" else "off"
    started = time.monotonic()
    data = run_json(cli, name, "--quick", "--seed", "7", "--reps", "2", "--warmup", str(warmup), "--intrusions", traced,
                    "--cells", cells)  # fmt: skip
    assert time.monotonic() - started < 90, "--quick should take about a minute at most"
    measured = [r for r in data["rows"] if r.get("stats")]
    assert measured, data["warnings"]
    for row in measured:
        assert row["stats"]["n"] == 2 and len(row["values"]) == 2
        assert row["median_ci"][0] <= row["stats"]["median"] <= row["median_ci"][1]
        if not row["baseline"] and "comparison" in row:
            assert row["comparison"]["verdict"]
    conn = sqlite3.connect(db_file)
    status, command = conn.execute("SELECT status, command FROM sessions").fetchone()
    kinds = [k for (k,) in conn.execute("SELECT kind FROM runs ORDER BY seq")]
    assert (status, command) == ("complete", f"run {name}")
    assert kinds[-1] == "experiment"
    # Every run is stored: warm-ups and measured ones.
    assert len(kinds) - 1 == sum(1 for r in data["rows"] if r.get("stats")) * (2 + warmup)
    if traced == "auto" and ROOT:
        runs = [(json.loads(p), json.loads(a)["context"])
                for p, a in conn.execute("SELECT params, analysis FROM runs WHERE kind = 'matmul'")]  # fmt: skip
        contexts = [c for _, c in runs]
        # (which run lost events, on which CPU's buffer, and what else ran: a CI run lost 2,168 on CPU 0)
        lost = [(p.get("cell"), c["cpus"], c["intrusions"].get("lost_by_cpu"), c["intrusions"].get("sources"))
                for p, c in runs if c["intrusions"].get("lost_events")]  # fmt: skip
        assert contexts and all("ns" in c["intrusions"] for c in contexts) and not lost, lost


@pytest.mark.slow
def test_sched_fifo_and_rr_hold_their_cpu_against_a_competitor(sched_quick: tuple[Path, dict[str, Any]]) -> None:
    if not ROOT:
        pytest.skip("fifo and rr need root or CAP_SYS_NICE")
    data = sched_quick[1]  # `run sched --quick --seed 3`, measured once for the suite
    cells = rows(data)
    for workload in ("compute", "memory", "io", "mixed"):
        other = cells[f"{workload} other +load"]["comparison"]
        # SCHED_OTHER shares the CPU with the competitor: about twice the time. Asked of the interval, as the
        # real-time cells' below: it reaches 1.5 and stands clear of a light slowdown. (The point was asked to
        # pass 1.5: quick io runs take 27-39 ms unloaded here, and a CI run's io cell read 1.49 [1.46-2.01],
        # where three runs here read 1.75-2.04.)
        if other["verdict"].startswith("slower"):
            assert other["ci_low"] > 1.2 and other["ci_high"] > 1.5, (workload, other)
        else:
            # The claim may be withheld only where the output says why: a cell of the pair whose
            # runs vary. mixed's checkpoints (write + fdatasync) stall on this guest's disk: a run of
            # 0.11 s takes 0.13-0.69 s in about one of six, whatever ran before (40 after io, 40 after compute);
            # one such run among a baseline's 7 puts it above every loaded run, and the rank test,
            # Holm-adjusted over 12 comparisons, cannot claim the 2x (a CI run: 2.04x [1.09-2.59],
            # p 0.007 before Holm, "mixed other: runs vary by ..." in its warnings).
            pair = (f"{workload} other: runs vary", f"{workload} other +load: runs vary")
            assert any(w.startswith(pair) for w in data["warnings"]), (workload, other, data["warnings"])
            assert other["ratio"] > 1.5, (workload, other)  # the medians, which a stalled run or two leave be
        for policy in ("fifo", "rr"):
            rt = cells[f"{workload} {policy} +load"]["comparison"]
            # A real-time task preempts the SCHED_OTHER competitor; RT throttling gives it at most 5 %.
            # Asked of the ratio's 95 % interval, not its point: on this guest a quick io run takes
            # about 33 or 44 ms, in the unloaded baseline too, so 7 runs a cell can put the point
            # at 1.3 by chance (1 run in 6 did); a policy that did not hold the CPU reads about 2
            # (SCHED_OTHER above), its whole interval over 1.2.
            assert rt["ci_low"] < 1.2 and rt["ratio"] < 1.5, (workload, policy, rt)
    # AND each mixed run stored its own time in I/O (its checkpoints' writes and fdatasyncs), which the
    # cell's spread is ranked against: a part of the run, more than nothing
    conn = sqlite3.connect(sched_quick[0])
    runs = [(json.loads(a)["context"]["covariates"], json.loads(e)["result"]["metric"]["value"] * 1e9)
            for a, e in conn.execute("SELECT analysis, envelope FROM runs WHERE kind = 'mixed'")]  # fmt: skip
    assert runs and all(0 < cov["io_ns"] < wall for cov, wall in runs), runs


# The thp experiment (THP set for each cell, put back after, the huge pages it gave) is measured
# once, by test_node_lock's first run, which holds the lever while a second and third start.


@pytest.mark.slow
@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_interrupt_restores_thp_and_leaves_no_workload(
    db_file: Path, journal_file: Path, thp_guard: str, how: str
) -> None:
    env = {**os.environ, "QUIETCORE_DB": str(db_file)}
    cmd = [sys.executable, "-m", "quietcore", "run", "thp", "--quick", "--reps", "50"]
    # Its own process group, as a shell job in a terminal would have, and SIGINT as such a job takes it.
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=as_terminal_job)  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        changed = False
        while not changed:
            assert time.monotonic() < deadline, "THP was never changed"
            changed = thp_now() != thp_guard and bool(_probes_of(proc.pid))
            time.sleep(0.02)
        if how == "ctrl-c":
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert thp_now() == thp_guard, err
    assert not _probes_of(proc.pid)
    assert {s for (s,) in sqlite3.connect(journal_file).execute("SELECT state FROM journal")} == {"reverted"}
    conn = sqlite3.connect(db_file)
    assert conn.execute("SELECT status FROM sessions").fetchone()[0] == "interrupted"


@pytest.mark.slow
def test_compare_shows_what_changed_and_ratios(
    cli: CliRunner, cli_main: CliRunner, cli_process: CliRunner, thp_guard: str
) -> None:
    other = "always" if thp_guard != "always" else "never"
    # 3 runs of 3 cells: what is checked is the comparison's shape, not a verdict
    prefetch = ("prefetch", "--quick", "--cells", "stride 1,stride 2,random", "--reps", "3", "--warmup", "0")
    run_json(cli, *prefetch, "--tag", "boot=before")
    THP.write_text(other)
    run_json(cli, *prefetch, "--tag", "boot=after")
    THP.write_text(thp_guard)
    proc = cli_process("compare", "boot=before", "boot=after", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert {"fact": "thp.enabled", "a": thp_guard, "b": other} in result["changes"]
    assert [c["cell"] for c in result["cells"]][:2] == ["stride 1", "stride 2"]
    for cell in result["cells"]:
        c = cell["comparison"]
        assert c["ci_low"] <= c["ratio"] <= c["ci_high"] and c["verdict"]
    text = cli_main("compare", "1", "2")
    assert "What changed in the node" in text.stdout and "thp.enabled" in text.stdout


def test_custom_command_with_factors(cli: CliRunner, db_file: Path) -> None:
    cpu = str(sorted(os.sched_getaffinity(0))[-1])
    data = run_json(cli, "custom", "--cmd", "sleep 0.01", "--factor", f"cpus={cpu}", "--factor", "load=none,same-cpu",
                    "--reps", "3", "--warmup", "0")  # fmt: skip
    cells = rows(data)
    assert set(cells) == {"sleep load=none", "sleep load=same-cpu"}
    assert cells["sleep load=none"]["baseline"]
    for row in cells.values():
        assert row["stats"]["n"] == 3 and row["stats"]["min"] >= 0.01
    conn = sqlite3.connect(db_file)
    envelope = json.loads(conn.execute("SELECT envelope FROM runs WHERE kind = 'exec' LIMIT 1").fetchone()[0])
    measured = envelope["result"]["measured"]
    assert measured["wall_ns"] >= 10_000_000 and "interrupts_on_its_cpus" in measured
    assert envelope["result"]["cpus"] == [int(cpu)]


def test_custom_file(cli: CliRunner, tmp_path: Path) -> None:
    cpu = str(sorted(os.sched_getaffinity(0))[-1])
    plan = tmp_path / "e.toml"
    plan.write_text(
        f'reps = 3\nwarmup = 0\nseed = 5\n[factors]\ncpus = ["{cpu}"]\n'
        '[[workload]]\nname = "compute"\nargs = ["--iters", "1000000"]\n'
        '[[workload]]\nname = "stride"\nargs = ["--size", "4M", "--accesses", "10000"]\n'
    )
    data = run_json(cli, "custom", "--file", str(plan))
    assert data["seed"] == 5
    assert {r["cell"]: r["stats"]["n"] for r in data["rows"]} == {"compute": 3, "stride": 3}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["warp"], "argument NAME: invalid choice: 'warp' (choose from 'tickless', 'sched', 'preempt', 'affinity', 'thp', 'smt', 'prefetch', 'numa', 'custom')"),
        ([], "run: the following arguments are required: NAME (valid: tickless, sched, preempt, affinity, thp, smt, prefetch, numa, custom)"),
        (["sched", "--reps", "0"], "invalid --reps '0' (valid: 1-10000)"),
        (["sched", "--priority", "100"], "invalid --priority '100' (valid: 1-99)"),
        (["custom", "--cmd", "no-such-command-qc --x"], "command not found: 'no-such-command-qc'"),
        (["custom"], "run custom needs exactly one of --cmd CMD or --file EXPERIMENT.toml"),
        (["custom", "--cmd", "true", "--factor", "colour=red"], "unknown factor 'colour' (valid: policy, priority, cpus, load"),
        (["custom", "--cmd", "true", "--factor", "policy=fast"], "--factor: invalid policy 'fast' (valid: other, batch, idle, fifo, rr, deadline)"),
        (["custom", "--cmd", "true", "--factor", "load=same-cpu"], "factor load=same-cpu needs a cpus factor"),
        (["thp", "--cmd", "true"], "--cmd is only for `run custom`"),
        (["sched", "--quick", "--cells", "compute *,warp *"], "--cells: 'warp *' matches no cell of sched (valid: compute other, compute other +load,"),
        (["custom", "--cmd", "true", "--factor", "cpus=1", "--factor", "disturb=sibling"], "factor disturb=sibling: CPU 1 has no sibling on this node"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_exit_2_and_nothing_is_written(
    cli_main: CliRunner, db_file: Path, args: list[str], message: str
) -> None:
    thp = THP.read_text() if THP.exists() else None
    proc = cli_main("run", *args)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and proc.stderr.count("\n") == 1
    assert not db_file.exists()
    assert (THP.read_text() if THP.exists() else None) == thp


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("reps = \n", "e.toml: not TOML: Invalid value (at line 1, column 8)"),
        ('[[workload]]\nname = "warp"\n', "unknown workload 'warp' (valid: matmul, compute"),
        ('[factors]\nthp = ["sometimes"]\n[[workload]]\nname = "compute"\n', "invalid thp value 'sometimes' (this kernel offers:"),
        ('reps = 0\n[[workload]]\nname = "compute"\n', "invalid reps 0 (valid: 1-10000)"),
        ("colour = 1\n", "unknown key 'colour'"),
    ],
)  # fmt: skip
def test_bad_custom_file(cli_main: CliRunner, tmp_path: Path, db_file: Path, text: str, message: str) -> None:
    if "thp" in text and not THP.exists():
        pytest.skip("no THP on this kernel")
    plan = tmp_path / "e.toml"
    plan.write_text(text)
    proc = cli_main("run", "custom", "--file", str(plan))
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and proc.stderr.count("\n") == 1
    assert not db_file.exists()
