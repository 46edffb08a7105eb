"""`quietcore tune`: the plan from the topology (this node and fixture
roots), the refused plans, and apply / verify / revert on this node's real
IRQs, default IRQ affinity, workqueue masks and NUMA balancing, checked
value by value. Every test that applies puts each knob back itself in a
`finally`, whatever happened."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from quietcore.facts.cpulist import parse_cpulist, parse_cpumask
from tests.conftest import XEON_ROOT, CliRunner, Forked, allowed_cpus, as_nobody

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="tune apply writes /proc and /sys: needs root")
TWO_CPUS = pytest.mark.skipif(len(allowed_cpus()) < 2, reason="needs two CPUs: one to keep, one to shield")


CPUSET = Path("/sys/fs/cgroup/cpuset")  # this machine's cgroup v1 cpuset hierarchy
SHIELD_DIRS = (CPUSET / "quietcore-housekeeping", CPUSET / "quietcore-shield")


def knobs() -> dict[str, str]:
    """Every file a plan on this node may write, with its value now, and
    whether the shield's cpusets exist."""
    paths = [*Path("/proc/irq").glob("*/smp_affinity"), Path("/proc/irq/default_smp_affinity"),
             *Path("/sys/devices/virtual/workqueue").glob("**/cpumask"), Path("/proc/sys/kernel/numa_balancing"),
             Path("/sys/kernel/mm/transparent_hugepage/enabled"), CPUSET / "cpuset.sched_load_balance",
             Path("/proc/sys/kernel/sched_rt_runtime_us"), Path("/proc/sys/kernel/timer_migration"),
             Path("/sys/kernel/debug/sched/preempt"),
             *Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cpufreq/scaling_governor"),
             *[p for p in (Path("/sys/devices/system/cpu/intel_pstate/no_turbo"),
                           Path("/sys/devices/system/cpu/cpufreq/boost")) if p.exists()]]  # fmt: skip
    values = {}
    for p in paths:
        with contextlib.suppress(OSError):
            values[str(p)] = p.read_text().strip()
    for d in SHIELD_DIRS:
        values[str(d)] = "present" if d.is_dir() else "absent"
    return values


def equal(path: str, a: str, b: str) -> bool:
    if path.endswith(("smp_affinity", "cpumask")):
        return parse_cpumask(a) == parse_cpumask(b)
    if path.endswith("sched/preempt"):  # "none voluntary (full) lazy": the running model
        return a.split("(")[-1].split(")")[0] == b.split("(")[-1].split(")")[0]
    return a == b


def holders() -> list[int]:
    """The PM QoS holders quietcore started that still run."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            if b"quietcore.knobs.pmqos" in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
    return found


def dma_latency() -> int:
    """The C-state limit in force now, in µs (the device reads the aggregate of every request)."""
    import struct

    with open("/dev/cpu_dma_latency", "rb") as device:
        return int(struct.unpack("i", device.read(4))[0])


def put_back(saved: dict[str, str]) -> None:
    """The test's own restore, in case quietcore's did not."""
    for pid in holders():  # a C-state limit left held
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    for d in SHIELD_DIRS:  # a shield quietcore left: its tasks back to the root cpuset, then gone
        if saved.get(str(d)) == "absent" and d.is_dir():
            for tid in (d / "tasks").read_text().split():
                with contextlib.suppress(OSError):
                    (CPUSET / "tasks").write_text(tid)
            with contextlib.suppress(OSError):
                d.rmdir()
    for path, value in saved.items():
        if value in ("present", "absent"):
            continue
        if "[" in value:  # a selector file: write the selected word
            value = value[value.index("[") + 1 : value.index("]")]
        elif "(" in value:  # the preemption model
            value = value[value.index("(") + 1 : value.index(")")]
        with contextlib.suppress(OSError):
            if not equal(path, Path(path).read_text().strip(), value):
                Path(path).write_text(value)


def thread_files(leaf: str) -> Iterator[Path]:
    """/proc/PID/task/TID/<leaf> of every thread now. Not Path.glob: a process that
    ends while glob lists its tasks raises FileNotFoundError out of it (seen in CI)."""
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue  # ended meanwhile
            yield from (Path(f"/proc/{pid}/task/{tid}/{leaf}") for tid in tids)


def affinities() -> dict[int, set[int]]:
    """Every thread's allowed CPUs now (the tuning moves threads too)."""
    found = {}
    for status in thread_files("status"):
        with contextlib.suppress(OSError, ValueError, StopIteration):
            line = next(x for x in status.read_text().splitlines() if x.startswith("Cpus_allowed_list:"))
            found[int(status.parent.name)] = set(parse_cpulist(line.split(":", 1)[1].strip()))
    return found


def cpusets() -> dict[int, str]:
    """Every thread's cpuset now (the shield moves threads into its own)."""
    found = {}
    for where in thread_files("cpuset"):
        with contextlib.suppress(OSError):
            found[int(where.parent.name)] = where.read_text().strip()
    return found


@contextlib.contextmanager
def restored() -> Iterator[dict[str, str]]:
    saved, threads, sets = knobs(), affinities(), cpusets()
    try:
        yield saved
    finally:
        now_in = cpusets()
        for tid, where in sets.items():  # the cpuset first: moving a thread back resets its affinity
            if now_in.get(tid, where) != where:
                with contextlib.suppress(OSError):
                    (CPUSET / where.lstrip("/") / "tasks").write_text(str(tid))
        put_back(saved)
        now = affinities()
        for tid, cpus in threads.items():
            if tid in now and now[tid] != cpus:
                with contextlib.suppress(OSError):  # a per-CPU kthread, or gone meanwhile
                    os.sched_setaffinity(tid, cpus)


def all_back(saved: dict[str, str], sets: dict[int, str], when: str) -> None:
    """Every knob as saved, and every thread in the cpuset it was in."""
    assert changed(saved) == [], f"not put back {when}"
    moved = {tid: where for tid, where in cpusets().items() if sets.get(tid, where) != where}
    assert not moved, f"threads left in another cpuset {when}: {moved}"


def changed(saved: dict[str, str]) -> list[str]:
    now = knobs()
    return [p for p, v in saved.items() if p in now and not equal(p, v, now[p])]


@TWO_CPUS
def test_plan_here_keeps_cpu_0_and_shields_the_rest(cli_main: CliRunner) -> None:
    proc = cli_main("tune", "plan", "--json")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    online = frozenset(allowed_cpus())
    assert plan["housekeeping"] == "0" and parse_cpulist(plan["targets"]) == online - {0}
    boot = {item["knob"]: item for item in plan["boot"]}
    assert boot["isolcpus"]["planned"] == f"managed_irq,domain,{plan['targets']}"
    assert boot["irqaffinity"]["planned"] == "0"
    config = Path("/proc/config.gz")
    if config.exists():
        import gzip

        has_nohz_full = "CONFIG_NO_HZ_FULL=y" in gzip.decompress(config.read_bytes()).decode()
        # This VM's kernel lacks it: the plan says so, and leaves it out of the boot line.
        assert (boot["nohz_full"]["status"] == "refused") != has_nohz_full
        assert ("nohz_full=" in plan["boot_lines"]["grubby"]) == has_nohz_full
    assert plan["boot_lines"]["grubby"].startswith('grubby --update-kernel=ALL --args="isolcpus=managed_irq,domain,')
    runtime = {item["knob"]: item for item in plan["runtime"]}
    assert runtime["IRQ default affinity"]["planned"] == "0"
    assert all(item["planned"] == "0" for knob, item in runtime.items() if knob.startswith("IRQ "))


def test_plan_on_a_two_socket_smt_fixture_keeps_a_whole_core_per_node(cli_main: CliRunner) -> None:
    proc = cli_main("tune", "plan", "--root", str(XEON_ROOT), "--profile", "latency", "--json")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    # CPU N and N+8 are SMT siblings; node 0 holds cores 0-3, node 1 cores 4-7.
    assert plan["housekeeping"] == "0,4,8,12"
    boot = {item["knob"]: item for item in plan["boot"]}
    # The fixture already boots isolated, on another set: the plan says what it has and what it wants.
    assert boot["isolcpus"]["current"] == "managed_irq,domain,2-3,6-7,10-11,14-15"
    assert boot["nohz_full"]["status"] == "change"
    # The latency profile adds skew_tick=1, which this node already boots with: not in the line.
    assert boot["skew_tick"]["status"] == "already" and "skew_tick" not in plan["boot_lines"]["grubby"]


def test_plan_stops_irqbalance_unless_it_already_bans_the_targets(cli_main: CliRunner) -> None:
    """The Xeon fixture runs irqbalance under systemd with
    IRQBALANCE_BANNED_CPULIST=2-3,6-7,10-11,14-15: shielding those CPUs
    needs nothing of it; shielding CPU 1 too stops the service while tuned
    (journaled, so revert starts it again); the exported scripts do the same."""
    plan = json.loads(cli_main("tune", "plan", "--root", str(XEON_ROOT), "--cpus", "2-3,10-11", "--json").stdout)
    item = {i["knob"]: i for i in plan["runtime"]}["irqbalance"]
    assert item["status"] == "already" and "IRQBALANCE_BANNED_CPULIST" in item["reason"]
    plan = json.loads(cli_main("tune", "plan", "--root", str(XEON_ROOT), "--cpus", "1-3,9-11", "--json").stdout)
    item = {i["knob"]: i for i in plan["runtime"]}["irqbalance"]
    assert item["action"]["kind"] == "service-state" and item["action"]["value"] == "inactive"
    assert item["action"]["text"] == "systemctl stop irqbalance.service (irqbalance)"
    assert "IRQBALANCE_BANNED_CPULIST=1-3,9-11" in item["reason"]


def test_plan_on_cgroup_v2_makes_the_shield_an_isolated_partition(cli_main: CliRunner, tmp_path: Path) -> None:
    """The Xeon fixture with a cgroup v2 hierarchy that offers cpuset (as on
    a systemd node since 2021): the shield is one child made an isolated
    partition, exclusive CPUs claimed first on 6.7+, the controller turned
    on for the root's children, and no thread moved (the kernel takes the
    partition's CPUs from every other cgroup)."""
    import shutil

    root = tmp_path / "root"
    shutil.copytree(XEON_ROOT, root, symlinks=True)
    (root / "proc" / "mounts").write_text("cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime 0 0\n")
    cg = root / "sys" / "fs" / "cgroup"
    cg.mkdir(parents=True)
    (cg / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (cg / "cgroup.subtree_control").write_text("cpu memory pids\n")
    (cg / "cpuset.cpus.isolated").write_text("\n")
    proc = cli_main("tune", "plan", "--root", str(root), "--json")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    runtime = {item["knob"]: item for item in plan["runtime"]}
    assert runtime["cpuset controller"]["action"]["target"] == "/sys/fs/cgroup/cgroup.subtree_control#cpuset"
    assert runtime["cpuset quietcore-shield"]["planned"] == "present"
    shield = {k.split(" ", 1)[1]: v["planned"] for k, v in runtime.items() if k.startswith("quietcore-shield ")}
    targets = plan["targets"]
    assert shield == {"cpuset.cpus": targets, "cpuset.cpus.exclusive": targets, "cpuset.cpus.partition": "isolated"}
    assert not [k for k in runtime if "housekeeping" in k]
    assert any("isolated invalid" in n for n in plan["notes"])
    # Each target CPU is told what only the boot part quiets: this node boots CPUs 2-3 (and their like on
    # the other cores) with nohz_full, rcu_nocbs and isolcpus=managed_irq, but not CPU 1 and its like.
    notes = {n.split(":", 1)[0]: n for n in plan["notes"] if n.startswith("CPU")}  # the CPUs alike: one note
    booted, unbooted = notes["CPUs 2-3,6-7,10-11,14-15"], notes["CPUs 1,5,9,13"]
    assert "in force" in booted and "need the boot part" not in booted, notes
    assert "The tick (nohz_full)" in unbooted and "managed IRQs" in unbooted, notes


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--cpus", "0-1"], "leaves no housekeeping CPU"),
        (["--housekeeping", "0-1"], "nothing to shield"),
        (["--cpus", "7"], "invalid --cpus '7' (valid: CPUs within 0-1)"),
        (["--profile", "fast"], "invalid --profile 'fast' (valid: throughput, latency)"),
        (["--cpus", "1", "--housekeeping", "0"], "give --cpus or --housekeeping, not both"),
    ],
)
def test_refused_plans_are_one_line_and_exit_2(cli_main: CliRunner, args: list[str], words: str) -> None:
    if len(allowed_cpus()) != 2:
        pytest.skip("the wording names this 2-CPU machine's CPUs")
    proc = cli_main("tune", "plan", *args)
    assert proc.returncode == 2 and words in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--cpus", "4-7,12-15"], "every CPU of NUMA node 1 (4-7,12-15) would be isolated"),
        (["--housekeeping", "0,4"], "its SMT sibling 8 would be a target"),
    ],
)
def test_refused_plans_on_the_fixture(cli_main: CliRunner, args: list[str], words: str) -> None:
    proc = cli_main("tune", "plan", "--root", str(XEON_ROOT), *args)
    assert proc.returncode == 2 and words in proc.stderr, proc.stderr


def test_cpu_0_is_not_isolated_where_no_irq_can_leave_it(cli_main: CliRunner, tmp_path: Path) -> None:
    """The Xeon fixture with every smp_affinity read-only, as on a platform
    whose IRQs are fixed to CPU 0: shielding CPU 0 is refused (one line,
    exit 2); with the files writable it is planned."""
    import shutil

    root = tmp_path / "root"
    shutil.copytree(XEON_ROOT, root, symlinks=True)
    ok = cli_main("tune", "plan", "--root", str(root), "--housekeeping", "1,9,4,12", "--json")
    assert ok.returncode == 0, ok.stderr
    for f in root.glob("proc/irq/*/smp_affinity"):
        f.chmod(0o444)
    proc = cli_main("tune", "plan", "--root", str(root), "--housekeeping", "1,9,4,12")
    assert proc.returncode == 2 and "CPU 0 would be isolated" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_unknown_or_missing_action_and_root_for_apply(cli_main: CliRunner) -> None:
    proc = cli_main("tune", "shield")
    assert (
        proc.returncode == 2
        and "argument ACTION: invalid choice: 'shield' (choose from 'plan', 'apply', 'verify', 'revert', 'prove')"
        in proc.stderr
    )
    proc = cli_main("tune")
    assert proc.returncode == 2 and proc.stderr == (
        "quietcore: error: tune: the following arguments are required: ACTION "
        "(valid: plan, apply, verify, revert, prove)\n"
    )
    proc = cli_main("tune", "apply", "--root", str(XEON_ROOT))
    assert proc.returncode == 2 and "only a plan reads another root" in proc.stderr


@contextlib.contextmanager
def pinned_sleeper(cpus: set[int]) -> Iterator[int]:
    """A task pinned to `cpus`, as a user pins one on purpose; killed after."""
    child = subprocess.Popen(["sleep", "300"], preexec_fn=lambda: os.sched_setaffinity(0, cpus))
    try:
        yield child.pid
    finally:
        child.kill()
        child.wait()


@ROOT_ONLY
@TWO_CPUS
def test_apply_verify_revert_puts_every_knob_back(cli: CliRunner, cli_process: CliRunner) -> None:
    # apply and the first revert as `python -m quietcore` (every command has a test that runs it so)
    with restored() as saved, pinned_sleeper({1}) as sleeper:
        proc = cli_process("tune", "apply", "--yes", "--json")
        assert proc.returncode == 0, proc.stderr
        outcomes = json.loads(proc.stdout)
        assert outcomes and all(o["result"] == "set" or o["result"].startswith(("refused", "pending"))
                                for o in outcomes)  # fmt: skip
        # What was set reads back: the default IRQ affinity and the workqueue mask are CPU 0 alone.
        assert parse_cpumask(Path("/proc/irq/default_smp_affinity").read_text()) == {0}
        assert parse_cpumask(Path("/sys/devices/virtual/workqueue/cpumask").read_text()) == {0}
        moved = [o for o in outcomes if o["knob"] not in ("IRQ default affinity",) and o["result"] == "set"]
        assert moved
        # A task pinned to a target moves to the housekeeping CPU, and back to its own pinning on revert.
        assert os.sched_getaffinity(sleeper) == {0}
        if CPUSET.is_dir():  # the shield: two exclusive cpusets, the sleeper in the housekeeping one
            assert (CPUSET / "quietcore-shield" / "cpuset.cpus").read_text().strip() == "1"
            assert (CPUSET / "quietcore-shield" / "cpuset.sched_load_balance").read_text().strip() == "0"
            assert (CPUSET / "cpuset.sched_load_balance").read_text().strip() == "0"
            assert Path(f"/proc/{sleeper}/cpuset").read_text().strip() == "/quietcore-housekeeping"
            # This test's process was moved too, so a child born now starts in the housekeeping set, on
            # CPU 0: what the shield is for, and what affinity alone cannot do.
            born = subprocess.run(["sh", "-c", "cat /proc/self/cpuset; taskset -pc $$"], capture_output=True,
                                  text=True, check=True)  # fmt: skip
            assert born.stdout.split()[0] == "/quietcore-housekeeping" and born.stdout.strip().endswith(": 0")
        assert cli("tune", "verify").returncode == 0
        # Someone else changes a kept knob behind quietcore's back: verify names it, exit 1.
        Path("/proc/irq/default_smp_affinity").write_text(saved["/proc/irq/default_smp_affinity"])
        drift = cli("tune", "verify")
        assert drift.returncode == 1 and "DRIFTED /proc/irq/default_smp_affinity" in drift.stdout, drift.stdout
        back = cli_process("tune", "revert")
        assert back.returncode == 0 and "put back" in back.stdout, back.stderr
        assert changed(saved) == [], "not put back exactly"
        assert os.sched_getaffinity(sleeper) == {1}
        if CPUSET.is_dir():
            assert Path(f"/proc/{sleeper}/cpuset").read_text().strip() == "/"
        again = cli("tune", "revert")
        assert again.returncode == 0 and "Nothing to revert." in again.stdout
        assert cli("tune", "verify").stdout.strip().endswith("0 of 0 tuned knobs still in force.")


def _journal_rows(journal_db: Path) -> int:
    """How many entries the node journal holds (0 before it exists)."""
    with contextlib.closing(sqlite3.connect(journal_db)) as conn, contextlib.suppress(sqlite3.OperationalError):
        return int(conn.execute("SELECT count(*) FROM journal").fetchone()[0])
    return 0


def _wait_for_entry(child: Forked, journal_db: Path, before: int) -> None:
    """Until `tune apply` has written its first journal entry (or ended)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and child.poll() is None:
        with (
            contextlib.closing(sqlite3.connect(journal_db, timeout=30)) as conn,
            contextlib.suppress(sqlite3.OperationalError),  # no table yet
        ):
            if conn.execute("SELECT count(*) FROM journal").fetchone()[0] > before:
                return
        time.sleep(0.002)


@ROOT_ONLY
@TWO_CPUS
def test_apply_killed_at_random_points_then_revert_restores_everything(
    cli_env: dict[str, str], cli_main: CliRunner
) -> None:
    """kill -9 of `tune apply` at 14 seeded random moments of its work
    (from its first journal entry to 0.25 s later: here it records its 74
    entries and ends 0.19-0.23 s after the first), each followed by `tune
    revert`: every knob, the shield's cpusets and every thread's cpuset are
    back as they were, each time. Each apply is a forked child (`Forked`),
    killed as any process is, and each revert runs in this process
    (`cli_main`): what is tested is their work, not 28 start-ups of Python
    (test_apply_verify_revert_puts_every_knob_back runs both as `python -m
    quietcore`)."""
    seed = int(os.environ.get("QUIETCORE_KILL_SEED", "20261123"))
    rng = random.Random(seed)
    points = sorted(rng.uniform(0.0, 0.25) for _ in range(14))
    print(f"kill -9 points, seconds after apply's first journal entry (seed {seed}): {[round(p, 3) for p in points]}")
    sets = cpusets()
    journal_db = Path(cli_env["QUIETCORE_STATE_DIR"]) / "journal.db"
    with restored() as saved, pinned_sleeper({1}) as sleeper:
        for at in points:
            before = _journal_rows(journal_db)
            child = Forked(["tune", "apply", "--yes"], cli_env)
            _wait_for_entry(child, journal_db, before)
            time.sleep(at)
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGKILL)
            child.wait()
            back = cli_main("tune", "revert")
            assert back.returncode == 0, back.stderr
            all_back(saved, sets, f"after a kill at {at:.3f} s (seed {seed}) and a revert")
            assert os.sched_getaffinity(sleeper) == {1}, f"the pinned task, after a kill at {at:.3f} s"


@ROOT_ONLY
@TWO_CPUS
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_signal_during_apply_leaves_each_knob_old_or_new_and_the_journal_says_which(
    cli_env: dict[str, str], cli_main: CliRunner, sig: signal.Signals
) -> None:
    """SIGINT, SIGTERM or SIGHUP at seeded moments of `tune apply`: it ends
    (130) or had finished; no entry is left pending (the signal waits
    while a knob is recorded, written and marked); every knob marked kept
    reads its new value, every one not in the journal its old; and revert
    (in this process, as in the kill test) puts all back."""
    seed = int(os.environ.get("QUIETCORE_KILL_SEED", "20261123")) + int(sig)
    rng = random.Random(seed)
    points = sorted(rng.uniform(0.0, 0.15) for _ in range(4))
    print(f"{sig.name}, seconds after apply's first journal entry (seed {seed}): {[round(p, 3) for p in points]}")
    sets = cpusets()
    journal_db = Path(cli_env["QUIETCORE_STATE_DIR"]) / "journal.db"
    with restored() as saved:
        for at in points:
            before = _journal_rows(journal_db)
            child = Forked(["tune", "apply", "--yes"], cli_env)
            # From its first write on: a signal before it kills it before it can act at all.
            _wait_for_entry(child, journal_db, before)
            time.sleep(at)
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, sig)
            _, err = child.communicate()
            # 130: it stopped; 0: it had finished (a signal as main returns is held by Forked; a `python -m
            # quietcore` can also end by the signal itself there, as the interpreter's last steps restore the
            # default action). The journal tells which knobs were set.
            assert child.returncode in (0, 130), err
            assert "Traceback" not in err
            print(f"  {sig.name} at +{at:.3f} s: exit {child.returncode}")
            with contextlib.closing(sqlite3.connect(journal_db)) as conn:
                states = conn.execute("SELECT state, kind, target, new_value FROM journal").fetchall()
            assert not [r for r in states if r[0] == "pending"], f"{sig.name} at {at:.3f} s left an entry pending"
            kept_files = {
                t: v for state, kind, t, v in states if state == "kept" and kind in ("sysfs", "procfs", "irq-affinity")
            }
            now = knobs()
            for target, value in kept_files.items():
                assert equal(target, now.get(target, value), value), f"{target} is kept but reads {now.get(target)}"
            for target, value in saved.items():
                if target not in kept_files and target in now and value not in ("present", "absent"):
                    assert equal(target, now[target], value), f"{target} changed without a kept entry"
            back = cli_main("tune", "revert")
            assert back.returncode == 0, back.stderr
            all_back(saved, sets, f"after {sig.name} at {at:.3f} s and a revert")


@ROOT_ONLY
@TWO_CPUS
@pytest.mark.slow
def test_run_tickless_killed_with_the_shield_up_is_undone_by_the_next_command(
    cli_env: dict[str, str], cli_main: CliRunner
) -> None:
    """`run tickless` has a shielded cell (the shield as a temporary lever).
    kill -9 of the run and its workload at seeded moments after the shield
    begins to go up (mid-apply, mid-run or mid-undo): the next command,
    whatever it is, puts every knob, cpuset and thread back (`results list`
    in this process: the recovery every command starts with is what is
    tested; test_node_lock runs it in a subprocess after a kill -9)."""
    seed = int(os.environ.get("QUIETCORE_KILL_SEED", "20261123"))
    rng = random.Random(seed)
    points = sorted(rng.uniform(0.0, 0.3) for _ in range(6))
    print(f"kill -9 of run tickless, seconds after the shield's first cpuset (seed {seed}): "
          f"{[round(p, 3) for p in points]}")  # fmt: skip
    sets = cpusets()
    with restored() as saved:
        for at in points:
            child = Forked(["run", "tickless", "--quick", "--reps", "40"], cli_env, new_session=True)
            deadline = time.monotonic() + 60
            while not SHIELD_DIRS[0].is_dir() and time.monotonic() < deadline and child.poll() is None:
                time.sleep(0.002)
            assert SHIELD_DIRS[0].is_dir(), "the run never put the shield up"
            time.sleep(at)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            after = cli_main("results", "list")
            assert after.returncode == 0, after.stderr
            all_back(saved, sets, f"after a kill at {at:.3f} s (seed {seed}) and the next command")


#: Threads that come and go while the shield is up: each lives 5 ms, a new one every ms.
CHURN = """
import threading, time
end = time.monotonic() + 30
while time.monotonic() < end:
    threading.Thread(target=time.sleep, args=(0.005,)).start()
    time.sleep(0.001)
"""


@ROOT_ONLY
@TWO_CPUS
def test_the_shields_housekeeping_is_not_said_unless_asked(cli: CliRunner, cli_main: CliRunner) -> None:
    """Issue 56: `run custom --factor shield=off,1` printed a line a thread that had exited before the shield
    came down ("thread 27472 has exited (left in the journal ...)"), and the next command a line a holder
    that had ended. A thread that exited needs nothing put back: neither command says a word of it, and
    --verbose still does of what the journal did."""
    with restored():
        churn = subprocess.Popen([sys.executable, "-c", CHURN])
        try:
            time.sleep(0.3)  # threads being born and ending before the shield goes up
            ran = cli("run", "custom", "--cmd", "sleep 0.2", "--factor", "cpus=1", "--factor", "shield=off,1",
                      "--reps", "2", "--warmup", "0", "--intrusions", "off")  # fmt: skip
        finally:
            churn.kill()
            churn.wait()
        assert ran.returncode == 0, ran.stderr
        assert "has exited" not in ran.stdout + ran.stderr and "quietcore:" not in ran.stderr, ran.stderr
        after = cli_main("results", "list")
        assert after.returncode == 0 and after.stderr == "", after.stderr


@contextlib.contextmanager
def debugfs() -> Iterator[bool]:
    """debugfs mounted for the test when it was not (the preemption model
    lives there), unmounted after; yields whether the model can be read (a
    locked-down kernel, as this VM's, answers EPERM)."""
    mounted = False
    if not Path("/sys/kernel/debug/sched").exists():
        mounted = subprocess.run(["mount", "-t", "debugfs", "none", "/sys/kernel/debug"], check=False,
                                 capture_output=True).returncode == 0  # fmt: skip
    try:
        readable = True
        try:
            Path("/sys/kernel/debug/sched/preempt").read_text()
        except OSError:
            readable = False
        yield readable
    finally:
        if mounted:
            subprocess.run(["umount", "/sys/kernel/debug"], check=False)


@ROOT_ONLY
@TWO_CPUS
def test_latency_profile_with_rt_unthrottled_applies_and_reverts_the_scheduler_knobs(cli: CliRunner) -> None:
    """--profile latency --allow-rt-unthrottled on this node: RT throttling
    lifted, timer_migration 0, the C-state limit held at 0 µs by a holder
    process, the preemption model full (debugfs mounted for it if need
    be); verify sees the holder end; revert puts each back as it was."""
    with debugfs() as preempt, restored() as saved:
        proc = cli("tune", "apply", "--yes", "--json", "--profile", "latency", "--allow-rt-unthrottled")
        assert proc.returncode == 0, proc.stderr
        knobs_set = {o["knob"]: o for o in json.loads(proc.stdout)}
        if saved["/proc/sys/kernel/sched_rt_runtime_us"] != "-1":
            assert knobs_set["RT throttling off"]["result"] == "set"
        assert Path("/proc/sys/kernel/sched_rt_runtime_us").read_text().strip() == "-1"
        assert Path("/proc/sys/kernel/timer_migration").read_text().strip() == "0"
        # The C-state limit: a holder keeps /dev/cpu_dma_latency open at 0 µs, and the kernel reads it back.
        assert knobs_set["C-state limit"]["result"] == "set" and len(holders()) == 1
        assert dma_latency() == 0
        verified = cli("tune", "verify")
        assert verified.returncode == 0, verified.stdout
        if preempt and "full" in saved["/sys/kernel/debug/sched/preempt"]:
            assert "(full)" in Path("/sys/kernel/debug/sched/preempt").read_text()
        elif not preempt:  # the plan says why the model stays
            notes = json.loads(cli("tune", "plan", "--json", "--profile", "latency").stdout)["notes"]
            assert any(n.startswith("the preemption model stays") for n in notes), notes
        # The holder ends behind quietcore's back: the limit is gone, and verify says so.
        os.kill(holders()[0], signal.SIGTERM)
        time.sleep(0.3)
        drift = cli("tune", "verify")
        assert (
            drift.returncode == 1
            and "DRIFTED /dev/cpu_dma_latency: set to 0, now none. quietcore's PM QoS holder" in drift.stdout
        )
        back = cli("tune", "revert")
        assert back.returncode == 0, back.stderr
        assert changed(saved) == [], "not put back exactly"
        assert holders() == [] and dma_latency() > 0
    plain = json.loads(cli("tune", "plan", "--json").stdout)
    assert "RT throttling off" not in {i["knob"] for i in plain["runtime"]}
    assert (
        any("--allow-rt-unthrottled" in n for n in plain["notes"])
        or saved["/proc/sys/kernel/sched_rt_runtime_us"] == "-1"
    )


@ROOT_ONLY
@TWO_CPUS
def test_revert_to_an_entry_keeps_what_came_before_it(cli: CliRunner, journal_file: Path) -> None:
    """`tune revert --to ID` puts back only the changes after entry ID,
    newest first, and leaves the earlier ones kept; `--all` then the rest."""
    with restored() as saved:
        assert cli("tune", "apply", "--yes", "--no-shield").returncode == 0
        with contextlib.closing(sqlite3.connect(journal_file)) as conn:
            kept = [i for (i,) in conn.execute("SELECT id FROM journal WHERE state = 'kept' ORDER BY id")]
        middle = kept[len(kept) // 2]
        assert cli("tune", "revert", "--to", str(middle)).returncode == 0
        with contextlib.closing(sqlite3.connect(journal_file)) as conn:
            rows = {i: (state, kind) for i, state, kind in conn.execute("SELECT id, state, kind FROM journal")}
        states = {i: state for i, (state, _) in rows.items()}
        assert all(states[i] == "kept" for i in kept if i <= middle), (middle, rows)
        # Put back, or gone: a thread that ended between apply and revert (the plan moves about 40
        # threads, kworkers and short-lived user tasks among them). Asked for `reverted` alone, this
        # failed once in a suite here; a `sleep 1.5` that ends between `tune apply --no-shield` and
        # `tune revert` is journaled `gone`, task-affinity, as it should be.
        assert all(states[i] == "reverted" or rows[i] == ("gone", "task-affinity") for i in kept if i > middle), (
            middle,
            rows,
        )
        assert cli("tune", "verify").returncode == 0
        assert cli("tune", "revert", "--all").returncode == 0
        assert changed(saved) == []
    bad = cli("tune", "revert", "--all", "--to", "3")
    assert bad.returncode == 2 and "give --all or --to ID, not both" in bad.stderr


@ROOT_ONLY
@TWO_CPUS
def test_a_saved_plan_with_a_file_this_node_lacks_changes_nothing(cli: CliRunner, tmp_path: Path) -> None:
    """`tune apply --plan FILE` with an IRQ this node does not have (a plan
    from another node, a device gone since): one line naming it, exit 2,
    and not one knob written."""
    plan = json.loads(cli("tune", "plan", "--json").stdout)
    plan["runtime"].insert(0, {"knob": "IRQ 9999 (gone0)", "current": "0-1", "planned": "0", "reason": "test",
                               "action": {"kind": "irq-affinity", "target": "/proc/irq/9999/smp_affinity",
                                          "value": "1", "note": "IRQ 9999 (gone0)"}})  # fmt: skip
    saved_plan = tmp_path / "plan.json"
    saved_plan.write_text(json.dumps(plan))
    with restored() as saved:
        proc = cli("tune", "apply", "--plan", str(saved_plan), "--yes")
        assert proc.returncode == 2, proc.stderr
        assert "/proc/irq/9999/smp_affinity" in proc.stderr and "nothing changed" in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
        assert changed(saved) == []
        assert cli("tune", "verify").stdout.strip().endswith("0 of 0 tuned knobs still in force.")
    bad = cli("tune", "apply", "--plan", str(tmp_path / "none.json"))
    assert bad.returncode == 2 and "invalid --plan" in bad.stderr and "valid: a file from" in bad.stderr


@ROOT_ONLY
@TWO_CPUS
def test_apply_waits_for_a_journal_another_process_has_locked(cli: CliRunner, journal_file: Path) -> None:
    """Another process holds the node journal (BEGIN EXCLUSIVE) for 1 s as
    apply starts: apply waits for it (sqlite's busy timeout, 30 s) and
    then applies everything, journaled; nothing is written unrecorded."""
    from quietcore.store import journal

    opened = journal.open_node()  # the journal exists, with its schema
    assert opened is not None
    opened.close()
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sqlite3, sys, time\n"
        f"c = sqlite3.connect({str(journal_file)!r}, isolation_level=None)\n"
        "c.execute('BEGIN EXCLUSIVE'); print('held', flush=True); time.sleep(1); c.execute('COMMIT')\n")],
        stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with restored() as saved:
            started = time.monotonic()
            proc = cli("tune", "apply", "--yes", "--no-shield")
            waited = time.monotonic() - started
            assert proc.returncode == 0, proc.stderr
            assert waited >= 0.5, f"apply did not wait for the lock ({waited:.2f} s)"
            with contextlib.closing(sqlite3.connect(journal_file)) as conn:
                states = {state for (state,) in conn.execute("SELECT state FROM journal")}
            assert states <= {"kept", "failed"} and "kept" in states
            assert cli("tune", "revert").returncode == 0
            assert changed(saved) == []
    finally:
        holder.kill()
        holder.wait()


@contextlib.contextmanager
def read_only(path: str) -> Iterator[None]:
    """`path` behind a read-only bind mount of itself, as a read-only /sys
    in a container has it; the mount is gone after, whatever happened."""
    subprocess.run(["mount", "--bind", path, path], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", path], check=True)
        yield
    finally:
        subprocess.run(["umount", path], check=False)


@ROOT_ONLY
@TWO_CPUS
def test_a_read_only_file_stops_apply_there_and_revert_puts_the_rest_back(cli: CliRunner) -> None:
    """A knob on a read-only file system (EROFS): apply stops at it with one
    line that names it and says what is kept, exit 1; the knob is as it was;
    `tune revert` puts back every change made before it."""
    knob = "/proc/irq/default_smp_affinity"
    with restored() as saved:
        with read_only(knob):
            proc = cli("tune", "apply", "--yes")
            assert proc.returncode == 1, proc.stderr
            assert knob in proc.stderr and "EROFS" in proc.stderr and "are kept" in proc.stderr, proc.stderr
            assert len(proc.stderr.strip().splitlines()) == 1
            assert equal(knob, Path(knob).read_text().strip(), saved[knob])
            assert changed(saved) != [], "the changes before it were made (and are kept)"
        back = cli("tune", "revert")
        assert back.returncode == 0, back.stderr
        assert changed(saved) == []


@ROOT_ONLY
def test_a_normal_user_can_plan_but_not_apply(cli_env: dict[str, str], tmp_path: Path) -> None:
    import quietcore.experiments.levers
    import quietcore.store.db
    import quietcore.tune.state  # noqa: F401  (nobody cannot import from under /root)
    from quietcore.cli import main

    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
        assert main(["tune", "plan"]) == 0  # and imports what planning needs, while still root

    def work(codes: dict[str, Any]) -> None:  # as nobody: plan, then try to apply
        os.environ.update({"QUIETCORE_DB": "/tmp/qc-nobody-tune.db"})
        with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
            codes["plan"] = main(["tune", "plan"])
        codes["apply"] = main(["tune", "apply", "--yes"])

    codes = as_nobody(work)
    assert codes == {"plan": 0, "apply": 3}, codes


@pytest.mark.slow
@ROOT_ONLY
@TWO_CPUS
def test_prove_measures_before_and_after_and_undoes_the_tuning(
    cli: CliRunner, cli_main: CliRunner, db_file: Path
) -> None:
    with restored() as saved:
        proc = cli("tune", "prove", "--duration", "0.5", "--rounds", "2", "--seed", "7", "--experiment", "tickless",
                   "--json", timeout=300)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)
        assert changed(saved) == [], "prove left the tuning in place"
        rows = out["rows"]
        targets = {r["where"] for r in rows if r["where"].startswith("CPU ")}
        assert targets == {f"CPU {c}" for c in set(allowed_cpus()) - {0}}
        # A p99.9 only from 1,000 gaps or more (stats.percentiles): a row when every round had that many
        conn = sqlite3.connect(db_file)
        fewest = conn.execute("SELECT MIN(n.gaps) FROM noise_cpu n JOIN runs r ON r.id = n.run_id "
                              "WHERE r.session_id = ? AND n.cpu != 0", (out["session"],)).fetchone()[0]  # fmt: skip
        conn.close()
        tail = {"p99.9 gap"} if fewest >= 1000 else set()
        always = {"lost time", "max gap", "events", "task preemptions", "device interrupts", "IPIs", "softirqs"}
        assert {r["metric"] for r in rows if r["where"].startswith("CPU ")} == always | tail
        # The experiment's workload on the targets, before and after: tickless's matmul, timed.
        (work,) = [r for r in rows if not r["where"].startswith("CPU ")]
        assert work["where"].startswith("matmul on CPUs ") and work["metric"] == "wall_s" and work["unit"] == "s"
        assert all(r["before"] >= 0 and r["after"] >= 0 and r["verdict"] for r in rows)
        assert work["before"] > 0 and work["after"] > 0
        conn = sqlite3.connect(db_file)
        stored = [(json.loads(p), kind) for (p, kind) in conn.execute(
            "SELECT params, kind FROM runs WHERE session_id = ? ORDER BY seq", (out["session"],))]  # fmt: skip
        conn.close()
        # The table is the session's last run, and the report shows it in place of the rounds' runs.
        assert stored[-1][1] == "tune-prove"
        states = [(params["tune"], kind) for params, kind in stored[:-1]]
        report = cli_main("report", "--out", str(db_file.parent / "prove-report"), str(out["session"]))
        assert report.returncode == 0, report.stderr
        markdown = (db_file.parent / "prove-report" / "report.md").read_text()
        assert "### tune prove: before and after" in markdown and "| CPU 1 | max gap (µs) |" in markdown
        assert ("| CPU 1 | p99.9 gap (µs) |" in markdown) == bool(tail)
        assert "### Run 1: noise" not in markdown
        # Two rounds, each before and after, in the seeded order: a noise run and a matmul run each.
        assert sorted(states) == sorted([("after", "noise"), ("after", "matmul"), ("before", "noise"),
                                         ("before", "matmul")] * 2)  # fmt: skip
        kept = cli("tune", "prove", "--duration", "0.5", "--rounds", "1", "--seed", "7", "--keep", timeout=300)
        assert kept.returncode == 0, kept.stderr
        assert "too few rounds for a verdict" in " ".join(kept.stdout.split())  # a cell's words, wrapped
        assert parse_cpumask(Path("/proc/irq/default_smp_affinity").read_text()) == {0}
        assert cli("tune", "revert").returncode == 0
        assert changed(saved) == []


def test_export_tuned_profile_on_the_fixture(cli_main: CliRunner, tmp_path: Path) -> None:
    out = tmp_path / "quietcore-shield"
    proc = cli_main("tune", "plan", "--root", str(XEON_ROOT), "--profile", "latency", "--export", "tuned", str(out))
    assert proc.returncode == 0, proc.stderr
    conf = (out / "tuned.conf").read_text()
    assert "include=cpu-partitioning" in conf and "isolated_cores=1-3,5-7,9-11,13-15" in conf
    again = cli_main("tune", "plan", "--root", str(XEON_ROOT), "--export", "tuned", str(out))
    assert again.returncode == 2 and "exists" in again.stderr
    bad = cli_main("tune", "plan", "--export", "ansible", str(tmp_path / "x"))
    assert bad.returncode == 2 and "invalid --export kind 'ansible' (valid: tuned, script)" in bad.stderr


@ROOT_ONLY
@TWO_CPUS
def test_exported_scripts_apply_and_put_back_this_node(cli: CliRunner, tmp_path: Path) -> None:
    script = tmp_path / "shield.sh"
    with restored() as saved:
        proc = cli("tune", "plan", "--export", "script", str(script))
        assert proc.returncode == 0, proc.stderr
        ran = subprocess.run(["sh", str(script)], capture_output=True, text=True, check=False)
        assert ran.returncode == 0
        assert parse_cpumask(Path("/proc/irq/default_smp_affinity").read_text()) == {0}
        back = subprocess.run(["sh", f"{script}.revert"], capture_output=True, text=True, check=False)
        assert back.returncode == 0
        assert changed(saved) == []


@ROOT_ONLY
@TWO_CPUS
def test_apply_with_the_journal_on_a_full_disk_changes_nothing(
    cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No old value recorded, no write: one line, exit 1, every knob as it was."""
    from quietcore.store import journal

    disk = tmp_path / "full"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=755", "tmpfs", str(disk)], check=True)
    try:
        (disk / "state").mkdir(mode=0o755)
        monkeypatch.setenv("QUIETCORE_STATE_DIR", str(disk / "state"))
        opened = journal.open_node()  # the journal and its schema, before the disk fills
        assert opened is not None
        opened.close()
        subprocess.run(["dd", "if=/dev/zero", f"of={disk / 'fill'}", "bs=4k"], capture_output=True, check=False)
        with restored() as saved:
            before = affinities()
            proc = cli("tune", "apply", "--yes", env={"QUIETCORE_STATE_DIR": str(disk / "state")})
            assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
            assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
            assert changed(saved) == []
            now = affinities()
            assert {t: c for t, c in before.items() if t in now and now[t] != c} == {}
    finally:
        subprocess.run(["umount", str(disk)], check=False)
