"""`quietcore audit` and `quietcore snapshot` as a user runs them."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from quietcore.actions import KINDS
from quietcore.audit import CHECKS
from tests.conftest import ALL_ROOTS, XEON_ROOT, CliRunner

STATUSES = {"ok", "warn", "fail", "info", "unknown"}


@pytest.mark.parametrize("root", ALL_ROOTS, ids=lambda p: p.name)
def test_json_has_every_check_on_every_fixture_root(cli_main: CliRunner, root: Path) -> None:
    proc = cli_main("audit", "--root", str(root), "--json")
    assert proc.returncode == 0, proc.stderr
    findings = json.loads(proc.stdout)
    assert [f["id"] for f in findings] == [check_id for check_id, _ in CHECKS]
    for f in findings:
        assert f["status"] in STATUSES
        assert set(f) == {"id", "status", "summary", "evidence", "advice", "actions", "needs"}
        assert set(f["needs"]) <= {"root", "reboot", "hardware"}
        # Every piece of advice is data: the text is rendered from the actions.
        assert bool(f["advice"]) == bool(f["actions"]), f["id"]
        for action in f["actions"]:
            assert action["kind"] in KINDS and action["target"] and action["fixes"] == f["id"]
            assert set(action["needs"]) <= set(f["needs"])


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
    assert "fix: echo 3333 > /proc/irq/120/smp_affinity (mlx5_comp3@pci:0000:3b:00.0) (needs root)" in out
    assert out.rstrip().endswith("26 checks: 1 fail, 0 warn, 18 ok, 7 info, 0 unknown.")


def test_this_machine(cli_process: CliRunner) -> None:
    proc = cli_process("audit", "--json")
    assert proc.returncode == 0, proc.stderr
    findings = {f["id"]: f for f in json.loads(proc.stdout)}
    assert set(findings) == {c for c, _ in CHECKS}
    if "hypervisor" in Path("/proc/cpuinfo").read_text():
        assert findings["virt.hypervisor"]["status"] == "warn"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--root", "/nonexistent"], "invalid --root /nonexistent: not a directory or a .tar.gz snapshot"),
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
