"""`quietcore survey` under a real Open MPI (mpirun, Debian's openmpi-bin)
with mpi4py and under a real single-node Slurm (srun --mpi=pmix): the
session rank 0 writes, the ranks' CPUs, the clock offsets, the gather in
several rounds, a planted odd node, and the refusals (no mpi4py, a PMI
mismatch under srun, no launcher)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from quietcore.store.db import open_db
from quietcore.store.sessions import runs_of
from tests.conftest import CliRunner, allowed_cpus, mpi_loads, slurm_node

HAVE_MPI = bool(shutil.which("mpirun")) and mpi_loads()
NEEDS_MPI = pytest.mark.skipif(not HAVE_MPI, reason="needs mpirun and an MPI library (openmpi-bin libopenmpi-dev) "
                               "and mpi4py (quietcore[mpi])")  # fmt: skip
TWO_CPUS = pytest.mark.skipif(len(allowed_cpus()) < 2, reason="two ranks, one CPU each")
ROOT_OK = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}  # Open MPI refuses root without


def mpirun(env: dict[str, str], ranks: int, *args: str, timeout: float = 120,
           bind: str = "core") -> subprocess.CompletedProcess[str]:  # fmt: skip
    env = {**env, **ROOT_OK}
    forward = [x for name in ("PATH", "PYTHONPATH", "QUIETCORE_PROBE", "QUIETCORE_DB", "QUIETCORE_STATE_DIR",
                              "QUIETCORE_GATHER_LIMIT") if name in env for x in ("-x", name)]  # fmt: skip
    argv = ["mpirun", "-n", str(ranks), "--oversubscribe", "--bind-to", bind, *forward,
            sys.executable, "-m", "quietcore", "survey", *args]  # fmt: skip
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def stored(db: Path) -> list[tuple[str, dict[str, Any], dict[str, Any], str]]:
    """Each run of session 1, its envelope whole (the store keeps a noise run's events apart from it)."""
    with contextlib.closing(open_db(db, create=False)) as conn:
        return [(r.kind, r.params, r.analysis, json.dumps(r.full_envelope())) for r in runs_of(conn, 1)]


@NEEDS_MPI
@TWO_CPUS
def test_two_ranks_under_mpirun_make_one_session(
    cli: CliRunner, cli_env: dict[str, str], db_file: Path, tmp_path: Path
) -> None:
    """mpirun -n 2: one session, a noise run per rank on its own CPU, the
    survey's run with each rank's clock offset and uncertainty. The events
    come over in several Gatherv rounds (a limit of 64 elements a round
    forces them) and arrive whole. Then its exports per node (netgauge /
    LogGOPSim traces, PSNAP histograms, the flat table's host and rank
    columns) and each node's metrics file."""
    import csv
    import io

    metrics = tmp_path / "metrics"
    metrics.mkdir()
    proc = mpirun({**cli_env, "QUIETCORE_GATHER_LIMIT": "64"}, 2, "--duration", "1", "--json", "--prometheus",
                  str(metrics))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    runs = stored(db_file)
    assert [kind for kind, *_ in runs] == ["noise", "noise", "survey"]
    survey = runs[-1][2]
    assert survey == {k: v for k, v in out.items() if k != "session"}
    nodes = survey["nodes"]
    assert isinstance(nodes, list) and [n["rank"] for n in nodes] == [0, 1]
    assert sorted(n["cpus"] for n in nodes) == ["0", "1"], "mpirun --bind-to core gives each rank one CPU"
    assert nodes[0]["clock"]["uncertainty_ns"] == 0
    # One host: the offset is nothing, known to half the best round trip (microseconds here).
    assert 0 < nodes[1]["clock"]["uncertainty_ns"] < 1e6 and abs(nodes[1]["clock"]["start_ns"]) < 1e6
    assert survey["gather_rounds"] > 1
    for _, params, _, envelope in runs[:2]:
        cpu = json.loads(envelope)["result"]["cpus"][0]
        assert len(cpu["events"]) == cpu["events_recorded"] > 0, "events lost in the gather"
        assert params["survey"]["rank"] in (0, 1)
    # The network to rank 1 by ping-pong, in LogGP's terms: sane on one host (shared memory through mpi4py)
    net = survey["network"]
    assert net["peer"].endswith(":1") and net["across_hosts"] is False
    assert 0 < net["overhead_ns"] < 50e3 and 0 <= net["latency_ns"] < 50e3 and 0 < net["per_byte_ns"] < 10
    # (8 B is slower than 64 B through Open MPI's shared memory here, every time: a size need not
    # cost more than a smaller one, but 128 KiB costs more than 8 B, and the fit holds every size)
    half = net["half_round_trip_ns"]
    assert half[-1] > 2 * half[0] and net["fit_worst_ratio"] < 1, net
    # --prometheus DIR: this node's first rank wrote both ranks' CPUs, with the values stored
    written = (metrics / "quietcore.prom").read_text()
    assert 'command="survey"' in written
    for cpu, measured, lost in sqlite3.connect(db_file).execute("SELECT cpu, measured_ns, lost_ns FROM noise_cpu"):
        line = next(m for m in written.splitlines() if m.startswith(f'quietcore_available_ratio{{cpu="{cpu}"}}'))
        assert float(line.split()[-1]) == pytest.approx(1 - lost / measured, rel=1e-9)
    export = ("results", "export", "1")
    out = tmp_path / "traces"
    proc = cli(*export, "--format", "trace", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    host = socket.gethostname()
    files = sorted(p.name for p in out.iterdir())
    assert files == [f"{host}-rank0-cpu0.trace", f"{host}-rank1-cpu1.trace"]
    runs = stored(db_file)
    for name, (_, params, _, envelope) in zip(files, runs[:2], strict=True):
        lines = (out / name).read_text().splitlines()
        cpu = json.loads(envelope)["result"]["cpus"][0]
        assert len(lines) == len(cpu["events"]) and params["survey"]["host"] == host
        start, length = (float(x) for x in lines[0].split("\t"))
        assert start >= 0 and length > 0
    psnap = cli(*export, "--format", "psnap").stdout.splitlines()
    ranks = {line.split()[0] for line in psnap}
    assert ranks == {"0", "1"} and all(line.split()[3] == host for line in psnap)
    assert sum(int(line.split()[2]) for line in psnap) == sum(len(json.loads(e)["result"]["cpus"][0]["events"])
                                                              for *_, e in runs[:2])  # fmt: skip
    table = cli(*export, "--format", "csv").stdout
    rows = list(csv.DictReader(io.StringIO(table)))
    assert sorted((r["host"], r["rank"]) for r in rows) == [(host, "0"), (host, "1")]
    bad = cli(*export, "--format", "trace")
    assert bad.returncode == 2 and "give --out DIR" in bad.stderr
    # And `simulate --network 1` predicts the surveyed job from them and its noise, in one command
    sim = cli("simulate", "--network", "1", "--ranks", "100", "--granularity-us", "100", "--iterations", "100",
              "--repeats", "2", "--json")  # fmt: skip
    assert sim.returncode == 0, sim.stderr
    study = json.loads(sim.stdout)
    assert study["params"]["latency_us"] == pytest.approx(net["latency_ns"] / 1e3)
    assert study["params"]["overhead_us"] == pytest.approx(net["overhead_ns"] / 1e3)
    assert study["params"]["network"] == "1" and study["noise"].startswith("session 1 (survey)")


@NEEDS_MPI
@TWO_CPUS
def test_each_rank_sends_its_longest_events_up_to_the_cap(cli_env: dict[str, str], db_file: Path) -> None:
    """--send-events 50: each stored run has its rank's 50 longest gaps, in
    time order, and says how many it had; the node's own figures (computed
    on the node from all of them) are kept whole."""
    proc = mpirun(cli_env, 2, "--duration", "1", "--send-events", "50", "--json")
    assert proc.returncode == 0, proc.stderr
    for _, _, _, envelope in stored(db_file)[:2]:
        cpu = json.loads(envelope)["result"]["cpus"][0]
        starts = [e[0] for e in cpu["events"]]
        assert len(cpu["events"]) == cpu["events_sent"] == cpu["events_recorded"] == 50
        assert starts == sorted(starts) and cpu["events_dropped"] > 0
    nodes = json.loads(proc.stdout)["nodes"]
    assert all(n["figures"]["events"] > 50 for n in nodes), "the node's events/s counts every gap"


@contextlib.contextmanager
def disturbed(cpu: int, seconds: float, burst_us: int = 200) -> Iterator[None]:
    """quietcore's own injector on `cpu`: every 10 ms, 200 µs (or `burst_us`) at FIFO 50."""
    from quietcore.probes.runner import probe_path

    argv = [str(probe_path()), "disturb", "--cpus", str(cpu), "--duration", f"{seconds:g}", "--period-us", "10000",
            "--burst-us", str(burst_us), "--policy", "fifo", "--priority", "50"]  # fmt: skip
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        child.kill()
        child.wait()


@pytest.fixture(scope="module")
def planted_survey(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], subprocess.CompletedProcess[str]]:
    """One two-rank survey with the injector on rank 1's CPU (4 %: 400 µs every 10 ms) and --coupled at one W,
    for the planted-node test and the report test: its environment (database, state) and what it printed."""
    if not HAVE_MPI or len(allowed_cpus()) < 2 or os.geteuid() != 0:
        pytest.skip("needs mpirun, mpi4py, two CPUs and root (the injector runs at SCHED_FIFO)")
    base = tmp_path_factory.mktemp("planted-survey")
    state = base / "state"
    state.mkdir(mode=0o755)
    env = {**os.environ, "QUIETCORE_DB": str(base / "results.db"), "QUIETCORE_STATE_DIR": str(state)}
    with disturbed(1, 8.0, burst_us=400):
        proc = mpirun(env, 2, "--duration", "2", "--coupled", "--work-us", "1000", "--json")  # the curve at one W
    assert proc.returncode == 0, proc.stderr
    return env, proc


def test_a_planted_bad_node_is_named_with_its_source(
    planted_survey: tuple[dict[str, str], subprocess.CompletedProcess[str]],
) -> None:
    """The injector on rank 1's CPU stands for a bad node. Two ranks are
    too few to call one odd: rank 1 is said to differ, the reason names the
    planted 100 Hz source, and rank 0 does not differ."""
    nodes = {n["cpus"]: n for n in json.loads(planted_survey[1].stdout)["nodes"]}
    assert nodes["1"]["differs"] and not nodes["1"]["odd"], nodes["1"]
    assert any(r.startswith("periodic source 100 Hz") for r in nodes["1"]["reasons"]), nodes["1"]["reasons"]
    assert not nodes["0"]["odd"] and not any("100 Hz" in r for r in nodes["0"]["reasons"])


def test_the_surveys_text_reads_as_every_commands_does(
    planted_survey: tuple[dict[str, str], subprocess.CompletedProcess[str]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The survey printed its nodes as a table padded by hand and its notes unwrapped: 191 columns in a file,
    past the presentation layer every other command goes through (issue 56). Rank 0's text, from the planted
    survey's own figures, in a file 100 columns wide: no line over it but a path, and it reads (tests/readable)."""
    from quietcore.survey import node
    from tests import readable

    monkeypatch.setenv("COLUMNS", "100")
    got = json.loads(planted_survey[1].stdout)
    node.show(got.pop("session"), got)
    out = capsys.readouterr().out
    assert "rank" in out and "differs: " in out and "Saved as session" in out, out
    assert max(len(line) for line in out.splitlines()) <= 100, out
    assert readable.problems(out, 100) == [], out


def test_without_a_launcher_it_is_a_one_rank_survey(cli_env: dict[str, str], db_file: Path) -> None:
    if not mpi_loads():
        pytest.skip("needs mpi4py (quietcore[mpi]) and an MPI library (libopenmpi-dev)")
    env = {k: v for k, v in cli_env.items() if k not in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")}
    proc = subprocess.run([sys.executable, "-m", "quietcore", "survey", "--duration", "0.3"], env={**env, **ROOT_OK},
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "no MPI launcher: a one-rank survey of this node" in proc.stderr
    assert [kind for kind, *_ in stored(db_file)] == ["noise", "survey"]


def test_a_pmi_mismatch_under_srun_is_refused(cli_env: dict[str, str]) -> None:
    """srun -n 2 with an MPI that does not speak its PMI starts two worlds
    of one: SLURM_NTASKS says 2, the world says 1. Refused on each."""
    if not mpi_loads():
        pytest.skip("needs mpi4py (quietcore[mpi]) and an MPI library (libopenmpi-dev)")
    proc = subprocess.run([sys.executable, "-m", "quietcore", "survey", "--duration", "0.3"],
                          env={**cli_env, **ROOT_OK, "SLURM_NTASKS": "2"}, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 2
    assert "srun started 2 tasks but MPI sees a world of 1" in proc.stderr and "--mpi=pmix" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


NO_LIBMPI = """import sys

class NoLibmpi:
    # as mpi4py's own finder does when the library it loads is missing (a venv on a node without one)
    def find_spec(self, name, path=None, target=None):
        if name == "mpi4py.MPI":
            raise RuntimeError("cannot load MPI library\\nlibmpi.so.40: cannot open shared object file")

sys.meta_path.insert(0, NoLibmpi())
"""


@pytest.mark.parametrize("hidden", ["import sys\nsys.modules['mpi4py'] = None\n", NO_LIBMPI],
                         ids=["no-mpi4py", "no-libmpi"])  # fmt: skip
def test_without_mpi4py_it_says_how_to_install_it(cli_env: dict[str, str], tmp_path: Path, hidden: str) -> None:
    """mpi4py hidden from the interpreter (a sitecustomize that blocks its
    import, as if it were not installed), or there without the MPI library
    it loads (a venv's pip install on a node without Open MPI: it was a
    traceback): one line, exit 2."""
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(hidden)
    path = os.pathsep.join(p for p in (str(hide), cli_env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run([sys.executable, "-m", "quietcore", "survey"], env={**cli_env, "PYTHONPATH": path},
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert proc.returncode == 2
    assert "pip install 'quietcore[mpi]'" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(("args", "words"), [(["--mode", "loud"], "invalid --mode 'loud' (valid: spin, fwq, ftq)"),
                                             (["--duration", "0"], "--duration")])  # fmt: skip
def test_bad_options_are_one_line(cli_env: dict[str, str], args: list[str], words: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "quietcore", "survey", *args], env=cli_env, capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip
    assert proc.returncode == 2 and words in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


@pytest.fixture
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A single-node Slurm of this host (tests/conftest.py), for srun."""
    with slurm_node(tmp_path_factory.mktemp("slurm")) as env:
        yield env


@NEEDS_MPI
@TWO_CPUS
@pytest.mark.slow
def test_two_tasks_under_srun_make_one_session(slurm: dict[str, str], cli_env: dict[str, str],
                                               db_file: Path) -> None:  # fmt: skip
    """srun -n 2 --cpu-bind=cores --mpi=pmix on the test Slurm: the plugin
    that works with Debian's Open MPI 4.1 (pmi2 and none abort in
    MPI_Init). Each rank records the job and step ids."""
    env = {**cli_env, **ROOT_OK, "SLURM_CONF": slurm["SLURM_CONF"]}
    proc = subprocess.run(["srun", "-n", "2", "--cpu-bind=cores", "--mpi=pmix", sys.executable, "-m", "quietcore",
                           "survey", "--duration", "1", "--json"], env=env, capture_output=True, text=True,
                          timeout=180, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    runs = stored(db_file)
    assert [kind for kind, *_ in runs] == ["noise", "noise", "survey"]
    places = [params["survey"] for _, params, _, _ in runs[:2]]
    assert sorted(p["cpus"] for p in places) == ["0", "1"]
    assert {p["slurm"]["SLURM_PROCID"] for p in places} == {"0", "1"}
    assert len({p["slurm"]["SLURM_JOB_ID"] for p in places}) == 1


@NEEDS_MPI
@TWO_CPUS
def test_coupled_mode_measures_and_predicts_the_curve(cli_env: dict[str, str], db_file: Path) -> None:
    """--coupled --work-us 100: a row for N = 1 and N = 2, each measured
    (mean over minimum iteration, never below 1) beside the prediction
    from rank 0's trace, which never falls as N grows."""
    proc = mpirun(cli_env, 2, "--duration", "1", "--coupled", "--work-us", "100", "--audit", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["coupled"]
    assert [(r["work_us"], r["ranks"]) for r in rows] == [(100, 1), (100, 2)]
    assert all(r["slowdown"] >= 1 and r["predicted"] >= 1 and r["iterations"] >= 100 for r in rows)
    assert rows[1]["predicted"] >= rows[0]["predicted"]
    # simulate's two models beside it, from the same trace and the measured network; at one rank they agree
    assert all(r["fast"] >= 1 and r["rounds"] >= 1 for r in rows)
    assert rows[0]["rounds"] == pytest.approx(rows[0]["fast"], rel=1e-9)
    assert 50_000 < rows[0]["ideal_ns"] < 1_000_000, "the calibrated quantum is about 100 µs"
    assert stored(db_file)[-1][2]["coupled"] == rows
    # --audit: one audit per node (both ranks are on this one), so nothing differs between nodes.
    assert json.loads(proc.stdout)["audit"] == []


@pytest.mark.slow
def test_a_survey_report_in_a_real_browser(
    planted_survey: tuple[dict[str, str], subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    """The survey with a planted odd node and --coupled, reported and opened
    in Chromium: the node table with the odd node and why, the
    configuration diff, the node x time heatmap, the network and the
    amplification curve beside both models, offline and without errors."""
    from tests.integration.test_report_browser import in_chromium

    env = planted_survey[0]
    out = tmp_path / "survey-report"
    report = subprocess.run([sys.executable, "-m", "quietcore", "report", "--out", str(out), "1"], env=env,
                            capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert report.returncode == 0, report.stderr
    body, names, errors = in_chromium(out / "index.html", "survey-report.png")
    table = body[body.find("Survey of") :][:1500]
    assert "Survey of 2 ranks" in body and "differs: " in body and "periodic source 100 Hz" in body, table
    assert "How the nodes differ in configuration" in body and "Network to rank" in body
    assert "Coupled: a work quantum W then an Allreduce" in body and "round model" in body
    assert any(n.endswith("-nodes") for n in names) and any(n.endswith("-amplification") for n in names), names
    assert errors == []


@NEEDS_MPI
@TWO_CPUS
def test_ranks_that_share_cpus_are_a_warning(cli_env: dict[str, str]) -> None:
    """mpirun --bind-to none: both ranks may run on every CPU, so each
    measures the other. The survey goes on and says so, with the fix."""
    proc = mpirun(cli_env, 2, "--duration", "0.5", "--json", bind="none")
    assert proc.returncode == 0, proc.stderr
    (warning,) = json.loads(proc.stdout)["warnings"]
    assert warning.startswith("ranks 0 and 1 on ") and "share CPUs" in warning and "--bind-to core" in warning
