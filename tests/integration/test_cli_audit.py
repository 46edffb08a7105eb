"""`quietcore audit` and `quietcore snapshot` as a user runs them."""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest

from quietcore import knobs
from quietcore.actions import KINDS
from quietcore.audit import expected
from quietcore.owner import start_time
from tests.conftest import ALL_ROOTS, GPU_ROOT, XEON_ROOT, CliRunner, allowed_cpus

STATUSES = {"ok", "warn", "fail", "info", "unknown"}


def valid(findings: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The audit's JSON as fleet tooling reads it: every check, in order, each
    action typed, its text rendered from its data. By id."""
    ids = [f["id"] for f in findings]
    assert ids == expected(has_devices="device.locality" in ids)
    for f in findings:
        assert f["status"] in STATUSES
        assert set(f) == {"id", "status", "summary", "evidence", "advice", "actions", "needs"}
        assert set(f["needs"]) <= {"root", "reboot", "hardware"}
        # Every piece of advice is data: the text is rendered from the actions.
        assert bool(f["advice"]) == bool(f["actions"]), f["id"]
        for action in f["actions"]:
            assert action["kind"] in KINDS and action["target"] and action["fixes"] == f["id"]
            assert set(action["needs"]) <= set(f["needs"])
            if action["kind"] in knobs.KINDS:  # one quietcore carries out: a target its kind takes
                knobs.KINDS[action["kind"]].render(action["target"], action["value"])
    return {f["id"]: f for f in findings}


@pytest.mark.parametrize("root", [*ALL_ROOTS, GPU_ROOT], ids=lambda p: p.name.removesuffix(".tar.gz"))
def test_json_has_every_check_on_every_fixture_root(cli_main: CliRunner, root: Path) -> None:
    proc = cli_main("audit", "--root", str(root), "--json")
    assert proc.returncode == 0, proc.stderr
    valid(json.loads(proc.stdout))


def test_gpu_node_json_with_targets_names_each_thread_by_its_start_time(cli_main: CliRunner) -> None:
    """The real GPU node with CPUs 4-15 as targets: its movable kthreads are
    fixes quietcore could carry out, each thread named with the start time
    its snapshot recorded."""
    proc = cli_main("audit", "--root", str(GPU_ROOT), "--cpus", "4-15", "--json")
    assert proc.returncode == 0, proc.stderr
    findings = valid(json.loads(proc.stdout))
    assert findings["mem.numa_balancing"]["summary"].endswith("1 NUMA node")
    moves = [a for a in findings["kthread.placement"]["actions"] if a["kind"] == "task-affinity"]
    assert moves and all(a["value"] == "0-3" for a in moves), findings["kthread.placement"]
    with tarfile.open(GPU_ROOT) as tar:
        for a in moves:
            pid, _, started = a["target"].partition("@")
            stat = tar.extractfile(f"./proc/{pid}/stat")
            assert stat is not None and stat.read().decode().rsplit(")", 1)[1].split()[19] == started, a


def _stat(pid: int, comm: str, flags: int, start: str | None) -> str:
    tail = f" 0 0 0 3 7 0 0 20 0 1 0 {start} 0 0 18446744073709551615" if start else " 0 0"
    return f"{pid} ({comm}) S 2 0 0 0 -1 {flags} 120{tail}"


def test_json_answers_on_a_root_with_a_misplaced_task_irq_and_kthread_of_each_kind(cli_main: CliRunner,
                                                                                  tmp_path: Path) -> None:  # fmt: skip
    """The 2-socket Xeon, its targets (2-3,6-7,10-11,14-15) run on by a
    movable kthread with its start time, one whose stat stops short of it,
    a bound per-CPU kthread, node_exporter (a user task), and the NIC's IRQ
    120. `audit --json` exited 2 on such a root ("refused task-affinity
    target '52'"): the fix was made with a bare pid."""
    root = tmp_path / "root"
    shutil.copytree(XEON_ROOT, root)
    every = "0-15"
    kthread, bound = 0x00200040, 0x00200040 | 0x04000000
    for pid, comm, flags, start, cpus in [(52, "kworker/u64:2-events_unbound", kthread, "4242", every),
                                          (53, "kcompactd0", kthread, None, every),
                                          (54, "kworker/6:1-mm_percpu_wq", bound, "43", "6"),
                                          (60, "node_exporter", 0x400100, "9000", every)]:  # fmt: skip
        (root / "proc" / str(pid)).mkdir()
        (root / "proc" / str(pid) / "stat").write_text(_stat(pid, comm, flags, start))
        (root / "proc" / str(pid) / "comm").write_text(comm)
        (root / "proc" / str(pid) / "status").write_text(f"Name:\t{comm}\nPid:\t{pid}\nCpus_allowed_list:\t{cpus}\n")
    proc = cli_main("audit", "--root", str(root), "--json")
    assert proc.returncode == 0, proc.stderr
    findings = valid(json.loads(proc.stdout))
    kthreads = findings["kthread.placement"]
    assert kthreads["status"] == "warn" and "kworker/u64:2-events_unbound[52]" in json.dumps(kthreads["evidence"])
    hk = "0-1,4-5,8-9,12-13"
    (moved, shown) = kthreads["actions"]
    assert (moved["kind"], moved["target"], moved["value"]) == ("task-affinity", "52@4242", hk)
    assert moved["text"] == f"taskset -pc {hk} 52"
    # no start time: the same fix, as text a person can use, and no knob quietcore would carry out
    assert (shown["kind"], shown["target"]) == ("note", f"taskset -pc {hk} 53") and "start time" in shown["note"]
    assert "54" not in json.dumps(kthreads["actions"])  # bound by the kernel: counted, not moved
    tasks = findings["task.placement"]
    assert tasks["status"] == "warn" and "node_exporter[60]" in json.dumps(tasks["evidence"])
    assert {a["kind"] for a in tasks["actions"]} == {"cgroup"}
    assert findings["irq.affinity"]["status"] == "fail"
    text = cli_main("audit", "--root", str(root))
    assert text.returncode == 0 and f"taskset -pc {hk} 52" in text.stdout, text.stderr


def test_json_answers_live_with_a_task_pinned_on_the_target(cli: CliRunner) -> None:
    """Live: a task pinned on the target CPU while `audit --json` runs. Every
    thread fix names a live thread by id and start time, as the knob takes it."""
    target = allowed_cpus()[-1]
    pinned = subprocess.Popen(["taskset", "-c", str(target), "sleep", "60"])
    try:
        proc = cli("audit", "--cpus", str(target), "--json")
    finally:
        pinned.kill()
        pinned.wait()
    assert proc.returncode == 0, proc.stderr
    findings = valid(json.loads(proc.stdout))
    assert findings["task.placement"]["status"] == "warn", findings["task.placement"]  # the pinned sleep, at least
    threads = [a for f in findings.values() for a in f["actions"] if a["kind"] == "task-affinity"]
    assert threads, findings["kthread.placement"]  # kthreadd, at least, may run anywhere
    for action in threads:
        tid, _, started = action["target"].partition("@")
        assert started.isdigit(), action
        assert start_time(int(tid)) in (started, None), action  # the thread's own start time, unless it has ended


def test_tuned_server_json_reports_the_stray_irq(cli_main: CliRunner) -> None:
    findings = {f["id"]: f for f in json.loads(cli_main("audit", "--root", str(XEON_ROOT), "--json").stdout)}
    assert findings["irq.affinity"]["status"] == "fail"
    stray = findings["irq.affinity"]
    assert "echo 3333 > /proc/irq/120/smp_affinity (mlx5_comp3@pci:0000:3b:00.0)" in stray["advice"]
    assert stray["actions"][0] | {"text": None} == {
        "kind": "irq-affinity", "target": "/proc/irq/120/smp_affinity", "value": "3333", "needs": ["root"],
        "fixes": "irq.affinity", "note": "mlx5_comp3@pci:0000:3b:00.0", "text": None}  # fmt: skip
    strict = cli_main("audit", "--root", str(XEON_ROOT), "--strict")
    assert strict.returncode == 2 and "FAIL (1)" in strict.stdout


def test_text_groups_by_status(cli_main: CliRunner) -> None:
    out = cli_main("audit", "--root", str(XEON_ROOT)).stdout
    assert out.index("FAIL (1)") < out.index("OK (") < out.index("INFO (")
    fix = out.index("fix: echo 3333 > /proc/irq/120/smp_affinity (mlx5_comp3@pci:0000:3b:00.0)\n")
    # the finding's fixes, then what they need, once
    assert [line.strip() for line in out[fix:].split("\n")[1:3]] == [
        "fix: a managed IRQ refuses the write with EIO; use isolcpus=managed_irq (cpu.isolcpus)",
        "needs: root"], out[fix:]  # fmt: skip
    assert out.rstrip().endswith("26 checks: 1 fail, 0 warn, 17 ok, 8 info, 0 unknown.")


def test_a_finding_shows_eight_lines_of_evidence_and_json_every_one(cli_main: CliRunner) -> None:
    """irq.affinity gives a line a CPU: 16 on the GPU node, 384 on the nodes quietcore is for."""
    from quietcore.commands.audit import EVIDENCE_SHOWN

    said = cli_main("audit", "--root", str(GPU_ROOT)).stdout.splitlines()
    at = next(i for i, line in enumerate(said) if line.strip().startswith("irq.affinity:"))
    shown = [line for line in said[at + 1 : at + 1 + EVIDENCE_SHOWN] if "effective_affinity_list: CPU" in line]
    assert len(shown) == EVIDENCE_SHOWN and said[at + 1 + EVIDENCE_SHOWN].strip() == "and 8 more: --json has every one"
    (found,) = [f for f in json.loads(cli_main("audit", "--root", str(GPU_ROOT), "--json").stdout)
                if f["id"] == "irq.affinity"]  # fmt: skip
    assert len(found["evidence"]) == 16


def test_this_machine(cli_process: CliRunner) -> None:
    proc = cli_process("audit", "--json")
    assert proc.returncode == 0, proc.stderr
    findings = {f["id"]: f for f in json.loads(proc.stdout)}
    assert list(findings) == expected(has_devices="device.locality" in findings)
    if "hypervisor" in Path("/proc/cpuinfo").read_text():
        assert findings["virt.hypervisor"]["status"] == "warn"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--root", "/nonexistent"], "invalid --root /nonexistent: no such file (valid: a directory or a .tar.gz"),
        (["--root", "/usr"], "invalid --root /usr: no proc/ or sys/ in it"),
        (["--root", str(XEON_ROOT), "--cpus", "16"], "invalid --cpus 16: not an online CPU (valid: 0-15)"),
        (["--root", str(XEON_ROOT), "--cpus", "2-"], "invalid --cpus '2-'"),
    ],
)
def test_bad_arguments(cli_main: CliRunner, args: list[str], message: str) -> None:
    proc = cli_main("audit", *args)
    assert proc.returncode == 2
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_garbled_tarball_root(cli_main: CliRunner, tmp_path: Path) -> None:
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(b"\x1f\x8b" + b"not really gzip" * 20)
    proc = cli_main("audit", "--root", str(bad))
    assert proc.returncode == 2 and "invalid --root" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("name", ["snap", "snap.tar.gz"])
def test_snapshot_audits_like_the_node(cli: CliRunner, cli_process: CliRunner, tmp_path: Path, name: str) -> None:
    out = tmp_path / name
    # the directory form as `python -m quietcore`, the tarball in a forked child
    proc = cli_process("snapshot", "--out", str(out)) if name == "snap" else cli("snapshot", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert f"quietcore audit --root {out}" in proc.stdout
    if name.endswith(".tar.gz"):
        with tarfile.open(out) as tar:
            names = tar.getnames()
        assert "./proc/interrupts" in names and "./quietcore-snapshot.json" in names
    live = {f["id"]: f for f in json.loads(cli("audit", "--json").stdout)}
    offline = {f["id"]: f for f in json.loads(cli("audit", "--root", str(out), "--json").stdout)}
    for check_id, finding in live.items():
        if check_id in ("kthread.placement", "task.placement"):
            continue  # tasks come and go between the two readings
        assert offline[check_id]["status"] == finding["status"], check_id
    again = cli("snapshot", "--out", str(out))
    assert again.returncode == 2 and "will not overwrite without --force" in again.stderr
    assert cli("snapshot", "--out", str(out), "--force").returncode == 0


def test_snapshot_into_missing_directory(cli_main: CliRunner, tmp_path: Path) -> None:
    proc = cli_main("snapshot", "--out", str(tmp_path / "no" / "snap"))
    assert proc.returncode == 2 and "does not exist" in proc.stderr
