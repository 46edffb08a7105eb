"""GPUs and NICs as node facts (issue 36): read from PCI sysfs files of a real
GPU node (tests/fixtures/roots/gpu-node-h200.tar.gz: its snapshot merged with
its PCI files) and of a made-up DGX (make_roots.dgx_root: 8 GPUs and 4
InfiniBand HCAs on 2 NUMA nodes); the audit names them, the plan keeps each
device's IRQs and threads on a housekeeping CPU near it, a node without
devices is as before, and a device file missing or malformed is an unknown
fact, never an error."""

from __future__ import annotations

import json
import os
import tarfile
from pathlib import Path

import pytest

from quietcore.attribution.intruders import CpuIntruders, Slot, Trace
from quietcore.audit import run_checks
from quietcore.audit.context import AuditContext
from quietcore.audit.finding import Finding
from quietcore.errors import UsageError
from quietcore.facts import snapshot
from quietcore.facts.cpulist import parse_cpulist
from quietcore.facts.devices import read_devices
from quietcore.facts.fingerprint import collect_facts, fingerprint
from quietcore.facts.root import Root
from quietcore.facts.snapshot import open_root
from quietcore.tune.plan import make_plan
from tests.conftest import ALL_ROOTS, GPU_ROOT
from tests.fixtures.make_roots import DGX_DEVICES, dgx_root

H200 = "NVIDIA H200 at 0000:00:06.0"


@pytest.fixture(scope="module")
def dgx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return dgx_root(tmp_path_factory.mktemp("dgx") / "root")


def findings(root: Root, cpus: str | None = None) -> dict[str, Finding]:
    ctx = AuditContext(root, parse_cpulist(cpus) if cpus else None)
    return {f.id: f for f in run_checks(ctx)}


def test_the_gpu_nodes_h200_its_vectors_threads_and_persistence() -> None:
    with open_root(str(GPU_ROOT)) as root:
        (gpu,) = read_devices(root)
        assert (gpu.name, gpu.kind, gpu.driver, gpu.msi_irqs) == (H200, "gpu", "nvidia", list(range(42, 50)))
        assert gpu.numa_node is None and gpu.local_cpus == frozenset(range(16))
        assert gpu.unknown == ["numa_node: -1 (no locality given: a VM's, or a one-node machine's)"]
        found = findings(root, "4-15")
    irq = found["irq.device"]
    assert irq.status == "warn"
    (line,) = [e.value for e in irq.evidence]
    assert line == (f"{H200}: 8 vectors, IRQs 42-49, on CPUs 0-5,14-15; 8 threaded handlers, "
                    "irq/42-nvidia ... irq/49-nvidia, on CPUs 0-5,14-15")  # fmt: skip
    assert [a.target for a in irq.actions if a.kind == "irq-affinity"] == [
        f"/proc/irq/{n}/smp_affinity" for n in range(42, 50)
    ]
    (where,) = [e.value for e in found["device.locality"].evidence]
    assert where == f"{H200}: NUMA node unknown, near CPUs 0-15 (targets 4-15, housekeeping 0-3)"
    assert found["gpu.persistence"].status == "ok"
    assert "0000:00:06.0: Enabled" in found["gpu.persistence"].evidence[0].value


def test_the_dgx_audit_names_every_gpu_and_hca_with_their_nodes_and_threads(dgx: Path) -> None:
    root = Root(dgx)
    found = read_devices(root)
    assert [(d.address, d.kind, d.numa_node) for d in found] == sorted(
        (a, "gpu" if k == "gpu" else "nic", n) for a, k, n in DGX_DEVICES
    )
    text = "\n".join(
        e.value
        for f in findings(root, "1-15,17-31,33-47,49-63").values()
        for e in f.evidence
        if f.id in ("irq.device", "device.locality")
    )
    for address, _, _ in DGX_DEVICES:
        assert address in text
    assert (
        "4 NVIDIA H100 80GB HBM3 at 0000:18:00.0, 0000:2a:00.0, 0000:3a:00.0, 0000:5d:00.0: NUMA node 0, near "
        "CPUs 0-15,32-47 (targets 1-15,33-47, housekeeping 0,32)"
    ) in text
    assert (
        "2 Mellanox InfiniBand (mlx5_core) at 0000:9b:00.0, 0000:bb:00.0: 8 vectors, IRQs 180-183,188-191, on CPU 16"
    ) in text
    assert "8 threaded handlers, irq/148-nvidia ... irq/173-nvidia, on CPU 16" in text


def test_the_dgx_plan_keeps_each_devices_irqs_and_threads_near_it(dgx: Path) -> None:
    plan = make_plan(Root(dgx), ranks_per_gpu=2)
    assert plan.housekeeping == frozenset({0, 16, 32, 48})  # a core on each NUMA node
    irqs = {i.knob: i for i in plan.runtime if i.knob.startswith("IRQ ")}
    for address, kind, node in DGX_DEVICES:
        mine = [i for k, i in irqs.items() if address in k]
        assert len(mine) == (2 if kind == "gpu" else 4)
        for i in mine:
            assert i.planned == ("0,32" if node == 0 else "16,48"), i
            assert i.action is not None and i.action.value == ("1,00000001" if node == 0 else "10000,00010000")
            assert ("with its thread irq/" in i.reason) == (kind == "gpu")
    # the threads follow their IRQs: not moved on their own
    assert not [i for i in plan.runtime if "irq/" in i.knob]
    ranks = plan.to_json()["ranks"]
    assert len(ranks) == 16 and ranks[0] == {"rank": 0, "gpu": 0, "device": "NVIDIA H100 80GB HBM3 at 0000:18:00.0",
                                             "numa_node": 0, "cpus": "1-2,33-34"}  # fmt: skip
    assert {r["numa_node"] for r in ranks if r["gpu"] >= 4} == {1}
    assert "--gpu-bind=closest" in plan.to_json()["launch"]["slurm"]
    refused = r"invalid --ranks-per-gpu 9: the 15 target cores near GPUs 0, 1, 2, 3 cannot give 36 ranks"
    with pytest.raises(UsageError, match=refused + r" a core each \(valid: 1-3\)"):
        make_plan(Root(dgx), ranks_per_gpu=9)


def test_a_node_without_devices_is_as_before() -> None:
    for path in ALL_ROOTS:
        root = Root(path)
        assert read_devices(root) == []
        facts = collect_facts(root)
        assert "devices" not in facts  # the fingerprint is what it was
        ids = set(findings(root))
        assert not ids & {"irq.device", "device.locality", "gpu.persistence"}
        assert not [n for n in make_plan(root).notes if "GPU" in n]
        with pytest.raises(UsageError, match="--ranks-per-gpu: this node has no GPU"):
            make_plan(root, ranks_per_gpu=1)


def test_the_fingerprint_holds_the_devices(dgx: Path) -> None:
    facts = collect_facts(Root(dgx))
    assert sorted(facts["devices"]) == sorted(a for a, _, _ in DGX_DEVICES)
    before = fingerprint(facts)
    (dgx / "sys/bus/pci/devices/0000:db:00.0").rename(dgx / "gone")  # a node that lost a GPU
    try:
        assert fingerprint(collect_facts(Root(dgx))) != before
    finally:
        (dgx / "gone").rename(dgx / "sys/bus/pci/devices/0000:db:00.0")


def test_missing_or_malformed_files_are_unknown_facts_not_errors(dgx: Path, tmp_path: Path) -> None:
    root = tmp_path / "r"
    dev = root / "sys/bus/pci/devices/0000:18:00.0"
    dev.mkdir(parents=True)
    (dev / "class").write_text("0x030200\n")
    (dev / "vendor").write_text("0x10de\n")
    (dev / "numa_node").write_text("zero\n")
    (dev / "local_cpulist").write_text("0-x\n")
    (root / "sys/bus/pci/devices/garbage").mkdir()
    (d,) = read_devices(Root(root))
    assert d.numa_node is None and d.local_cpus is None and d.driver is None and d.vectors == []
    assert [u.split(":")[0] for u in d.unknown] == ["device", "numa_node", "local_cpulist", "driver"]
    f = findings(Root(root))
    assert f["irq.device"].status == "unknown"
    assert "near CPUs unknown" in f["device.locality"].evidence[0].value


def test_a_snapshot_keeps_the_devices_and_the_drivers_name(dgx: Path, tmp_path: Path) -> None:
    out = tmp_path / "snap.tar.gz"
    snapshot.write(Root(dgx), out, force=False)
    with tarfile.open(out) as tar:
        link = tar.getmember("./sys/bus/pci/devices/0000:18:00.0/driver")
        assert link.issym() and link.linkname.endswith("/nvidia")
    with open_root(str(out)) as root:
        assert [(d.name, d.driver, d.numa_node, d.msi_irqs) for d in read_devices(root)] == [
            (d.name, d.driver, d.numa_node, d.msi_irqs) for d in read_devices(Root(dgx))
        ]


def test_an_irq_and_its_thread_are_named_by_their_device() -> None:
    t = Trace({1: CpuIntruders(1)}, set())
    t.cpus[1].use("irq", "irq 44 (nvidia)").ns = 5
    t.cpus[1].use("task", "irq/44-nvidia", 180).ns = 7
    t.cpus[1].use("task", "irq/50-virtio", 181).ns = 1
    t.slots = [Slot(0, 1, {"irq 44 (nvidia)": 3.0})]
    t.name_devices({44: H200})
    assert [u.name for u in t.cpus[1].uses.values()] == [f"irq 44 ({H200})", f"irq/44-nvidia ({H200})",
                                                         "irq/50-virtio"]  # fmt: skip
    assert t.slots[0].intruders == {f"irq 44 ({H200})": 3.0}
    assert json.dumps(t.to_json())  # still JSON


def test_the_node_table_lists_the_devices() -> None:
    from quietcore.report.builder import devices_cell

    with open_root(str(GPU_ROOT)) as root:
        facts = collect_facts(root)
    assert devices_cell(facts["devices"]) == f"{H200} (nvidia, NUMA node unknown)"
    assert os.path.basename(str(GPU_ROOT)) == "gpu-node-h200.tar.gz"


def test_persistence_is_on_where_the_daemon_runs_by_its_15_character_name(tmp_path: Path) -> None:
    """The kernel keeps a task's name to 15 characters: nvidia-persistenced is "nvidia-persiste" in
    /proc/PID/comm, and a root that runs it has persistence on, without asking nvidia-smi."""
    from quietcore.facts.devices import persistence
    from quietcore.facts.tasks import read_tasks
    from tests.fixtures.make_roots import Tree, task

    t = Tree.__new__(Tree)
    t.base = tmp_path / "root"
    task(t, 812, "nvidia-persiste", 0x400100, [0, 1])
    root = Root(t.base)
    assert persistence(root, read_tasks(root)) == (True, "nvidia-persistenced runs (pid 812)")
    assert persistence(Root(tmp_path), []) == (None, "no nvidia-persistenced task, and nvidia-smi's answer not "
                                                     "recorded")  # fmt: skip
