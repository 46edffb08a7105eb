"""`quietcore lab`: the main job, end to end."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from quietcore.commands import COMMANDS
from quietcore.facts.cpulist import format_cpulist, parse_cpulist
from quietcore.facts.cpus import online_cpus
from quietcore.facts.root import Root
from quietcore.facts.topology import Topology
from quietcore.probes.runner import probe_path
from tests.conftest import ALL_ROOTS, GPU_ROOT, CliRunner


@pytest.mark.slow
def test_lab_quick_measures_every_online_cpu(lab_quick: tuple[Path, Path, subprocess.CompletedProcess[str]]) -> None:
    db_file, out, proc = lab_quick  # `lab --quick --report DIR`, run once for the suite
    online = sorted(online_cpus(Root("/")))
    for cpu in online:  # a row each in the table, its loop's periods first
        assert re.search(rf"^ *{cpu}  +[\d.]+ / [\d.]+  ", proc.stdout, re.M), proc.stdout
    assert "OS noise per CPU" in proc.stdout and "Counter:" in proc.stdout
    assert f"Saved as session 1 in {db_file}" in proc.stdout
    if "hypervisor" in Path("/proc/cpuinfo").read_text():
        assert "This node is a virtual machine" in proc.stdout and "host's noise" in proc.stdout
    conn = sqlite3.connect(db_file)
    runs = conn.execute("SELECT kind, status, params FROM runs ORDER BY seq").fetchall()
    assert runs[0][:2] == ("calibrate", "complete")
    assert runs[-1][:2] == ("audit", "complete")
    rounds = [parse_cpulist(json.loads(p)["cpus"]) for kind, _, p in runs if kind == "noise"]
    # Every online CPU measured exactly once, in two rounds of alternate CPUs (one round on a 1-CPU node).
    assert sorted(c for r in rounds for c in r) == online
    assert len(rounds) == min(2, len(online)) and all(not (a & b) for a in rounds for b in rounds if a is not b)
    cpus = [r[0] for r in conn.execute("SELECT cpu FROM noise_cpu ORDER BY cpu")]
    assert cpus == online
    assert conn.execute("SELECT status FROM sessions").fetchone()[0] == "complete"
    # --report DIR; without it, lab writes where `report` does (commands.report.default_out, tested there).
    report = out / "index.html"
    assert f"Report: {report}" in proc.stdout and report.stat().st_size > 10_000
    # It ends with what to change first, each change with its share of the lost time, the audit's finding and fix,
    # and the share no setting removes; the report opens on the same lines, before the audit and the figures.
    said = proc.stdout[proc.stdout.index("What to change first") :].splitlines()
    changes = [line for line in said[1:6] if re.match(r"  \d\. ", line)]
    shares = [int(m.group(1)) for line in changes if (m := re.search(r": up to (\d+)% of the lost time\.", line))]
    assert len(shares) == len(changes) and shares == sorted(shares, reverse=True) and all(s >= 1 for s in shares)
    assert re.search(r"^No (setting of this guest|kernel setting) removes the ", proc.stdout, re.M)
    # the session's one figure of the tick and of the host: the same line in the report's opening
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("In session 1, the tick and its timers took")]
    markdown = (out / "report.md").read_text()
    assert line in markdown and markdown.index(line) < markdown.index("## What to change first") and changes
    assert markdown.index("## What to change first") < markdown.index("Audit findings") < markdown.index("### Noise of")
    for change in changes:  # wrapped in the terminal, a line in the Markdown
        assert change.strip()[:60] in markdown
    # --prometheus DIR: both rounds' CPUs in one file, with the values stored
    written = db_file.parent / "metrics" / "quietcore.prom"
    assert f"Metrics for node_exporter: {written}" in proc.stdout
    metrics = written.read_text()
    assert 'command="lab"' in metrics
    for cpu, measured, lost in conn.execute("SELECT cpu, measured_ns, lost_ns FROM noise_cpu"):
        line = next(m for m in metrics.splitlines() if m.startswith(f'quietcore_available_ratio{{cpu="{cpu}"}}'))
        assert float(line.split()[-1]) == pytest.approx(1 - lost / measured, rel=1e-9)


def test_a_cpu_of_either_round_is_shown_with_cpu(
    lab_quick: tuple[Path, Path, subprocess.CompletedProcess[str]], cli_main: CliRunner
) -> None:  # fmt: skip
    """`results show ID --cpu N`, which the lab's output gives for a CPU's detail, for a CPU of each
    round: its detail, and of the other round one line (it stopped at the first round without the CPU,
    "not in this run", exit 2: every CPU past the first round could not be shown)."""
    db_file = lab_quick[0]
    env = {"QUIETCORE_DB": str(db_file)}
    conn = sqlite3.connect(db_file)
    rounds = [parse_cpulist(json.loads(p)["cpus"]) for (p,) in
              conn.execute("SELECT params FROM runs WHERE kind = 'noise' ORDER BY seq")]  # fmt: skip
    conn.close()
    for cpus in rounds:
        cpu = min(cpus)
        shown = cli_main("results", "show", "1", "--cpu", str(cpu), env=env)
        assert shown.returncode == 0, shown.stderr
        assert f"CPU {cpu}: where" in shown.stdout
        assert shown.stdout.count(f"CPU {cpu} is not in this run.") == len(rounds) - 1
        assert not [c for c in set().union(*rounds) - {cpu} if f"CPU {c}: where" in shown.stdout]
    # a CPU no round measured: refused before anything is said, with the session's CPUs
    bad = cli_main("results", "show", "1", "--cpu", "999", env=env)
    valid = format_cpulist(frozenset(set().union(*rounds)))
    assert bad.returncode == 2 and bad.stdout == ""
    assert f"invalid --cpu 999: not in session 1 (valid: {valid})" in bad.stderr


def test_the_audit_orders_its_findings_by_the_time_each_cost_in_the_last_lab(
    lab_quick: tuple[Path, Path, subprocess.CompletedProcess[str]], cli: CliRunner
) -> None:  # fmt: skip
    """With a stored lab (the last of this host by default, or --session), the audit
    says what each finding cost in it and puts the costliest first in its status."""
    db_file = lab_quick[0]
    for args in (["--session", "1"], []):
        proc = cli("audit", "--json", "--db", str(db_file), *args)
        assert proc.returncode == 0, proc.stderr
        findings = json.loads(proc.stdout)
        costed = [f for f in findings if "lost_share" in f]
        assert costed and all(0.01 <= f["lost_share"] <= 1 and f["session"] == 1 for f in costed)
        for status in {f["status"] for f in findings}:
            shares = [f.get("lost_share", 0.0) for f in findings if f["status"] == status]
            assert shares == sorted(shares, reverse=True), status
    text = cli("audit", "--db", str(db_file), "--session", "last").stdout
    assert "Findings are ordered by what each cost in session 1" in text and "of the time lost in session 1" in text


#: How every place that says a session says the tick's and the host's shares of its lost time (changes.Shares).
SHARES = re.compile(r"the tick and its timers took (\d+)% of the time (CPUs? [\d,-]+) lost; "
                    r"(?:the host|what nothing names, firmware or SMIs,) took (\d+)%")  # fmt: skip


def test_the_ticks_and_the_hosts_shares_are_one_figure_wherever_the_lab_is_said(
    lab_quick: tuple[Path, Path, subprocess.CompletedProcess[str]], cli: CliRunner, tmp_path: Path
) -> None:
    """Issue 56: session 1's host share read 29 % in `lab`, 33 % and 13 % in `simulate`; the tick 31, 33 and
    38 % in three places. One figure each, the same integer, in lab, results show, audit, the report's
    Markdown and simulate --trace."""
    db_file, out, proc = lab_quick
    db = {"QUIETCORE_DB": str(db_file)}
    simulated = cli("simulate", "--trace", "1", "--ranks", "1k", "--granularity-us", "100", "--repeats", "1",
                    "--iterations", "20", env=db)  # fmt: skip
    said = {
        "lab": proc.stdout,
        "results show": cli("results", "show", "1", env=db).stdout,
        "audit": cli("audit", "--session", "1", env=db).stdout,
        "report": (out / "report.md").read_text(),
        "simulate": simulated.stdout,
    }
    assert simulated.returncode == 0, simulated.stderr
    found = {where: SHARES.findall(" ".join(text.split())) for where, text in said.items()}
    assert all(len(f) == 1 for f in found.values()), found
    assert len({f[0] for f in found.values()}) == 1, found


def test_lab_rounds_leave_a_cpu_free() -> None:
    from quietcore.commands.lab import rounds

    assert rounds(frozenset({0, 1})) == [frozenset({0}), frozenset({1})]
    assert rounds(frozenset({0, 1, 2, 3, 4})) == [frozenset({0, 2, 4}), frozenset({1, 3})]
    assert rounds(frozenset({3})) == [frozenset({3})]


def _checked(plan: list[frozenset[int]], topology: Topology) -> None:
    """Every CPU once; no two SMT siblings in a round; a CPU free on every NUMA node of two or more."""
    assert sorted(c for r in plan for c in r) == sorted(topology.online)
    for r in plan:
        for cpu in r:
            assert not (topology.siblings.get(cpu, frozenset({cpu})) - {cpu}) & r, (cpu, sorted(r))
        for node, cpus in topology.nodes.items():
            if len(cpus & topology.online) > 1:
                assert (cpus & topology.online) - r, f"round {sorted(r)} leaves NUMA node {node} no CPU"


@pytest.mark.parametrize("root", [*ALL_ROOTS, GPU_ROOT], ids=lambda p: p.name.removesuffix(".tar.gz"))
def test_lab_plans_its_rounds_by_the_topology(root: Path) -> None:
    """The fixture nodes: the 2-socket Xeon (CPU N and N+8 siblings, two NUMA nodes), arm64, the GPU node."""
    from quietcore.commands.lab import rounds
    from quietcore.facts.snapshot import open_root
    from quietcore.facts.topology import read_topology

    with open_root(str(root)) as r:
        topology = read_topology(r)
    plan = rounds(topology.online, topology)
    _checked(plan, topology)
    assert len(plan) == 2


def test_lab_plans_a_2x96x2_node() -> None:
    """A made-up two 96-core EPYCs with SMT, 384 CPUs (CPU c and c+192 siblings), four NUMA nodes
    a socket: two rounds of 192, one thread of every core in each."""
    from quietcore.commands.lab import rounds

    cores = 192
    online = frozenset(range(2 * cores))
    core_of = {c: (c % cores // 96, c % cores) for c in online}
    siblings = {c: frozenset({c % cores, c % cores + cores}) for c in online}
    nodes = {n: frozenset(c for c in online if c % cores // 24 == n) for n in range(8)}
    topology = Topology(online, {c: p for c, (p, _) in core_of.items()}, core_of, siblings, nodes, {}, {})
    plan = rounds(online, topology)
    _checked(plan, topology)
    assert [len(r) for r in plan] == [192, 192]


def test_lab_bad_duration(cli: CliRunner, db_file: Path) -> None:
    proc = cli("lab", "--duration", "0")
    assert proc.returncode == 2 and "invalid --duration '0' (valid: 0.1-3600)" in proc.stderr
    assert not db_file.exists()


def test_version_and_help() -> None:
    run = [sys.executable, "-m", "quietcore"]
    version = subprocess.run([*run, "--version"], capture_output=True, text=True, check=False)
    assert version.returncode == 0 and version.stdout.startswith("quietcore 0.")
    top = subprocess.run([*run, "--help"], capture_output=True, text=True, check=False)
    assert all(name in top.stdout for name in ("lab", "noise", "results"))
    sub = subprocess.run([*run, "noise", "--help"], capture_output=True, text=True, check=False)
    assert "example: quietcore noise --cpus 1 --duration 10" in sub.stdout
    bare = subprocess.run(run, capture_output=True, text=True, check=False)
    assert bare.returncode == 2


#: How a test runs `python -m quietcore COMMAND`: the fixture, an argv list, or a shell line.
ENTRY_POINT = re.compile(r'cli_process\(\s*"([a-z]+)"|"-m",\s*"quietcore",\s*"([a-z]+)"|-m quietcore ([a-z]+)')


def test_every_command_runs_as_python_m_quietcore_somewhere() -> None:
    """Most tests run a command in a forked child (conftest's `cli`), which
    skips Python's start-up; each command still has a test that runs it as
    a user does, `python -m quietcore COMMAND`."""
    found = set()
    for path in Path(__file__).parents[1].rglob("*.py"):
        for match in ENTRY_POINT.finditer(path.read_text(encoding="utf-8")):
            found.add(next(g for g in match.groups() if g))
    assert set(COMMANDS) - found == set()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to an unprivileged user")
def test_probe_works_as_a_normal_user(tmp_path: Path) -> None:
    # The privileges that matter (mlock, affinity, scheduling) are the native
    # core's. It is copied out of the package because this machine's Python
    # lives under /root (mode 700), which nobody cannot enter.
    tmp_path.chmod(0o755)
    probe = tmp_path / "quietcore-probe"
    shutil.copy(probe_path(), probe)
    probe.chmod(0o755)
    cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all",
           str(probe), "noise", "--cpus", "0", "--duration", "0.3"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
    envelope = json.loads(proc.stdout)
    assert envelope["result"]["cpus"][0]["loops"] > 0
    mlock = envelope["result"]["mlock"]
    # Locking memory may be refused without CAP_IPC_LOCK; it is then reported, not fatal.
    assert mlock["ok"] or "CAP_IPC_LOCK" in mlock["error"]
