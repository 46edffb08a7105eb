"""`tune apply`'s table: a row a knob, a node's many IRQs alike in one row."""

from __future__ import annotations

from quietcore.actions import Action
from quietcore.commands.tune import _outcome_rows
from quietcore.tune.state import Outcome


def _irq(n: int, result: str = "set", device: str = "Mellanox ConnectX-7 at 0000:3b:00.0") -> tuple[Action, Outcome]:
    action = Action("irq-affinity", f"/proc/irq/{n}/smp_affinity", "1", fixes="irq.affinity",
                    note=f"IRQ {n} ({device})")  # fmt: skip
    return action, Outcome(action.note, "0-383", "0", result)


def test_a_devices_vectors_alike_are_one_row_as_in_the_plan() -> None:
    """A node of 384 CPUs has hundreds of device vectors: apply's table was a row each, where the plan's
    is a row a device. IRQs of their own name (virtio's) stay a row each, as in the plan."""
    cpuset = Action("sysfs", "/sys/devices/virtual/workqueue/cpumask", "1", fixes="kthread.placement")
    pairs = [_irq(n) for n in range(100, 484)] + [_irq(484, "refused: EIO"), _irq(485, "refused: EIO")]
    pairs.insert(3, (cpuset, Outcome("workqueue cpumask", "0-383", "0", "set")))
    pairs += [_irq(n, device=f"virtio{n}-input") for n in (24, 25)]
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

    def thread(pid: int, kind: str, result: str = "set") -> tuple[Action, Outcome]:
        knob = f"{kind} {pid} (comm{pid})"
        action = Action("cpuset-task", f"/proc/{pid}/task/{pid}", "/sys/fs/cgroup/cpuset/quietcore-housekeeping 0",
                        fixes="task.placement", note=knob)  # fmt: skip
        return action, Outcome(knob, "/sys/fs/cgroup/cpuset 0-1", action.value, result)

    pairs = [thread(p, "kthread" if p < 30 else "task") for p in range(2, 44)]
    pairs.append(thread(2000, "kthread", "refused: Invalid argument (EINVAL)"))
    rows = _outcome_rows([a for a, _ in pairs], [o for _, o in pairs])
    now = "/sys/fs/cgroup/cpuset/quietcore-housekeeping 0"
    assert rows == [
        ("42 threads (28 kthreads)", "/sys/fs/cgroup/cpuset 0-1", now, "set"),
        ("kthread 2000 (comm2000)", "/sys/fs/cgroup/cpuset 0-1", now, "refused: Invalid argument (EINVAL)"),
    ]
