"""quietcore in the fleet, against the real engines: a reference set from a
real noise session, `check` run 20 times on this (noisy, virtual) node while
a real node_exporter serves its metrics file, a planted 100 Hz x 200 µs
source failing it, a single-node Slurm whose HealthCheckProgram drains and
resumes the node, and real oslat and cyclictest results imported beside
quietcore's own on the same CPU."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from quietcore.fleet.baseline import cpu_noise
from quietcore.probes.runner import probe_path
from quietcore.store import db, references, sessions
from tests.conftest import CliRunner, allowed_cpus, forked_main, slurm_node

ROOT = os.geteuid() == 0
CPUS = allowed_cpus()
PLANTED = CPUS[-1]
#: the planted 100 Hz source as the check's line names it ("a new periodic source, 100 Hz x", or "a periodic
#: source of 99.8 Hz x" beside a source of the reference's at its rate), 98 Hz to 102.x Hz
PLANTED_SOURCE = r"(?:new )?periodic source,? (?:of )?(?:9[89]|10[0-2])(?:\.\d+)? Hz x"
NODE_EXPORTER = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
PROMTOOL = shutil.which("promtool")


def _env(where: Path) -> dict[str, str]:
    state = where / "state" / "quietcore"
    state.mkdir(parents=True, mode=0o755, exist_ok=True)
    return {**os.environ, "QUIETCORE_DB": str(where / "results.db"), "QUIETCORE_STATE_DIR": str(state)}


def _qc(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`quietcore ARGS` in a process of its own, forked (conftest.Forked); `reference set`
    runs as `python -m quietcore` once, below, and slurmd runs `check` so."""
    return forked_main(args, env, timeout)


@pytest.fixture(scope="module")
def referenced(tmp_path_factory: pytest.TempPathFactory, quiet_noise: Path) -> Path:
    """A database holding a reference of this node: the suite's 5 s of noise on every
    CPU (`quiet_noise`), measured as this module starts (conftest runs it first of the
    integration tests): this VM's host has episodes of minutes (its timer's bursts
    doubled), and a reference taken minutes before the checks hid a planted 2 % source's
    shift from the windows' test in a CI run."""
    where = tmp_path_factory.mktemp("fleet-ref")
    env = _env(where)
    shutil.copy(quiet_noise, where / "results.db")
    done = subprocess.run([sys.executable, "-m", "quietcore", "reference", "set", "last"], env=env, capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    # the span each CPU measured of its 5 s: a host's stall as the probe stops leaves it a little short (4.99)
    span = re.search(r"([\d.]+) s each", done.stdout)
    assert "Saved reference" in done.stdout and span and 4.9 <= float(span[1]) <= 5.0, done.stdout
    # each CPU's figure, as a check's line gives it ("its reference 1.4 %"): not a maximum of them
    assert all(f"CPU {c} " in done.stdout.split("lost ")[1] for c in CPUS), done.stdout
    return where / "results.db"


@pytest.fixture
def fleet_env(referenced: Path, tmp_path: Path) -> dict[str, str]:
    """This test's copy of the referenced database, and a state directory of its own."""
    shutil.copy(referenced, tmp_path / "results.db")
    return _env(tmp_path)


@pytest.fixture
def disturber() -> Iterator[subprocess.Popen[str]]:
    """A planted periodic source: 200 µs of work every 10 ms on one CPU, for 20 s at most."""
    argv = [str(probe_path()), "disturb", "--cpus", str(PLANTED), "--period-us", "10000", "--burst-us", "200",
            "--duration", "20"]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None and "running" in proc.stderr.readline()
        yield proc
    finally:
        proc.kill()
        proc.wait()


def _windows_clear(env: dict[str, str], check_session: int) -> float:
    """How far the planted CPU's quietest window stood above the reference's noisiest, as the verdict
    read both: the stored reference's windows, and the check's last noise run through fleet.baseline.
    Above 0, every window of the check lost more than every one of the reference's: the rank test's
    smallest p, whatever the spread."""
    with contextlib.closing(db.open_db(Path(env["QUIETCORE_DB"]), create=False, write=False)) as conn:
        (reference,) = references.all_references(conn)
        last = [r for r in sessions.runs_of(conn, check_session) if r.trace is not None][-1]
    (now,) = [c for c in cpu_noise(last) if c.cpu == PLANTED]
    return float(np.min(now.windows) - np.max(reference.cpus[PLANTED].windows))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def node_exporter(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """Debian's node_exporter with only its textfile collector, on a loopback port."""
    if NODE_EXPORTER is None:
        pytest.skip("needs prometheus-node-exporter")
    textfiles = tmp_path / "textfile"
    textfiles.mkdir()
    port = _free_port()
    proc = subprocess.Popen([NODE_EXPORTER, f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults",
                             "--collector.textfile", f"--collector.textfile.directory={textfiles}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                urllib.request.urlopen(url, timeout=1).read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield url, textfiles
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _samples(text: str, prefix: str = "quietcore_") -> dict[str, float]:
    """Sample line -> value, of the metrics whose name starts with `prefix`."""
    out = {}
    for line in text.splitlines():
        if line.startswith(prefix):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


@pytest.mark.skipif(not ROOT, reason="the node lock's state directory is root's here")
def test_a_quiet_node_passes_20_checks_against_its_reference(
    fleet_env: dict[str, str], tmp_path: Path, cli_main: CliRunner
) -> None:
    # WHEN the node, quiet but for its own (virtual) noise, is checked 20 times against its reference
    # (in this process: each the whole check but Python's start-up, which 20 of them would pay 20 times)
    checked = [cli_main("check", "--prometheus", str(tmp_path), "--json", env=fleet_env) for _ in range(20)]
    verdicts = [(c.returncode, c.stdout) for c in checked]
    # THEN every check passes: no false alarm in 20
    lines = [json.loads(printed)["line"] if printed else "" for _, printed in verdicts]
    lines = [line for line, (code, _) in zip(lines, verdicts, strict=True) if code] or lines
    assert [code for code, _ in verdicts] == [0] * 20, lines
    assert all(line.startswith(f"PASS {len(CPUS)} CPU") for line in lines)
    # AND each stored a small session, which `results show` reads back
    shown = cli_main("results", "show", "21", env=fleet_env)
    assert shown.returncode == 0 and "PASS" in shown.stdout and "Against reference" in shown.stdout
    # AND the metrics file holds the last check's stored values
    written = _samples((tmp_path / "quietcore.prom").read_text())
    conn = sqlite3.connect(fleet_env["QUIETCORE_DB"])
    (last,) = conn.execute("SELECT max(id) FROM sessions WHERE command = 'check'").fetchone()
    # its last measurement (a first that failed was measured again; the file holds the second)
    (run,) = conn.execute("SELECT max(id) FROM runs WHERE session_id = ? AND kind = 'noise'", (last,)).fetchone()
    rows = conn.execute("SELECT cpu, measured_ns, lost_ns, max_gap_ns FROM noise_cpu WHERE run_id = ?",
                        (run,)).fetchall()  # fmt: skip
    assert len(rows) == len(CPUS) and written["quietcore_check_passed"] == 1.0
    for cpu, measured, lost, max_gap in rows:
        assert written[f'quietcore_available_ratio{{cpu="{cpu}"}}'] == pytest.approx(1 - lost / measured, rel=1e-9)
        assert written[f'quietcore_lost_seconds{{cpu="{cpu}"}}'] == pytest.approx(lost / 1e9, rel=1e-9)
        assert written[f'quietcore_max_gap_seconds{{cpu="{cpu}"}}'] == pytest.approx(max_gap / 1e9, rel=1e-9)
        assert written[f'quietcore_check_cpu_passed{{cpu="{cpu}"}}'] == 1.0


@pytest.mark.skipif(not ROOT, reason="the node lock's state directory is root's here")
def test_node_exporter_serves_the_metrics_while_check_rewrites_them(
    fleet_env: dict[str, str], node_exporter: tuple[str, Path]
) -> None:
    url, textfiles = node_exporter
    scrapes: list[dict[str, float]] = []
    stop = threading.Event()

    def scrape() -> None:
        while not stop.is_set():
            page = urllib.request.urlopen(url, timeout=5).read().decode()
            scrapes.append(_samples(page, "node_textfile_scrape_error") | _samples(page))
            time.sleep(0.01)

    scraper = threading.Thread(target=scrape)
    # WHEN check rewrites the file in a loop while node_exporter is scraped in another
    # (the scraping is noise on this 2-CPU node, which the checks rightly see: their verdicts
    # are not the point here, the file is)
    first = _qc(fleet_env, "check", "--duration", "0.2", "--prometheus", str(textfiles))
    assert first.returncode in (0, 1), first.stderr
    scraper.start()
    try:
        for _ in range(4):
            assert _qc(fleet_env, "check", "--duration", "0.2", "--prometheus", str(textfiles)).returncode in (0, 1)
    finally:
        stop.set()
        scraper.join()
    # THEN no scrape saw an error or a half-written file: every one had all of quietcore's metrics
    assert len(scrapes) >= 4 and all(s.get("node_textfile_scrape_error") == 0.0 for s in scrapes)
    assert all(len([k for k in s if k.startswith("quietcore_available_ratio")]) == len(CPUS) for s in scrapes)
    assert all(s.get("quietcore_info", 0) or any(k.startswith("quietcore_info") for k in s) for s in scrapes)
    # AND what it serves is the file quietcore wrote, value for value
    page = urllib.request.urlopen(url, timeout=5).read().decode()
    served, written = _samples(page), _samples((textfiles / "quietcore.prom").read_text())
    assert {k: v for k, v in served.items() if k in written} == written
    # AND promtool finds nothing to say of quietcore's metrics as served
    if PROMTOOL is not None:
        ours = "\n".join(line for line in page.splitlines() if "quietcore_" in line) + "\n"
        lint = subprocess.run([PROMTOOL, "check", "metrics"], input=ours, capture_output=True, text=True, check=False)
        assert lint.returncode == 0 and not (lint.stdout + lint.stderr).strip(), lint.stdout + lint.stderr


@pytest.mark.skipif(not ROOT, reason="the planted source and the node lock run as root here")
def test_a_planted_periodic_source_fails_the_check_and_is_named_with_the_drift(
    fleet_env: dict[str, str], disturber: subprocess.Popen[str], tmp_path: Path
) -> None:
    # GIVEN 200 µs of work every 10 ms on one CPU, and a reference taken when THP was set otherwise
    conn = sqlite3.connect(fleet_env["QUIETCORE_DB"])
    (data,) = conn.execute("SELECT data FROM refs").fetchone()
    facts = json.loads(data)
    facts["facts"]["thp"]["enabled"] = "always" if facts["facts"]["thp"]["enabled"] != "always" else "never"
    with conn:
        conn.execute("UPDATE refs SET fingerprint = 'another', data = ?", (json.dumps(facts),))
    # WHEN the node is checked, with the audit
    done = _qc(fleet_env, "check", "--json", "--audit", "--prometheus", str(tmp_path))
    # THEN it fails (exit 1), on that CPU alone, with the source named
    assert done.returncode == 1, done.stdout + done.stderr
    verdict = json.loads(done.stdout)
    assert verdict["verdict"] == "fail" and verdict["line"].startswith(f"FAIL CPU {PLANTED}: ")
    (cpu,) = [c for c in verdict["cpus"] if c["cpu"] == PLANTED]
    assert not cpu["passed"] and all(c["passed"] for c in verdict["cpus"] if c["cpu"] != PLANTED)
    assert any(abs(s["frequency_hz"] - 100) < 2 and 150e-6 < s["median_duration_s"] < 300e-6
               for s in cpu["new_sources"]), cpu["new_sources"]  # fmt: skip
    # (named new, or beside a 100 Hz source of the host's when the reference has one, as one host here had)
    assert re.search(PLANTED_SOURCE + r" (1[5-9]\d|2\d\d) µs", verdict["line"])
    # AND the windows' test fails it too, when the planted 2 % stands clear of the reference in the windows
    # that test reads (each but for its longest gap): every window of the check over every one of the
    # reference's, by more than 1 %. Not when the medians alone rose: in a CI run the reference's CPU lost
    # 3.8 % in a host's episode (its 1 kHz timer at 1.6 % of the CPU), the check 4.0 % with the source, and
    # only the source told them apart (p = 0.003, the shift 0.9 %); in two suites of 2026-11-26 the
    # reference lost 2.4-2.7 % with a host's 100 Hz source, its windows spread past the check's, and the
    # check's medians stood 1.2 % higher with p over 0.001. Not the totals: in another, the check's total
    # rose 2.0 % over the reference's with a 9 ms stall of the vCPU in it, while the windows' medians (the
    # verdict's windows leave such a stall out by design) differed by 0.1 %: 3.58 % and 3.70 %.
    planted = sum(s["lost_ratio"] for s in cpu["new_sources"] if abs(s["frequency_hz"] - 100) < 2)
    assert 0.015 < planted < 0.035, cpu["new_sources"]
    check_session = conn.execute("SELECT max(session_id) FROM runs").fetchone()[0]
    if _windows_clear(fleet_env, check_session) > 0.01:
        assert "p < 0.001" in verdict["line"] and cpu["shift"] > 0.01, json.dumps(cpu)
    # AND the reference of the other configuration was still used, the fact that changed named
    assert verdict["reference"]["fingerprint"] == "another" and verdict["drift"] == ["thp.enabled"]
    assert verdict["line"].endswith("; configuration drift since the reference: thp.enabled")
    # AND the audit ran with it and was stored in the check's session
    session = conn.execute("SELECT max(session_id) FROM runs").fetchone()[0]
    kinds = [k for (k,) in conn.execute("SELECT kind FROM runs WHERE session_id = ? ORDER BY seq", (session,))]
    assert kinds == ["noise", "noise", "audit", "check"]  # the failure measured again, and confirmed
    assert verdict["measurements"] == 2 and verdict["first"].startswith(f"FAIL CPU {PLANTED}: ")
    # AND the metrics file says it failed
    metrics = _samples((tmp_path / "quietcore.prom").read_text())
    assert metrics["quietcore_check_passed"] == 0.0 and metrics[f'quietcore_check_cpu_passed{{cpu="{PLANTED}"}}'] == 0


@pytest.mark.skipif(not ROOT, reason="the node lock's state directory is root's here")
def test_check_cannot_judge_without_a_reference_or_limit_and_refuses_bad_input(
    tmp_path: Path, cli_main: CliRunner
) -> None:
    env = _env(tmp_path)
    # WHEN there is no reference and no fixed limit: UNKNOWN, exit 3, one line
    done = _qc(env, "check")
    assert done.returncode == 3 and done.stdout.startswith("UNKNOWN no reference for this configuration")
    # A session too short to serve as a reference is refused, saying why
    assert _qc(env, "noise", "--cpus", str(CPUS[0]), "--duration", "0.3", "--trace", "off").returncode == 0
    short = _qc(env, "reference", "set", "2")
    assert short.returncode == 2 and "a reference needs 5 s (50 windows of 100 ms)" in short.stderr
    for args, words in ((["check", "--tolerance", "2"], "--tolerance"),
                        (["check", "--prometheus", str(tmp_path / "nowhere")], "--prometheus"),
                        (["check", "--duration", "0"], "--duration"),
                        (["check", "--reference", "nosuch", "--max-lost-ratio", "0.5"], "no reference named 'nosuch'"),
                        (["reference", "set", "99"], "no session '99' (valid: an ID 1-"),
                        (["reference", "set", "1", "--name", "a b"], "--name")):  # fmt: skip
        bad = cli_main(*args, env=env)  # refused before anything is measured: in this process
        assert bad.returncode == 2 and words in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    # quietcore-healthcheck (slurm.conf's HealthCheckProgram takes a path alone) is check --slurm-drain
    healthcheck = Path(sys.executable).parent / "quietcore-healthcheck"
    if healthcheck.exists() and shutil.which("scontrol"):
        done = subprocess.run([str(healthcheck)], env=env, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 3 and done.stdout.startswith("UNKNOWN no reference"), done.stdout + done.stderr
        argv = sqlite3.connect(env["QUIETCORE_DB"]).execute("SELECT argv FROM sessions ORDER BY id DESC").fetchone()[0]
        assert json.loads(argv) == ["quietcore", "check", "--slurm-drain", "--wait", "30"]
    # With a fixed limit alone it judges: nothing loses 100 % of a CPU
    limited = _qc(env, "check", "--max-lost-ratio", "0.99", "--duration", "0.3")
    assert limited.returncode == 0 and limited.stdout.startswith("PASS")


def _node(env: dict[str, str], name: str) -> tuple[str, str]:
    out = subprocess.run(["scontrol", "show", "node", name, "--oneliner"], env=env, capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    state = out.split("State=", 1)[1].split()[0]
    reason = out.split("Reason=", 1)[1].strip() if "Reason=" in out else ""
    return state, reason


def _until(what: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(0.25)
    return None


@pytest.mark.slow
@pytest.mark.skipif(not ROOT, reason="Slurm's daemons run as root")
def test_slurm_health_check_drains_a_noisy_node_and_resumes_it(fleet_env: dict[str, str], tmp_path: Path) -> None:
    node = socket.gethostname().split(".")[0]
    where = tmp_path / "slurm"
    where.mkdir()
    program = where / "healthcheck.sh"
    # slurmd runs it with a bare environment: what quietcore needs is exported here
    program.write_text("#!/bin/sh\n"
                       f"export SLURM_CONF={where / 'slurm.conf'} QUIETCORE_DB={fleet_env['QUIETCORE_DB']}\n"
                       f"export QUIETCORE_STATE_DIR={fleet_env['QUIETCORE_STATE_DIR']}\n"
                       f"exec {sys.executable} -m quietcore check --slurm-drain --wait 5 "
                       f">> {where}/checks.log 2>&1\n")  # fmt: skip
    program.chmod(0o755)
    # 4 s: a check takes about 2 s here; at 2 s each check's start-up ran beside the last one's
    # measurement, and preempted its probe 40-80 times a second (9 in the reference) in a CI run
    interval = 4
    conf = [f"HealthCheckProgram={program}", f"HealthCheckInterval={interval}", "HealthCheckNodeState=ANY"]
    with slurm_node(where, conf) as env:
        log = where / "checks.log"

        def said(since: int = 0) -> str:
            return log.read_text()[since:] if log.exists() else ""

        # GIVEN a planted source on one CPU, running (what the checks said before it is left out: the
        # check slurmd runs as it starts can drain the node for Slurm's own start-up noise, and a later
        # one resume it, before the source is there; seen in a CI run)
        argv = [str(probe_path()), "disturb", "--cpus", str(PLANTED), "--period-us", "10000", "--burst-us", "200",
                "--duration", "30"]  # fmt: skip
        planted = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            assert planted.stderr is not None and "running" in planted.stderr.readline()
            start = len(said())

            def drained_for_it() -> bool:
                # one check's output: FAIL, a line below naming the source on that CPU, then the drain
                for one in re.split(r"Stored as session \d+\.", said(start)):
                    words = " ".join(one.split())  # its sentences, whatever the width wrapped
                    if re.match(rf"FAIL .*?CPU {PLANTED}: a {PLANTED_SOURCE}", words) and (
                            f"Slurm: drained {node}: quietcore: FAIL" in words):  # fmt: skip
                        return True
                return False

            # THEN within a few intervals (and a check's length) the node is drained, with quietcore's reason
            # (the test watches the checks' log, not scontrol, whose every run would be noise of its own)
            drained = _until(drained_for_it, 3 * interval + 6)
        finally:
            planted.kill()
            planted.wait()
        assert drained, f"never drained for the source; the checks said:\n{said()}"
        state, reason = _node(env, node)
        assert "DRAIN" in state, (state, reason, said())
        # (the Slurm daemons just started are noise of their own, which may fail the other CPU too)
        assert reason.startswith("quietcore: FAIL CPU ") and f"CPU {PLANTED}: " in reason, reason
        # AND without the source, quietcore's own resume brings it back
        after = len(said())
        back = _until(lambda: "Slurm: resumed" in said(after), 3 * interval + 4)
        assert back, f"still drained: {_node(env, node)}; the checks said:\n{said()}"
        assert "DRAIN" not in _node(env, node)[0]
        assert f"Slurm: resumed {node}" in said(after)


@pytest.mark.skipif(not ROOT, reason="oslat and cyclictest run as root here")
def test_oslat_and_cyclictest_results_are_imported_beside_quietcores(
    fleet_env: dict[str, str], cli_main: CliRunner, peer_bench: tuple[subprocess.CompletedProcess[str], Path]
) -> None:
    env = fleet_env  # session 1: the reference's noise, on every CPU
    cpu = str(PLANTED)
    # GIVEN real oslat and cyclictest runs on the last CPU (the suite's run of bench/compare_peers.py kept
    # their --json files), quietcore's noise there (session 1) and its latency (session 2)
    oslat, cyclic = peer_bench[1] / "oslat.json", peer_bench[1] / "cyc.json"
    # (like for like with the bench's cyclictest: SCHED_FIFO 80, cpu_dma_latency 0)
    latency = _qc(env, "latency", "--cpus", cpu, "--duration", "0.5", "--policy", "fifo", "--priority", "80",
                  "--dma-latency", "0")  # fmt: skip
    assert latency.returncode == 0, latency.stderr
    # WHEN both are imported
    for tool, path in (("oslat", oslat), ("cyclictest", cyclic)):
        done = cli_main("results", "import", "--from", tool, str(path), env=env)
        assert done.returncode == 0 and f"({tool}, CPU {cpu})" in done.stdout, done.stderr
    # (a file of the wrong tool is one line, exit 2, and nothing stored)
    wrong = cli_main("results", "import", "--from", "cyclictest", str(oslat), env=env)
    assert wrong.returncode == 2 and "written by oslat, not cyclictest" in wrong.stderr
    assert len(wrong.stderr.strip().splitlines()) == 1
    assert sqlite3.connect(env["QUIETCORE_DB"]).execute("SELECT count(*) FROM sessions").fetchone()[0] == 4
    # THEN each is a session of one run of its kind, shown as such
    shown = cli_main("results", "show", "3", env=env)
    assert shown.returncode == 0 and "imported from oslat file oslat.json" in shown.stdout and "max µs" in shown.stdout
    # AND compare sets each beside quietcore's own figure for the CPU
    raw = json.loads(oslat.read_text())["thread"]["0"]
    gaps = json.loads(cli_main("compare", "3", "1", "--json", env=env).stdout)["figures"]
    (gap,) = [f for f in gaps if f["figure"] == "longest gap (µs)"]
    assert (gap["cpu"], gap["a_from"], gap["a"], gap["b_from"]) == (int(cpu), "oslat", raw["max"], "noise")
    stored = sqlite3.connect(env["QUIETCORE_DB"]).execute("SELECT max_gap_ns FROM noise_cpu WHERE cpu = ?",
                                                          (int(cpu),)).fetchone()[0]  # fmt: skip
    assert gap["b"] == pytest.approx(stored / 1e3)
    wake = {f["figure"]: f for f in json.loads(cli_main("compare", "4", "2", "--json", env=env).stdout)["figures"]}
    assert {"wake-up latency max (µs)", "wake-up latency p50 (µs)"} <= set(wake)
    # the same method on the same CPU: the medians agree within a factor of 3 even on this VM
    p50 = wake["wake-up latency p50 (µs)"]
    assert p50["a_from"] == "cyclictest" and p50["b_from"] == "latency" and 1 / 3 < p50["b"] / p50["a"] < 3, p50
