"""`quietcore report` as a user runs it: over two stored sessions of an
experiment, over a lab session, exports that round-trip and validate, and
bad input."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from quietcore.report.export import SCHEMA
from quietcore.store import db, sessions
from quietcore.store.schema import MIGRATIONS
from tests.conftest import CliRunner, forked_main

SCHED = ("run", "sched", "--quick", "--cells", "compute *", "--reps", "2", "--warmup", "0", "--intrusions", "off")


@pytest.fixture(scope="module")
def two_sched_sessions(tmp_path_factory: pytest.TempPathFactory, sched_quick: tuple[Path, Any]) -> Path:
    """One database with two sessions of `run sched`, shared by the tests
    here: the suite's `run sched --quick` (session 1, tagged try=1), copied,
    and a shorter one after it (session 2, the compute cells at 2 runs a
    cell, try=2: what the report compares across sessions needs no more)."""
    path = tmp_path_factory.mktemp("report") / "results.db"
    with sqlite3.connect(sched_quick[0]) as source, sqlite3.connect(path) as copy:
        source.backup(copy)
    proc = forked_main([*SCHED, "--tag", "try=2", "--json"], {**os.environ, "QUIETCORE_DB": str(path)}, 300)
    assert proc.returncode == 0, proc.stderr
    return path


@pytest.mark.slow
def test_report_over_two_sched_sessions(cli: CliRunner, two_sched_sessions: Path, tmp_path: Path) -> None:
    out = tmp_path / "rep"
    proc = cli("report", "1", "2", "--out", str(out), env={"QUIETCORE_DB": str(two_sched_sessions)})
    assert proc.returncode == 0, proc.stderr
    html = (out / "index.html").read_text()
    md = (out / "report.md").read_text()
    names = sorted(p.name for p in (out / "figures").iterdir())
    for kind in ("sched-bars", "sched-forest", "compare-1-2"):
        assert any(kind in n and n.endswith(".svg") for n in names), names
        assert any(kind in n and n.endswith(".png") for n in names), names
    assert html.count("<svg") == len(names) // 2
    assert "Experiment sched" in html and "Session 2 against session 1" in html
    assert "compute other +load" in html and "slower" in html
    # Self-contained: nothing is fetched from anywhere (namespaces are names, not fetches).
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    assert "<script" not in html and "<link" not in html and "@import" not in html
    assert "| compute other +load |" in md and "![" in md


@pytest.mark.slow
def test_report_without_out_writes_beside_the_database(cli_main: CliRunner, two_sched_sessions: Path) -> None:
    """As `lab` does: DATA/reports/session-N, said on stdout; a second report
    there replaces the first, but never a folder quietcore did not write."""
    env = {"QUIETCORE_DB": str(two_sched_sessions)}
    where = two_sched_sessions.parent / "reports" / "session-2"
    shutil.rmtree(where.parent, ignore_errors=True)
    for _ in range(2):
        proc = cli_main("report", "2", "--format", "md", env=env)
        assert proc.returncode == 0, proc.stderr
        assert f"wrote {where / 'report.md'}" in proc.stdout and (where / "report.md").is_file()
    mine = two_sched_sessions.parent / "reports" / "session-1"
    mine.mkdir()
    (mine / "notes.txt").write_text("someone's own folder\n")
    refused = cli_main("report", "1", "--format", "md", env=env)
    assert refused.returncode == 2 and "was not written by quietcore" in refused.stderr, refused.stderr
    assert (mine / "notes.txt").read_text() == "someone's own folder\n"


@pytest.mark.slow
def test_exports_round_trip_and_validate(cli_main: CliRunner, two_sched_sessions: Path, tmp_path: Path) -> None:
    env = {"QUIETCORE_DB": str(two_sched_sessions)}
    data = json.loads(cli_main("results", "export", "2", env=env).stdout)  # the session of 2 runs a cell
    schema = json.loads(cli_main("results", "schema").stdout)
    assert schema == json.loads(SCHEMA.read_text())
    jsonschema.validate(data, schema)
    # Round trip: import into a new database, export again, same content.
    other = tmp_path / "other.db"
    export = tmp_path / "s.json"
    export.write_text(json.dumps(data))
    assert cli_main("results", "import", str(export), env={"QUIETCORE_DB": str(other)}).returncode == 0
    again = json.loads(cli_main("results", "export", "1", env={"QUIETCORE_DB": str(other)}).stdout)
    assert [r["envelope"] for r in again["runs"]] == [r["envelope"] for r in data["runs"]]
    assert again["session"]["fingerprint"] == data["session"]["fingerprint"]
    # The flat table: one row per run, with the factors and the fingerprint.
    rows = list(csv.DictReader(io.StringIO(cli_main("results", "export", "2", "--format", "csv", env=env).stdout)))
    measured = [r for r in data["runs"] if "cell" in r["params"]]
    assert len(rows) == len(measured) == 6 * 2  # the six compute cells, 2 runs each
    first = next(r for r in rows if r["run_id"] == str(measured[0]["id"]))
    assert first["factor_policy"] == measured[0]["params"]["factors"]["policy"]
    assert float(first["metric_value"]) == measured[0]["envelope"]["result"]["metric"]["value"]
    assert {r["fingerprint"] for r in rows} == {data["session"]["fingerprint"]}
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "s.parquet"
    assert cli_main("results", "export", "2", "--format", "parquet", "--out", str(path), env=env).returncode == 0
    table = pq.read_table(path).to_pylist()
    assert [r["run_id"] for r in table] == [int(r["run_id"]) for r in rows]
    assert [r["metric_value"] for r in table] == [float(r["metric_value"]) for r in rows]


def test_bad_input(cli_main: CliRunner, db_file: Path, tmp_path: Path) -> None:
    conn = db.open_db(db_file)
    sessions.create_session(conn, "lab", ["quietcore", "lab"], {"x": 1}, "0" * 16, {})
    conn.close()
    out = tmp_path / "o"
    cases = [
        (["report", "9", "--out", str(out)], "no session '9' (valid: an ID 1-1"),
        (["report", "1", "--out", str(out)], "session 1 has no runs to report"),
        (["report", "--tag", "a=b", "--out", str(out)], "no session is tagged a=b"),
        (["report", "1", "--out", str(tmp_path)], f"--out {tmp_path} exists: choose a new directory, or add --force"),
        (["report", "1", "--out", str(out), "--format", "pdf"], "invalid choice: 'pdf'"),
    ]
    for args, message in cases:
        proc = cli_main(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert message in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert not out.exists()


def test_report_on_an_older_schema_migrates(cli_main: CliRunner, db_file: Path, tmp_path: Path) -> None:
    """A database written by schema 1 (before analyses and the journal)."""
    conn = sqlite3.connect(db_file)
    conn.executescript(MIGRATIONS[0])
    conn.execute("PRAGMA user_version = 1")
    conn.execute(
        "INSERT INTO sessions (uuid, command, argv, host, started_at, status, tool_version, fingerprint, facts)"
        " VALUES ('0123456789abcdef0123456789abcdef', 'latency', '[]', 'old', '2026-01-01T00:00:00', 'complete',"
        " '0.0.1', '0123456789abcdef', ?)",
        (json.dumps({"kernel": {"release": "6.1", "preempt_build": None}, "cpu": {"model": "x", "count": 1,
                     "online": "0", "smt": None, "isolated": "", "nohz_full": "", "numa_nodes": "0", "governors": []},
                     "virtualization": {"virtualized": False, "hypervisor": None, "evidence": []},
                     "thp": {"enabled": "never", "defrag": "never"}, "boot_params": {}, "cmdline": ""}),),
    )  # fmt: skip
    envelope = {"format": "quietcore-probe", "result": {"interval_us": 1000, "threshold_us": 100, "cpus": [
        {"cpu": 0, "samples": 10, "min_ns": 1, "p50_ns": 2, "p99_ns": 3, "p999_ns": 3, "max_ns": 4, "over_threshold": 0,
         "missed": 0, "histogram": {"buckets": [[1000, 2000, 10]]}}]}}  # fmt: skip
    conn.execute(
        "INSERT INTO runs (session_id, seq, kind, params, started_at, ended_at, status, envelope)"
        " VALUES (1, 1, 'latency', '{}', 'a', 'b', 'complete', ?)",
        (json.dumps(envelope),),
    )
    conn.commit()
    conn.close()
    proc = cli_main("report", "--out", str(tmp_path / "r"), "--format", "html")
    assert proc.returncode == 0, proc.stderr
    assert "Wake-up latency" in (tmp_path / "r" / "index.html").read_text()
    assert sqlite3.connect(db_file).execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
