"""The node fingerprint: the facts that decide how noisy a CPU is, and a hash
of them, so results from differently configured nodes (or the same node
before and after a reboot with new boot parameters) are never mixed up."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from quietcore.facts import cpus, devices, kernel, virt
from quietcore.facts.cmdline import parse_cmdline
from quietcore.facts.cpulist import format_cpulist
from quietcore.facts.root import Root

#: Boot parameters that change noise; they go into the fingerprint verbatim.
NOISE_PARAMS = (
    "isolcpus",
    "nohz_full",
    "nohz",
    "rcu_nocbs",
    "rcu_nocb_poll",
    "irqaffinity",
    "preempt",
    "nosmt",
    "idle",
    "intel_idle.max_cstate",
    "processor.max_cstate",
    "intel_pstate",
    "transparent_hugepage",
    "skew_tick",
    "tsc",
    "clocksource",
    "mitigations",
    "threadirqs",
    "housekeeping",
)


def collect_facts(root: Root) -> dict[str, Any]:
    """Everything the fingerprint covers, as plain JSON-able values."""
    ident = kernel.read_identity(root)
    config, config_source = kernel.read_config(root, ident.release)
    cmdline = parse_cmdline(root.read_text("proc/cmdline") or "")
    info = cpus.parse_cpuinfo(root.read_text("proc/cpuinfo") or "")
    online = cpus.online_cpus(root)
    v = virt.detect(root)
    thp = "sys/kernel/mm/transparent_hugepage"
    return {
        "kernel": {
            "release": ident.release,
            "version": ident.version,
            "preempt_build": kernel.preempt_from_version(ident.version),
            "preempt_dynamic": kernel.preempt_dynamic_mode(root),
            "config_source": config_source,
            "config": {k: config[k] for k in kernel.NOISE_OPTIONS if k in config},
        },
        "cmdline": cmdline.raw,
        "boot_params": {p: cmdline.get(p) for p in NOISE_PARAMS if cmdline.has(p)},
        "cpu": {
            "model": info.model,
            "vendor": info.vendor,
            "online": format_cpulist(online),
            "count": len(online),
            "smt": cpus.smt_state(root),
            "isolated": format_cpulist(cpus.isolated_cpus(root)),
            "nohz_full": format_cpulist(cpus.nohz_full_cpus(root)),
            "numa_nodes": format_cpulist(cpus.numa_nodes(root)),
            "governors": sorted(set(cpus.governors(root, online).values())),
        },
        "virtualization": {
            "virtualized": v.virtualized,
            "hypervisor": v.hypervisor,
            "container": v.container,
            "evidence": list(v.evidence),
        },
        "clocksource": root.read_line("sys/devices/system/clocksource/clocksource0/current_clocksource"),
        "thp": {
            "enabled": selected(root.read_line(f"{thp}/enabled")),
            "defrag": selected(root.read_line(f"{thp}/defrag")),
        },
    } | _devices(root)


def _devices(root: Root) -> dict[str, Any]:
    """The GPUs and NICs, by address (devices.fingerprint_part): no key at all on
    a node without them, whose fingerprint stays what it was before devices were read."""
    found = devices.fingerprint_part(devices.read_devices(root))
    return {"devices": {d.pop("address"): d for d in found}} if found else {}


def selected(text: str | None) -> str | None:
    """The chosen word of a selector file: bracketed in sysfs ("always
    [madvise] never"), in parentheses in debugfs's preemption model ("none
    voluntary (full) lazy")."""
    if text is None:
        return None
    for left, right in ("[]", "()"):
        start, end = text.find(left), text.find(right)
        if 0 <= start < end:
            return text[start + 1 : end]
    return text


def fingerprint(facts: dict[str, Any]) -> str:
    """A short stable hash of the facts, leaving out evidence that drifts
    while the configuration stays the same (steal counters, DMI wording)."""
    stable = json.loads(json.dumps(facts))
    stable["virtualization"].pop("evidence", None)
    digest = hashlib.sha256(json.dumps(stable, sort_keys=True).encode()).hexdigest()
    return digest[:16]


#: Facts that change while the configuration does not (the fingerprint leaves them out too).
DRIFTING = ("virtualization.evidence",)


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested facts as dotted names: {"thp": {"enabled": "never"}} -> {"thp.enabled": "never"}."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out |= flatten(item, f"{prefix}{key}.")
        return out
    return {prefix.rstrip("."): value}


def changed(a: dict[str, Any], b: dict[str, Any], common_only: bool = False) -> list[tuple[str, Any, Any]]:
    """The facts that differ between two nodes (or one node then and now), by dotted
    name, with both values; `common_only`: only those both name."""
    fa, fb = flatten(a), flatten(b)
    keys = sorted(set(fa) & set(fb) if common_only else set(fa) | set(fb))
    return [(k, fa.get(k), fb.get(k)) for k in keys
            if fa.get(k) != fb.get(k) and not any(k == d or k.startswith(d + ".") for d in DRIFTING)]  # fmt: skip
