"""`quietcore simulate` as a user runs it: bad input, a synthetic pattern's
study stored and reported, a measured trace with its named sources, the
exported timelines, and the round trip against `survey --coupled`."""

from __future__ import annotations

import io
import itertools
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CliRunner, allowed_cpus, mpi_loads

QUICK = ("--iterations", "200", "--repeats", "2")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ([], "give the noise: --trace SESSION[:CPU]"),
        (["--pattern", "100:10000"], "lasts 10000 µs, not less than its period (10000 µs)"),
        (["--pattern", "100:10", "--ranks", "0"], "invalid --ranks '0'"),
        (["--pattern", "100:10", "--ranks", "1k,20M"], "valid: whole numbers of ranks from 1 to 10,000,000"),
        (["--pattern", "100:10", "--granularity-us", "0,100"], "invalid --granularity-us '0,100'"),
        (["--pattern", "100:10", "--granularity-us", "-5"], "invalid --granularity-us '-5'"),
        (["--pattern", "100:10", "--collective", "alltoall"], "valid: allreduce, barrier, stencil"),
        (["--pattern", "100:10", "--phase", "half"], "invalid --phase 'half' (valid: random, common)"),
        (["--pattern", "100:10", "--model", "exact"], "invalid --model 'exact' (valid: rounds, fast)"),
        (["--pattern", "100:10", "--noise-charge", "both"], "invalid --noise-charge 'both' (valid: stretch, window)"),
        (
            ["--pattern", "100:10", "--collective", "barrier", "--algorithm", "ring"],
            "invalid --algorithm 'ring' for --collective barrier (valid: dissemination, recursive-doubling)",
        ),
        (["--pattern", "100:10", "--model", "fast", "--algorithm", "ring"], "--algorithm goes with --model rounds"),
        (["--pattern", "100:10", "--bytes", "0"], "invalid --bytes '0'"),
        (["--network", "7"], "no session '7'"),
        (
            ["--network", "1", "--latency-us", "2"],
            "--network sets L, o and G as the survey measured them: give it without --latency-us",
        ),
        (["--pattern", "100:10", "--gap-per-byte-ns", "-1"], "invalid --gap-per-byte-ns '-1'"),
        (["--pattern", "100:2000", "--scale", "5"], "gaps 5 times as long would take the whole CPU"),
        (["--trace", "7"], "no session '7'"),
        (["--trace", "x:y"], "invalid --trace 'x:y'"),
        (["--pattern", "100:10", "--trace", "1"], "not allowed with argument"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_is_stored(cli_main: CliRunner, db_file: Path, args: list[str],
                                                           words: str) -> None:  # fmt: skip
    proc = cli_main("simulate", *args)
    assert proc.returncode == 2, proc.stderr
    assert words in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert not db_file.exists() or sqlite3.connect(db_file).execute("SELECT COUNT(*) FROM sessions").fetchone() == (0,)


def test_a_database_that_cannot_be_written_fails_before_the_study(cli: CliRunner, tmp_path: Path) -> None:
    """A study of 100,000 ranks x 100,000 iterations runs for many minutes:
    a --db in a missing directory must fail first, well inside the timeout
    (it used to fail after the study, losing it)."""
    missing = tmp_path / "missing" / "r.db"
    proc = cli("simulate", "--pattern", "100:10", "--ranks", "100k", "--iterations", "100000", "--db", str(missing),
               timeout=60)  # fmt: skip
    assert proc.returncode == 1 and "directory" in proc.stderr and "does not exist" in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1 and not missing.parent.exists()


def test_a_trace_that_is_no_noise_run_or_empty_is_refused(cli: CliRunner, cli_main: CliRunner) -> None:
    """A simulate session has no trace to replay; a noise run whose
    threshold no gap passed has an empty one."""
    assert cli_main("simulate", "--pattern", "100:10", "--ranks", "10", *QUICK).returncode == 0
    proc = cli_main("simulate", "--trace", "1")
    assert proc.returncode == 2 and "session 1 has no spin-mode noise run" in proc.stderr, proc.stderr
    cpu = str(allowed_cpus()[-1])
    quiet = cli("noise", "--cpus", cpu, "--duration", "0.2", "--threshold-ns", "500000000", "--trace", "off")
    assert quiet.returncode == 0, quiet.stderr
    proc = cli_main("simulate", "--trace", "2")  # the refusal above stored nothing
    assert proc.returncode == 2 and "noise trace is empty" in proc.stderr, proc.stderr
    proc = cli_main("simulate", "--trace", "2:999")
    assert proc.returncode == 2 and f"no noise trace of CPU 999 (valid CPUs: {cpu})" in proc.stderr, proc.stderr


def test_a_pattern_study_is_stored_shown_and_reported(cli_main: CliRunner, tmp_path: Path) -> None:
    """100 Hz x 200 µs and 250 Hz x 17 µs. The slowdown never falls as N
    grows (within the seeds' spread), N = 1 pays about the net noise
    (2.4 %), the 100 Hz source costs the most at N = 1k, co-scheduled
    noise costs what one rank pays, and the study is a session that
    `results show` and `report` draw."""
    proc = cli_main("simulate", "--pattern", "100:200,250:17", "--ranks", "100,1k", "--focus", "1k",
               "--granularity-us", "100,1000", *QUICK, "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    study = json.loads(proc.stdout)
    assert study["net_noise"] == pytest.approx(0.024, rel=0.02)
    for curve in study["curves"]:
        points = curve["points"]
        assert [p["ranks"] for p in points] == [1, 10, 100, 1000]
        assert points[0]["slowdown"] == pytest.approx(1.024, abs=0.01)
        assert all(b["slowdown"] >= a["ci"][0] * 0.99 for a, b in itertools.pairwise(points)), points
    top = {g: max((r for r in study["by_source"] if r["granularity_us"] == g), key=lambda r: r["cost"])["source"]
           for g in (100.0, 1000.0)}  # fmt: skip
    assert top == {100.0: "100 Hz x 200 µs", 1000.0: "100 Hz x 200 µs"}
    co = next(r for r in study["whatifs"] if r["variant"].startswith("co-scheduled") and r["granularity_us"] == 100)
    assert co["slowdown"] == pytest.approx(1.024, abs=0.02)
    shown = cli_main("results", "show", str(study["session"]))
    assert shown.returncode == 0 and "the costliest source is" in shown.stdout and "noise costs 10% at" in shown.stdout
    out = tmp_path / "report"
    report = cli_main("report", "--out", str(out), str(study["session"]))
    assert report.returncode == 0, report.stderr
    from tests.integration.test_report_browser import in_chromium

    body, names, errors = in_chromium(out / "index.html", "simulate-report.png")
    assert "Simulated at scale" in body and "co-scheduled" in body and "the costliest source is" in body
    assert any(n.endswith("-simulate") for n in names), names
    assert errors == []


def test_a_measured_trace_names_its_sources_and_exports_its_timelines(
    cli: CliRunner, tmp_path: Path, db_file: Path, quiet_noise: Path
) -> None:
    """A 5 s noise run (the suite's, of the node at rest): every gap gets a
    source (the periodic ones the analysis finds, then the aperiodic ones by
    length), the lost time of the sources adds up to the trace's, and
    --export-trace writes the timeline the kernel replays, one gap a line."""
    cpu = str(allowed_cpus()[-1])
    shutil.copy(quiet_noise, db_file)
    export = tmp_path / "traces"
    proc = cli("simulate", "--trace", f"1:{cpu}", "--ranks", "1k", "--granularity-us", "100", *QUICK, "--json",
               "--export-trace", str(export))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    study = json.loads(proc.stdout)
    assert study["noise"] == f"session 1 (noise), CPU {cpu}" and 0 < study["net_noise"] < 0.5
    assert sum(study["lost_by_source"]) == pytest.approx(1.0)
    assert len(study["by_source"]) == len(study["sources"]) >= 1
    (trace,) = sorted(export.iterdir())
    lines = [line.split("\t") for line in trace.read_text().splitlines()]
    assert lines and all(len(f) == 2 and float(f[1]) > 0 for f in lines)
    assert [float(f[0]) for f in lines] == sorted(float(f[0]) for f in lines)
    # On an 80-column terminal each source is named whole: the table fits, a name's words wrapped, none cut
    from quietcore.report.kinds.simulate import sources_table
    from quietcore.report.screen import Screen

    screen = io.StringIO()
    Screen(file=screen, width=80).print(sources_table(study))
    table = screen.getvalue().splitlines()
    assert all(len(line) <= 80 for line in table) and "…" not in screen.getvalue()
    assert all(name.split()[-1] in screen.getvalue() for name in study["sources"])


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="the injector runs at SCHED_FIFO")
@pytest.mark.skipif(len(allowed_cpus()) < 2, reason="the injector and the survey share one CPU of two")
def test_a_recorded_trace_at_one_rank_gives_the_slowdown_survey_coupled_measured(cli_env: dict[str, str]) -> None:
    """The injector (100 Hz x 200 µs at FIFO) on CPU 1, and a one-rank
    `survey --coupled --work-us 1000` pinned there: its noise trace and its
    measured slowdown of a 1 ms quantum (mean over the fastest) come from
    the same CPU under the same noise. Simulated at N = 1 with g = the
    measured quantum, the trace must give that slowdown within 10 %, less
    the quantum's own spread, which no trace of gaps can see: on an idle CPU
    its mean is 1.04-1.08 times its fastest here (survey/coupled.py), and
    in six runs of this test's survey it read 1.02-1.14 times the trace's.
    Both must see the injection (2 % of the time at least)."""
    from quietcore.probes.runner import probe_path

    if not mpi_loads():
        pytest.skip("survey needs mpi4py (quietcore[mpi]) and an MPI library (libopenmpi-dev)")
    env = {**cli_env, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    injector = subprocess.Popen([str(probe_path()), "disturb", "--cpus", "1", "--duration", "30", "--period-us",
                                 "10000", "--burst-us", "200", "--policy", "fifo", "--priority", "50"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        survey = subprocess.run(["taskset", "-c", "1", sys.executable, "-m", "quietcore", "survey", "--duration", "3",
                                 "--coupled", "--work-us", "1000", "--json"], env=env, capture_output=True, text=True,
                                timeout=120, check=False)  # fmt: skip
    finally:
        injector.kill()
        injector.wait()
    assert survey.returncode == 0, survey.stderr
    (measured,) = json.loads(survey.stdout)["coupled"]
    g = measured["ideal_ns"] / 1e3
    proc = subprocess.run([sys.executable, "-m", "quietcore", "simulate", "--trace", "1", "--ranks", "1",
                           "--granularity-us", f"{g:.3f}", "--iterations", "3000", "--json"], env=env,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (point,) = json.loads(proc.stdout)["curves"][0]["points"]
    assert point["ranks"] == 1
    spread = 1.08  # the quantum's mean over its fastest with no noise at all, at most, on this VM
    assert 1 / 1.10 <= measured["slowdown"] / point["slowdown"] <= 1.10 * spread, (point, measured)
    assert point["slowdown"] > 1.02 and measured["slowdown"] > 1.02


def test_an_imported_trace_is_simulated_with_either_charge(cli_main: CliRunner, tmp_path: Path) -> None:
    """A trace from another tool (`results import --from trace`: no fact of its node, so no tick to hint and
    no VM known) is simulated as a measured one; with --noise-charge window the study says it charged the
    noise as LogGOPSim does, and costs no more than the default stretch (it charges a subset of the gaps)."""
    where = tmp_path / "traces"
    where.mkdir()
    rng = __import__("numpy").random.default_rng(3)
    starts = sorted(rng.uniform(0, 2e9, 400))
    for cpu in (0, 1):
        (where / f"other-rank0-cpu{cpu}.trace").write_text(
            "\n".join(f"{s:.0f}\t{rng.uniform(5e3, 400e3):.0f}" for s in starts) + "\n"
        )
    env = {"QUIETCORE_DB": str(tmp_path / "r.db")}
    assert cli_main("results", "import", "--from", "trace", str(where), env=env).returncode == 0
    got = {}
    for charge in ("stretch", "window"):
        proc = cli_main("simulate", "--trace", "1", "--ranks", "64", "--granularity-us", "100", "--iterations", "50",
                        "--repeats", "2", "--noise-charge", charge, "--json", env=env)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        study = json.loads(proc.stdout)
        assert study["noise_charge"] == charge and "session 1 (import)" in study["noise"]
        got[charge] = study["curves"][0]["points"][0]["slowdown"]
    assert 1 < got["window"] <= got["stretch"], got
