"""Measuring apart from storing: a noise run measured with no database at
all, handed over as plain JSON (as a cluster rank would), and stored by
another session, where `results show` prints it as any other."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from quietcore.facts.root import Root
from quietcore.measure import Measurer
from quietcore.probes.noise import NoiseOptions
from quietcore.report.kinds import kind_of
from quietcore.runs.model import Run
from quietcore.session import Session
from quietcore.store import db, sessions
from tests.conftest import CliRunner


@pytest.mark.slow
def test_a_run_measured_without_a_database_is_stored_elsewhere(
    tmp_path: Path, cli: CliRunner, db_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN no database anywhere this process could use
    monkeypatch.setenv("QUIETCORE_DB", str(tmp_path / "never.db"))
    cpu = max(os.sched_getaffinity(0))
    # WHEN a noise run is measured
    run = Measurer(Root("/")).noise(NoiseOptions(frozenset({cpu}), 0.3), trace="off")
    assert not (tmp_path / "never.db").exists()
    assert run.id is None and run.trace is not None and run.trace.cpus[0].cpu == cpu
    assert run.summary[0]["cpu"] == cpu and run.analysis["cpus"][0]["cpu"] == cpu
    # AND handed to another process as JSON, which stores it
    handed = Run.from_dict(json.loads(json.dumps(run.to_dict())))
    assert handed.trace is not None
    assert handed.trace.events == run.trace.events and handed.summary == run.summary
    with Session("noise", db_file, True, {"from": "rank 3"}, Root("/")) as session:
        session.add(handed)
    # THEN it is a stored run like any other
    conn = db.open_db(db_file, create=False)
    (stored,) = sessions.runs_of(conn, session.id)
    conn.close()
    assert stored.id == handed.id and stored.seq == 1 and kind_of(stored).name == "noise"
    assert stored.trace is not None and stored.trace.events == run.trace.events
    shown = cli("results", "show", str(session.id))
    assert shown.returncode == 0, shown.stderr
    assert f"Noise of CPU {cpu}, run 1" in shown.stdout


def test_a_malformed_handover_is_refused() -> None:
    with pytest.raises(ValueError, match="not a run: status 'done'"):
        Run.from_dict({"status": "done"})
