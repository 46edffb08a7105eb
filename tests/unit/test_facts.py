"""Fact parsers against fixture roots of real machines."""

from __future__ import annotations

from quietcore.facts import cpus, kernel, virt
from quietcore.facts.fingerprint import collect_facts, fingerprint
from quietcore.facts.procstat import parse_proc_stat, steal_delta_ns
from quietcore.facts.root import Root
from tests.conftest import ARM_ROOT, KVM_ROOT, XEON_ROOT


def test_kvm_guest_is_detected_as_virtualized() -> None:
    v = virt.detect(Root(KVM_ROOT))
    assert v.virtualized
    assert v.hypervisor == "KVM"
    assert any("hypervisor" in e for e in v.evidence)
    assert any("kvm-clock" in e for e in v.evidence)
    warning = v.warning()
    assert warning is not None and "The host's noise" in warning and "less here than on bare metal" in warning


def test_cpuid_vendor_names_the_hypervisor_first() -> None:
    v = virt.detect(Root(KVM_ROOT), cpuid_vendor="Microsoft Hv")
    assert v.hypervisor == "Hyper-V"


def test_bare_metal_is_not_virtualized() -> None:
    v = virt.detect(Root(XEON_ROOT))
    assert not v.virtualized
    assert v.hypervisor is None
    assert v.warning() is None


def test_empty_root_reports_nothing() -> None:
    assert not virt.detect(Root("/nonexistent-root")).virtualized


def test_cpu_facts_of_isolated_xeon() -> None:
    root = Root(XEON_ROOT)
    assert cpus.online_cpus(root) == frozenset(range(16))
    assert cpus.isolated_cpus(root) == {2, 3, 6, 7, 10, 11, 14, 15}
    assert cpus.nohz_full_cpus(root) == {2, 3, 6, 7, 10, 11, 14, 15}
    assert cpus.thread_siblings(root, 2) == frozenset({2, 10})
    assert cpus.smt_state(root) == "on"
    assert set(cpus.governors(root, frozenset(range(16))).values()) == {"performance"}
    info = cpus.parse_cpuinfo(root.read_text("proc/cpuinfo") or "")
    assert info.model == "Intel(R) Xeon(R) Gold 6338N CPU @ 2.20GHz"
    assert "hypervisor" not in info.flags and "constant_tsc" in info.flags


def test_kernel_config_from_proc_config_gz() -> None:
    root = Root(KVM_ROOT)
    ident = kernel.read_identity(root)
    config, source = kernel.read_config(root, ident.release)
    assert source == "/proc/config.gz"
    assert config["CONFIG_HZ"] == "250"
    assert config["CONFIG_PREEMPT_DYNAMIC"] == "y"
    assert kernel.preempt_from_version(ident.version) == "PREEMPT_DYNAMIC"


def test_kernel_config_from_boot_and_dynamic_mode() -> None:
    root = Root(XEON_ROOT)
    config, source = kernel.read_config(root, "6.8.0-45-generic")
    assert source == "/boot/config-6.8.0-45-generic"
    assert config["CONFIG_HZ"] == "1000"
    assert config["CONFIG_NO_HZ_FULL"] == "y"
    assert config["CONFIG_PREEMPT"] == "n"
    assert kernel.preempt_dynamic_mode(root) == "voluntary"


def test_arm64_server_facts() -> None:
    root = Root(ARM_ROOT)
    info = cpus.parse_cpuinfo(root.read_text("proc/cpuinfo") or "")
    assert "asimd" in info.flags and info.model == "ARM Neoverse-N1"
    assert not virt.detect(root).virtualized
    assert kernel.read_config(root, "6.5.0-1020-aws") == ({}, None)


def test_preempt_from_version_strings() -> None:
    assert kernel.preempt_from_version("#1 SMP PREEMPT_RT Tue") == "PREEMPT_RT"
    assert kernel.preempt_from_version("#1 SMP PREEMPT Tue") == "PREEMPT"
    assert kernel.preempt_from_version("#1 SMP Tue") is None


def test_proc_stat_steal_delta() -> None:
    before = parse_proc_stat("cpu  1 2 3 4 5 6 7 8 0 0\ncpu0 1 0 0 0 0 0 0 10 0 0\ncpu1 1 0 0 0 0 0 0 0 0 0\n")
    after = parse_proc_stat("cpu  1 2 3 4 5 6 7 9 0 0\ncpu0 1 0 0 0 0 0 0 13 0 0\ncpu1 1 0 0 0 0 0 0 0 0 0\n")
    assert steal_delta_ns(before, after, 100) == {0: 30e6, 1: 0.0}


def test_fingerprint_ignores_drifting_evidence_but_not_configuration() -> None:
    facts = collect_facts(Root(KVM_ROOT))
    drifted = {**facts, "virtualization": {**facts["virtualization"], "evidence": ["different words"]}}
    assert fingerprint(drifted) == fingerprint(facts)
    rebooted = {**facts, "boot_params": {"nohz_full": "1"}}
    assert fingerprint(rebooted) != fingerprint(facts)


def test_facts_of_isolated_xeon() -> None:
    facts = collect_facts(Root(XEON_ROOT))
    assert facts["boot_params"]["isolcpus"] == "managed_irq,domain,2-3,6-7,10-11,14-15"
    assert facts["boot_params"]["nohz_full"] == "2-3,6-7,10-11,14-15"
    assert facts["cpu"]["isolated"] == "2-3,6-7,10-11,14-15"
    assert facts["cpu"]["count"] == 16
    assert facts["thp"] == {"enabled": "madvise", "defrag": "madvise"}
    assert facts["kernel"]["config"]["CONFIG_HZ"] == "1000"
    assert facts["virtualization"]["virtualized"] is False
    assert fingerprint(facts) != fingerprint(collect_facts(Root(KVM_ROOT)))
