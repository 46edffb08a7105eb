"""The audit against fixture roots: each machine's findings are asserted."""

from __future__ import annotations

import shutil
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quietcore.audit import CHECKS, expected, run_checks
from quietcore.audit.context import AuditContext
from quietcore.audit.finding import Finding, Status
from quietcore.facts.root import Root
from tests.conftest import ALL_ROOTS, ARM_ROOT, KVM_ROOT, XEON_ROOT


def audit(root: Path, targets: frozenset[int] | None = None) -> dict[str, Finding]:
    return {f.id: f for f in run_checks(AuditContext(Root(root), targets))}


def statuses(findings: dict[str, Finding]) -> dict[str, str]:
    return {k: f.status.value for k, f in findings.items()}


def test_every_check_runs_on_every_root() -> None:
    ids = [check_id for check_id, _ in CHECKS]
    assert len(ids) == len(set(ids))
    for root in ALL_ROOTS:
        findings = run_checks(AuditContext(Root(root)))
        assert [f.id for f in findings] == expected(has_devices=False)  # these roots have no GPU nor NIC
        for f in findings:
            assert f.summary, f.id
            assert f.evidence, f.id  # every finding says what it read


def test_kvm_guest_without_isolation() -> None:
    f = audit(KVM_ROOT)
    assert f["virt.hypervisor"].status is Status.WARN and "KVM" in f["virt.hypervisor"].summary
    assert "The host's noise" in f["virt.hypervisor"].summary
    assert "no isolation is configured" in f["audit.targets"].summary
    assert f["cpu.isolcpus"].status is Status.WARN
    # This kernel lacks NO_HZ_FULL: the isolation advised leaves nohz_full out, and says why and what the flags do
    # (it advised nohz_full=1 beside cpu.nohz_full's "the kernel cannot").
    (line,) = f["cpu.isolcpus"].advice
    assert "isolcpus=managed_irq,domain,1 rcu_nocbs=1 irqaffinity=0 " in line and "nohz_full=" not in line
    assert "built without CONFIG_NO_HZ_FULL" in line
    assert "domain takes them out of the scheduler's load balancing" in line
    assert f["sched.rt_throttling"].status is Status.INFO  # the default, noise only to a real-time spinner
    assert f["cpu.isolcpus"].needs == ["root", "reboot"]
    # This kernel lacks NO_HZ_FULL: asking for nohz_full would do nothing.
    assert f["cpu.nohz_full"].status is Status.WARN and "CONFIG_NO_HZ_FULL" in f["cpu.nohz_full"].summary
    assert f["sched.hz"].summary.startswith("the tick runs at 250 Hz")
    assert "none" in f["sched.preempt"].summary and "default of PREEMPT_DYNAMIC" in f["sched.preempt"].summary
    assert f["clock.source"].status is Status.OK
    assert f["irq.affinity"].status is Status.INFO  # every CPU is a target: nowhere to move IRQs


def test_tuned_server_finds_the_stray_irq() -> None:
    f = audit(XEON_ROOT)
    stray = f["irq.affinity"]
    assert stray.status is Status.FAIL
    assert "120 (mlx5_comp3@pci:0000:3b:00.0)" in stray.summary
    (move, note) = stray.actions
    assert (move.kind, move.target, move.value, move.fixes) == ("irq-affinity", "/proc/irq/120/smp_affinity", "3333",
                                                                "irq.affinity")  # fmt: skip
    assert move.text() == "echo 3333 > /proc/irq/120/smp_affinity (mlx5_comp3@pci:0000:3b:00.0)"
    assert note.kind == "note" and "managed_irq" in note.target
    assert stray.needs == ["root"]
    assert statuses(f) | {"irq.affinity": "fail"} == statuses(f)
    expected_ok = ("cpu.isolcpus", "cpu.nohz_full", "cpu.rcu_nocbs", "cpu.housekeeping", "irq.default_affinity",
                   "irq.irqbalance", "kthread.placement", "task.placement", "mem.numa_balancing", "power.governor",
                   "power.turbo", "power.idle", "clock.source", "virt.hypervisor", "kernel.config")  # fmt: skip
    assert {k: statuses(f)[k] for k in expected_ok} == dict.fromkeys(expected_ok, "ok")
    assert "voluntary" in f["sched.preempt"].summary and "/sys/kernel/debug/sched/preempt" in f["sched.preempt"].summary
    assert f["cpu.topology"].summary.startswith("2 packages, 8 cores, 16 threads, 2 NUMA nodes")
    assert f["cpu.smt"].status is Status.INFO


def test_tuned_server_with_a_housekeeping_sibling() -> None:
    # GIVEN the user targets CPU 2 alone, WHEN its SMT sibling 10 stays housekeeping
    f = audit(XEON_ROOT, frozenset({2}))
    assert f["cpu.housekeeping"].status is Status.WARN and "10" in f["cpu.housekeeping"].summary


def test_arm64_server() -> None:
    f = audit(ARM_ROOT)
    s = statuses(f)
    assert s["clock.source"] == "ok" and "arch_sys_counter" in f["clock.source"].summary
    assert s["power.governor"] == "warn"
    assert [a.target for a in f["power.governor"].actions] == [
        f"/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor" for c in range(8)
    ]
    assert {a.value for a in f["power.governor"].actions} == {"performance"}
    assert s["power.idle"] == "warn" and "cpuoff" in f["power.idle"].summary
    # PSCI's deep states: not x86's intel_idle or processor parameters (were offered, with "x86. x86" after them)
    boot = [a.target for a in f["power.idle"].actions if a.kind == "boot-parameter"]
    assert boot == ["cpuidle.off"] and not any("x86" in line for line in f["power.idle"].advice)
    assert s["mem.swap"] == "warn"
    assert s["kernel.config"] == "unknown" and s["sched.hz"] == "unknown" and s["sched.preempt"] == "unknown"
    assert s["cpu.smt"] == "ok" and s["virt.hypervisor"] == "ok"
    # bare metal said by what was read: an Arm CPU has no cpuinfo flag 'hypervisor' in a VM either
    seen = {e.source: e.value for e in f["virt.hypervisor"].evidence}
    assert "/proc/cpuinfo" not in seen and seen["/sys/class/dmi/id/sys_vendor"] == "WIWYNN"
    assert s["cpu.isolcpus"] == "warn"
    assert any("isolcpus=managed_irq,domain,1-7 nohz_full=1-7 rcu_nocbs=1-7 irqaffinity=0" in a
               for a in f["cpu.isolcpus"].advice)  # fmt: skip


def test_user_chosen_targets_without_isolation_need_irq_moves(tmp_path: Path) -> None:
    f = audit(ARM_ROOT, frozenset({4, 5, 6, 7}))
    assert f["audit.targets"].summary.startswith("auditing CPUs 4-7 as targets: --cpus")
    assert f["irq.default_affinity"].status is Status.WARN
    assert "echo f > /proc/irq/default_smp_affinity" in f["irq.default_affinity"].advice
    assert f["kthread.placement"].status is Status.WARN
    assert f["task.placement"].status is Status.WARN


GARBLE = ["proc/interrupts", "proc/cmdline", "proc/irq/120/effective_affinity_list", "proc/irq/120/smp_affinity",
          "proc/irq/default_smp_affinity", "proc/sys/kernel/sched_rt_runtime_us", "sys/devices/system/cpu/online",
          "sys/devices/system/node/node0/cpulist", "proc/2/stat", "proc/2/status", "proc/swaps",
          "sys/devices/system/cpu/cpu2/cpuidle/state3/latency", "boot/config-6.8.0-45-generic",
          "sys/devices/virtual/workqueue/cpumask", "etc/default/irqbalance"]  # fmt: skip


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(GARBLE), st.binary(max_size=64), st.booleans())
def test_garbled_files_never_break_the_audit(tmp_path: Path, rel: str, junk: bytes, truncate: bool) -> None:
    root = tmp_path / "root"
    if not root.exists():  # one copy for all the examples: each puts back the file it garbled
        shutil.copytree(XEON_ROOT, root)
    path = root / rel
    intact = path.read_bytes()
    path.write_bytes(intact[: len(intact) // 2] if truncate else junk)
    try:
        findings = run_checks(AuditContext(Root(root)))
    finally:
        path.write_bytes(intact)
    assert [f.id for f in findings] == expected(has_devices=False)
    for f in findings:
        assert isinstance(f.status, Status) and f.summary


def test_an_irq_whose_affinity_is_garbled_is_not_called_stray(tmp_path: Path) -> None:
    root = tmp_path / "root"
    shutil.copytree(XEON_ROOT, root)
    (root / "proc/irq/120/effective_affinity_list").write_text("6-\n")
    (root / "proc/irq/120/effective_affinity").write_text("zz\n")
    (root / "proc/irq/120/smp_affinity_list").write_text("?\n")
    (root / "proc/irq/120/smp_affinity").write_text("?\n")
    f = audit(root)
    # IRQ 120's affinity cannot be read now, so it is not counted as stray
    # (on the intact tree it is the one fail, see test_tuned_server_finds_the_stray_irq).
    assert f["irq.affinity"].status is Status.OK
    assert not any(a.target == "/proc/irq/120/smp_affinity" for a in f["irq.affinity"].actions)
    assert audit(XEON_ROOT)["irq.affinity"].status is Status.FAIL


def test_smt_names_the_first_shared_cores_by_number_at_384_cpus(tmp_path: Path) -> None:
    """A made-up 2 x 96 x 2 (siblings numbered after every core): the cores named in order of their CPUs,
    and how many more; sorted as text they were 0,192, 1,193, 10,202, 100,292."""
    from tests.fixtures.make_roots import topology_root

    f = audit(topology_root(tmp_path / "node"))["cpu.smt"]
    assert f.status is Status.INFO
    assert f.summary == ("SMT is on: target CPUs share cores (0,192, 1,193, 2,194, 3,195, 4,196, 5,197, 6,198, "
                         "7,199, 184 more cores)")  # fmt: skip


def test_a_root_without_a_kernel_release_names_no_boot_config_of_none(tmp_path: Path) -> None:
    """A root with no proc/sys/kernel/osrelease (the made-up node): the config checks said they read
    "/boot/config-None"; they say the release is unknown, and where the config would be."""
    from tests.fixtures.make_roots import topology_root

    found = audit(topology_root(tmp_path / "node"))
    for check in ("kernel.config", "sched.hz"):
        f = found[check]
        assert f.status is Status.UNKNOWN
        said = {e.source: e.value for e in f.evidence}
        assert not any("None" in where for where in said), (check, said)
        assert said["/boot/config-$(uname -r)"].startswith("not looked for: the kernel release is unknown")
