"""`tune apply`'s table: a row a knob, a node's many IRQs alike in one row."""

from __future__ import annotations

import json
from pathlib import Path

from quietcore.actions import Action
from quietcore.commands.tune import _outcome_rows
from quietcore.tune.plan import Item
from quietcore.tune.state import Outcome


def _irq(n: int, result: str = "set", device: str | None = "Mellanox ConnectX-7 at 0000:3b:00.0",
         name: str | None = None) -> tuple[Item, Outcome]:  # fmt: skip
    """A planned IRQ as the plan makes it: a PCI device's with the device and its number, else by its name."""
    knob = f"IRQ {n} ({device or name})"
    action = Action("irq-affinity", f"/proc/irq/{n}/smp_affinity", "1", fixes="irq.affinity", note=knob)
    item = Item(knob, "0-383", "0", "device IRQ off the targets", action, device=device, irq=n if device else None)
    return item, Outcome(knob, "0-383", "0", result)


def _item(action: Action, knob: str) -> Item:
    return Item(knob, None, action.value, "", action)


def test_a_devices_vectors_alike_are_one_row_as_in_the_plan() -> None:
    """A node of 384 CPUs has hundreds of device vectors: apply's table was a row each, where the plan's
    is a row a device. IRQs of their own name (virtio's) stay a row each, as in the plan."""
    cpuset = Action("sysfs", "/sys/devices/virtual/workqueue/cpumask", "1", fixes="kthread.placement")
    pairs = [_irq(n) for n in range(100, 484)] + [_irq(484, "refused: EIO"), _irq(485, "refused: EIO")]
    pairs.insert(3, (_item(cpuset, "workqueue cpumask"), Outcome("workqueue cpumask", "0-383", "0", "set")))
    pairs += [_irq(n, device=None, name=f"virtio{n}-input") for n in (24, 25)]
    rows = _outcome_rows([a for a, _ in pairs], [o for _, o in pairs])
    assert rows == [
        ("IRQs 100-483 (Mellanox ConnectX-7 at 0000:3b:00.0)", "0-383", "0", "set"),
        ("workqueue cpumask", "0-383", "0", "set"),
        ("IRQs 484-485 (Mellanox ConnectX-7 at 0000:3b:00.0)", "0-383", "0", "refused: EIO"),
        ("IRQ 24 (virtio24-input)", "0-383", "0", "set"),
        ("IRQ 25 (virtio25-input)", "0-383", "0", "set"),
    ]


def test_tasks_and_kthreads_alike_are_one_row_as_in_the_plan() -> None:
    """The plan says "42 threads (21 kthreads)"; apply said a row a thread. Refusals stay apart, each
    with its thread while it is one."""

    def thread(pid: int, kind: str, result: str = "set") -> tuple[Item, Outcome]:
        knob = f"{kind} {pid} (comm{pid})"
        action = Action("cpuset-task", f"/proc/{pid}/task/{pid}", "/sys/fs/cgroup/cpuset/quietcore-housekeeping 0",
                        fixes="task.placement", note=knob)  # fmt: skip
        return _item(action, knob), Outcome(knob, "/sys/fs/cgroup/cpuset 0-1", action.value, result)

    pairs = [thread(p, "kthread" if p < 30 else "task") for p in range(2, 44)]
    pairs.append(thread(2000, "kthread", "refused: Invalid argument (EINVAL)"))
    rows = _outcome_rows([a for a, _ in pairs], [o for _, o in pairs])
    now = "/sys/fs/cgroup/cpuset/quietcore-housekeeping 0"
    assert rows == [
        ("42 threads (28 kthreads)", "/sys/fs/cgroup/cpuset 0-1", now, "set"),
        ("kthread 2000 (comm2000)", "/sys/fs/cgroup/cpuset 0-1", now, "refused: Invalid argument (EINVAL)"),
    ]


def test_a_saved_plan_keeps_its_irqs_devices_for_apply(tmp_path: Path) -> None:
    """`tune apply --plan FILE` said a row a vector: the saved plan's items lost their device."""
    from quietcore.commands.tune import _load
    from quietcore.tune.plan import Plan

    items = [_irq(n)[0] for n in (42, 43)] + [_irq(26, device=None, name="ttyS0")[0]]
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(Plan(frozenset({0}), frozenset({1}), "throughput", [], items).to_json()))
    loaded = _load(str(path)).runtime
    nic = "Mellanox ConnectX-7 at 0000:3b:00.0"
    assert [(i.device, i.irq) for i in loaded] == [(nic, 42), (nic, 43), (None, None)]
    rows = _outcome_rows(loaded, [Outcome(i.knob, "0-383", "0", "set") for i in loaded])
    assert rows[0] == ("IRQs 42-43 (Mellanox ConnectX-7 at 0000:3b:00.0)", "0-383", "0", "set")
