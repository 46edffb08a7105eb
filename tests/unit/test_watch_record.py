"""A job's record and what a watcher keeps: the lines of each CPU, a charge written and read back, the node's
sources told from those a job met alone, the state files an Epilog and a restart read, and the job's screen."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from quietcore.report import text
from quietcore.report.kinds import kind_of
from quietcore.store import db, sessions
from quietcore.watch import record
from quietcore.watch.charge import Charge, Source, add, cpu_of_lines, mark_shared
from quietcore.watch.ledger import Ledger


def _line(comm: str, pid: int, cpu: int, rest: str = "sched_switch: x") -> str:
    return f"{comm:>16}-{pid:<7} [{cpu:03d}] ..... 100.000001: {rest}"


def test_each_line_has_its_cpu_whatever_the_task_calls_itself() -> None:
    # a name that forges the head of another CPU's line is still right-aligned in its 16 columns
    lines = [_line("a", 1, 0), _line("x-1 [007] y", 2, 3), " => frame", _line("b", 12345678, 1000)]
    assert cpu_of_lines(lines) == [0, 3, 3, 1000]


def _charge(job: str, cpus: set[int], *sources: tuple[str, str, float]) -> Charge:
    c = Charge(job, frozenset(cpus), 2, traced_ns=2e9, job_ns=1.5e9, idle_ns=0.1e9)
    for kind, name, ns in sources:
        c.sources[(kind, name)] = Source(kind, name, ns, 3, ns / 3)
    return c


def test_a_source_another_cpu_met_in_the_same_look_is_the_nodes() -> None:
    a = _charge("1", {0}, ("vector", "local_timer", 1e6), ("task", "stress-ng (job 2)", 5e6))
    b = _charge("2", {1}, ("vector", "local_timer", 1e6))
    nobody = _charge("no job", {2}, ("task", "stress-ng", 4e6))
    mark_shared([a, b, nobody])
    assert a.sources[("vector", "local_timer")].shared and b.sources[("vector", "local_timer")].shared
    # a neighbour's task, named with its job, is the same task no job's CPU ran
    assert a.sources[("task", "stress-ng (job 2)")].shared
    alone = _charge("3", {3}, ("irq", "mlx5_comp0", 2e6), ("task", "stress-ng", 40e6))
    started_elsewhere = _charge("no job", {0}, ("task", "stress-ng", 1e6))  # its start, before it was pinned
    mark_shared([alone, b, started_elsewhere])
    assert not alone.sources[("irq", "mlx5_comp0")].shared and not alone.sources[("task", "stress-ng")].shared


def test_a_charge_read_back_is_the_charge_and_the_rest_is_summed() -> None:
    c = _charge("4711", {1, 2}, *[("task", f"t{i}", 1e6 * (i + 1)) for i in range(30)])
    c.steal_ns = 3e6
    back = Charge.from_json(json.loads(json.dumps(c.to_json())))
    assert back == c
    kept = Charge.from_json(c.to_json(10))
    assert len(kept.sources) == 11 and kept.taken_ns == c.taken_ns  # the rest as "other sources (20)"
    assert ("other", "other sources (20)") in kept.sources
    twice = add(c, c)
    assert twice.traced_ns == 2 * c.traced_ns and twice.taken_ns == 2 * c.taken_ns and twice.steal_ns == 6e6


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Ledger]:
    monkeypatch.setenv("QUIETCORE_STATE_DIR", str(tmp_path / "state"))
    if os.geteuid() != 0:
        pytest.skip("the node's state directory is root's")
    made = Ledger.open()
    yield made
    made.close()


def test_an_epilogs_request_is_answered_once_and_hostile_names_are_passed_over(ledger: Ledger) -> None:
    assert ledger.watcher() is None
    ledger.claim()
    assert ledger.watcher() == os.getpid()
    ledger.ask("4711")
    for bad in ("watch-end-../x", "watch-end-12a", "watch-end-"):
        if "/" not in bad:
            os.close(os.open(bad, os.O_CREAT | os.O_WRONLY, 0o600, dir_fd=ledger.state.fd))
    assert ledger.requests() == ["4711"]
    ledger.answer("4711", 7, "Job 4711, CPUs 1, as it ended: the OS took 1.0 ms.")
    assert ledger.requests() == []
    got = ledger.answered("4711")
    assert got is not None and got.session == 7 and got.line.startswith("Job 4711")
    assert ledger.answered("4711") is None  # read once
    ledger.release()
    assert ledger.watcher() is None


def test_what_a_watcher_kept_is_read_back_and_a_forged_file_is_none(ledger: Ledger) -> None:
    from quietcore.watch.ledger import Tracked

    live = {"4711": Tracked(_charge("4711", {1}, ("irq", "eth0", 1e6)), "2026-11-29T17:00:00", "cpuset/job_4711")}
    ledger.save(live)
    back = ledger.live()
    assert back["4711"].charge == live["4711"].charge and back["4711"].started == live["4711"].started
    for forged in ("[" * 100_000, "{not json", '{"1": {"charge": 3}}'):
        ledger._write("watch-live.json", forged)
        assert ledger.live() == {}


def test_a_jobs_record_reads_as_one_screen(tmp_path: Path) -> None:
    c = _charge("4711", {1}, ("task", "quietcore-probe", 2.2e8), ("vector", "local_timer", 4.9e7))
    mark_shared([c, _charge("no job", {0}, ("vector", "local_timer", 4e7))])
    conn = db.open_db(tmp_path / "r.db", create=True)
    try:
        sid = record.store(conn, {"kernel": {}}, "f" * 16, c, "2026-11-29T17:00:00", "cpuset/slurm/job_4711")
        row = sessions.find_session(conn, "job_4711")
        assert row.id == sid and row.tags == {"job": "4711"}
        (run,) = sessions.runs_of(conn, sid)
        assert sessions.list_sessions(conn, "job")[0].id == sid and not sessions.list_sessions(conn, "noise")
    finally:
        conn.close()
    out = text.console(file=io.StringIO())
    kind_of(run).terminal(out, run)
    shown = out.file.getvalue()  # type: ignore[attr-defined]
    prose = " ".join(shown.split())
    assert "Job 4711 on CPU 1, watched 2.0 s. Its threads ran 1.50 s." in shown
    assert "The OS took 269.0 ms, 13.45% of its CPUs' time." in prose
    rows = {line.split()[0]: line for line in shown.splitlines() if line.startswith(("quietcore-probe", "local_"))}
    assert rows["quietcore-probe"].rstrip().endswith("alone") and "11.00%" in rows["quietcore-probe"]
    assert rows["local_timer"].rstrip().endswith("with the node")
    assert "quietcore-probe: the shield: `quietcore tune apply --cpus 1` moves it off." in prose


def test_a_stored_job_of_another_hand_is_shown_without_a_traceback(tmp_path: Path) -> None:
    conn = db.open_db(tmp_path / "r.db", create=True)
    try:
        c = _charge("4711", {1})
        sid = record.store(conn, {}, "f" * 16, c, "2026-11-29T17:00:00", "x")
        with conn:
            conn.execute("UPDATE runs SET analysis = ? WHERE session_id = ?",
                         (json.dumps({"job": "4711", "cpus": "all", "sources": [{"name": 3}]}), sid))  # fmt: skip
        (run,) = sessions.runs_of(conn, sid)
    finally:
        conn.close()
    out = text.console(file=io.StringIO())
    kind_of(run).terminal(out, run)
    assert "Job 4711 on CPU" in out.file.getvalue()  # type: ignore[attr-defined]
