"""/proc/stat per-CPU times (Documentation/filesystems/proc.rst, 1.7).

Columns after "cpuN": user nice system idle iowait irq softirq steal guest
guest_nice, in USER_HZ ticks. Steal is time the hypervisor ran something
else while this vCPU wanted to run: the host's noise, seen from inside."""

from __future__ import annotations

from dataclasses import dataclass

FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest", "guest_nice")


@dataclass(frozen=True)
class CpuTimes:
    cpu: int
    ticks: dict[str, int]


def parse_proc_stat(text: str) -> dict[int, CpuTimes]:
    """Per-CPU tick counters keyed by CPU number (the "cpu" total is left out)."""
    result: dict[int, CpuTimes] = {}
    for line in text.splitlines():
        parts = line.split()
        if not parts or not parts[0].startswith("cpu") or parts[0] == "cpu":
            continue
        try:
            cpu = int(parts[0][3:])
            values = [int(v) for v in parts[1:]]
        except ValueError:
            continue
        result[cpu] = CpuTimes(cpu, dict(zip(FIELDS, values, strict=False)))
    return result


def steal_delta_ns(before: dict[int, CpuTimes], after: dict[int, CpuTimes], user_hz: int) -> dict[int, float]:
    """Steal time per CPU between two readings, in ns."""
    out: dict[int, float] = {}
    for cpu, later in after.items():
        earlier = before.get(cpu)
        if earlier is None or "steal" not in later.ticks or "steal" not in earlier.ticks:
            continue
        out[cpu] = (later.ticks["steal"] - earlier.ticks["steal"]) * 1e9 / user_hz
    return out
