"""Snapshots: every file quietcore reads, copied from a root into a directory
or a .tar.gz that --root accepts. A manifest records what could not be read,
and why, so an audit of the snapshot can say "needs root" rather than
"missing"."""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import socket
import subprocess
import tarfile
import tempfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from quietcore import inputs, outputs
from quietcore._version import __version__
from quietcore.errors import UsageError
from quietcore.facts.perf import hardware_counters
from quietcore.facts.root import MAX_FILE, Root
from quietcore.safe import write_atomic

MANIFEST = "quietcore-snapshot.json"

#: Glob patterns relative to the root. Per-task files are read for task and
#: kernel-thread placement; /proc/PID/task/* is left out (size).
PATTERNS = (
    "proc/cpuinfo", "proc/stat", "proc/interrupts", "proc/softirqs", "proc/cmdline", "proc/config.gz",
    "proc/swaps", "proc/meminfo", "proc/version", "proc/vmstat",
    "proc/sys/kernel/osrelease", "proc/sys/kernel/version", "proc/sys/kernel/arch",
    "proc/sys/kernel/sched_rt_runtime_us", "proc/sys/kernel/sched_rt_period_us", "proc/sys/kernel/numa_balancing",
    "proc/sys/kernel/perf_event_paranoid", "proc/sys/kernel/nmi_watchdog", "proc/sys/kernel/watchdog_cpumask",
    "proc/sys/kernel/timer_migration", "proc/sys/vm/stat_interval", "proc/sys/vm/swappiness",
    "proc/irq/default_smp_affinity", "proc/irq/*/smp_affinity", "proc/irq/*/smp_affinity_list",
    "proc/irq/*/effective_affinity", "proc/irq/*/effective_affinity_list", "proc/irq/*/node",
    "proc/[0-9]*/stat", "proc/[0-9]*/status", "proc/[0-9]*/comm",
    "sys/devices/system/cpu/online", "sys/devices/system/cpu/possible", "sys/devices/system/cpu/present",
    "sys/devices/system/cpu/offline", "sys/devices/system/cpu/isolated", "sys/devices/system/cpu/nohz_full",
    "sys/devices/system/cpu/kernel_max", "sys/devices/system/cpu/smt/control", "sys/devices/system/cpu/smt/active",
    "sys/devices/system/cpu/cpu[0-9]*/topology/*", "sys/devices/system/cpu/cpu[0-9]*/cache/index[0-9]*/level",
    "sys/devices/system/cpu/cpu[0-9]*/cache/index[0-9]*/shared_cpu_list",
    "sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_*",
    "sys/devices/system/cpu/cpu[0-9]*/cpufreq/cpuinfo_*", "sys/devices/system/cpu/cpufreq/boost",
    "sys/devices/system/cpu/intel_pstate/*", "sys/devices/system/cpu/cpuidle/current_*",
    "sys/devices/system/cpu/cpu[0-9]*/cpuidle/state*/name", "sys/devices/system/cpu/cpu[0-9]*/cpuidle/state*/desc",
    "sys/devices/system/cpu/cpu[0-9]*/cpuidle/state*/latency",
    "sys/devices/system/cpu/cpu[0-9]*/cpuidle/state*/residency",
    "sys/devices/system/cpu/cpu[0-9]*/cpuidle/state*/disable", "sys/devices/system/cpu/vulnerabilities/*",
    "sys/devices/cpu_core/cpus", "sys/devices/cpu_atom/cpus",
    "sys/devices/system/node/online", "sys/devices/system/node/possible",
    "sys/devices/system/node/node[0-9]*/cpulist", "sys/devices/system/node/node[0-9]*/distance",
    "sys/devices/system/clocksource/clocksource0/current_clocksource",
    "sys/devices/system/clocksource/clocksource0/available_clocksource",
    "sys/kernel/mm/transparent_hugepage/enabled", "sys/kernel/mm/transparent_hugepage/defrag",
    "sys/kernel/mm/transparent_hugepage/khugepaged/defrag", "sys/devices/virtual/workqueue/cpumask",
    "sys/class/dmi/id/sys_vendor", "sys/class/dmi/id/product_name", "sys/class/dmi/id/product_version",
    "sys/class/dmi/id/board_vendor", "sys/class/dmi/id/bios_vendor", "sys/hypervisor/type",
    "sys/kernel/debug/sched/preempt", "sys/kernel/tracing/available_tracers",
    "sys/bus/event_source/devices/*/type",
    "etc/default/irqbalance", "etc/sysconfig/irqbalance", ".dockerenv", "run/.containerenv",
    # PCI devices (facts.devices): what each is, where it sits, its vectors; NVIDIA's model names
    "sys/bus/pci/devices/*/class", "sys/bus/pci/devices/*/vendor", "sys/bus/pci/devices/*/device",
    "sys/bus/pci/devices/*/numa_node", "sys/bus/pci/devices/*/local_cpulist", "sys/bus/pci/devices/*/irq",
    "sys/bus/pci/devices/*/msi_irqs/*", "proc/driver/nvidia/version", "proc/driver/nvidia/gpus/*/information",
)  # fmt: skip
#: Links kept as links (their target's name is the fact: a device's bound driver), never followed.
LINKS = ("sys/bus/pci/devices/*/driver",)
#: Directories whose entries matter even when empty (/proc/irq/N lists actions).
LISTINGS = ("proc/irq/[0-9]*",)


def _expand(root: Root) -> Iterator[str]:
    base = str(root.path)
    release = root.read_line("proc/sys/kernel/osrelease")
    patterns = [*PATTERNS, f"boot/config-{release}"] if release else list(PATTERNS)
    for pattern in patterns:
        for path in sorted(glob.glob(os.path.join(base, pattern))):
            yield os.path.relpath(path, base)


def take(root: Root, dest: Path, journal: list[dict[str, object]] | None = None) -> dict[str, Any]:
    """Copy the files into dest (a new directory); returns the manifest.
    `journal`: quietcore's own changes still in force, for the audit."""
    copied, unreadable = 0, {}
    for rel in _expand(root):
        text, why = root.read(rel) if not rel.endswith(".gz") else (None, None)
        data = text.encode() if text is not None else root.read_bytes(rel)
        if data is None:
            unreadable["/" + rel] = why or "unreadable"
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        copied += 1
    for pattern in LINKS:
        for path in sorted(glob.glob(os.path.join(str(root.path), pattern))):
            rel = os.path.relpath(path, str(root.path))
            try:
                link = os.readlink(path)
            except OSError:
                continue
            # only its name is kept: a link to nowhere in the snapshot, which facts.devices reads as a link
            name = link.rstrip("/").rsplit("/", 1)[-1]
            if not re.fullmatch(r"[A-Za-z0-9_.\-]{1,64}", name) or name in (".", ".."):
                continue
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            os.symlink(f"../../../../bus/pci/drivers/{name}", dest / rel)
    for pattern in LISTINGS:
        for path in glob.glob(os.path.join(str(root.path), pattern)):
            rel = os.path.relpath(path, str(root.path))
            for name in root.listdir(rel):
                if root.resolve(f"{rel}/{name}").is_dir():
                    (dest / rel / name).mkdir(parents=True, exist_ok=True)
    manifest = {
        "format": "quietcore-snapshot",
        "format_version": 1,
        "tool_version": __version__,
        "host": socket.gethostname(),
        "root": str(root.path),
        "uid": os.geteuid(),
        "files": copied,
        "unreadable": unreadable,
    }
    if root.is_live:
        # What can only be asked of the running kernel, asked now.
        works, how = hardware_counters()
        live: dict[str, Any] = {"hardware_counters": {"works": works, "how": how}}
        smi = nvidia_persistence()
        if smi:
            live["nvidia_smi"] = {"persistence": smi}
        manifest["live"] = live
    if journal is not None:
        manifest["journal"] = journal
    (dest / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest


def nvidia_persistence() -> dict[str, str]:
    """Each GPU's persistence mode, as nvidia-smi says it: optional evidence
    (the facts read no command's output), kept with a snapshot as it is taken,
    since no kernel file says it. Empty without nvidia-smi or on any failure."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return {}
    try:
        out = subprocess.run([smi, "--query-gpu=pci.bus_id,persistence_mode", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10, check=True).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return {}
    modes = {}
    for line in out.splitlines()[:64]:
        bus, _, mode = line.partition(",")
        bus = bus.strip().lower()[-12:]  # nvidia-smi gives 00000000:00:06.0
        if re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", bus) and mode.strip() in ("Enabled", "Disabled"):
            modes[bus] = mode.strip()
    return modes


def write(root: Root, out: Path, force: bool, journal: list[dict[str, object]] | None = None) -> dict[str, Any]:
    """A snapshot at `out`: a directory, or a .tar.gz when the name says so."""
    if out.exists() and not force:
        raise UsageError(f"{out} exists, will not overwrite without --force")
    if os.path.lexists(out) and out.is_dir() and not out.is_symlink():
        out = outputs.directory(out, "--out", make=False)  # to be replaced: as root, root's
    else:
        out = outputs.file(out, "--out")  # as root: through root's directories, a file of root's if any
    # Staged beside `out`, so that the last step is one rename: a reader never sees half a snapshot.
    with tempfile.TemporaryDirectory(prefix=".quietcore-snapshot-", dir=out.parent) as tmp:
        staged = Path(tmp) / "root"
        manifest = take(root, staged, journal)
        if out.name.endswith((".tar.gz", ".tgz")):
            packed = Path(tmp) / "snapshot.tar.gz"
            with tarfile.open(packed, "w:gz") as tar:
                tar.add(staged, arcname=".")
            write_atomic(out, packed.read_bytes())  # over a file only with --force: a new one, then a rename
        else:
            if out.is_dir() and not out.is_symlink():
                if not (out / MANIFEST).is_file():  # --force replaces a snapshot, never someone's directory
                    raise UsageError(f"invalid --out {out}: not a snapshot quietcore wrote (no {MANIFEST} in it)")
                shutil.rmtree(out)
            elif out.exists() or out.is_symlink():
                out.unlink()
            staged.chmod(0o755)
            staged.rename(out)
    return manifest


@contextmanager
def open_root(path: str) -> Iterator[Root]:
    """A --root argument as a Root: a directory, or a .tar.gz snapshot
    unpacked for the duration. Refuses what does not look like a root."""
    p = Path(path)
    if not p.is_dir():
        # a snapshot is gzip's (`snapshot` writes .tar.gz): told by its first two bytes, where tarfile.is_tarfile
        # took 10 s to call 64 MB of NUL bytes a tarball
        with os.fdopen(inputs.open_regular(p, "invalid --root", SNAPSHOT), "rb") as packed:
            if os.fstat(packed.fileno()).st_size > SNAPSHOT.max_bytes:
                raise UsageError(f"invalid --root {path}: over the {SNAPSHOT.max_bytes >> 30} GiB a snapshot may be")
            if packed.read(2) != b"\x1f\x8b":
                raise UsageError(f"invalid --root {path}: not a directory or a .tar.gz snapshot")
            packed.seek(0)
            with tempfile.TemporaryDirectory(prefix="quietcore-root-") as tmp:
                try:
                    with tarfile.open(fileobj=packed, mode="r:gz") as tar:
                        _extract(tar, tmp)
                except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
                    raise UsageError(f"invalid --root {path}: cannot unpack ({exc})") from exc
                yield _checked(Path(tmp), path)
        return
    yield _checked(p, path)


SNAPSHOT = inputs.Kind("a snapshot", 1 << 30, valid="a directory or a .tar.gz from `quietcore snapshot`")
MAX_MEMBERS = 200_000  # a snapshot of a 512-CPU node holds about 60,000
MAX_UNPACKED = 1 << 30


def _bounded(tar: tarfile.TarFile) -> None:
    """Walk the members' headers first, stopping at the first bound crossed:
    too many members, one larger than a file quietcore reads, or too much
    in all (a tarball that unpacks without end)."""
    total = 0
    for count, member in enumerate(tar, start=1):
        total += member.size
        if count > MAX_MEMBERS:
            raise tarfile.TarError(f"more than {MAX_MEMBERS:,} members")
        if member.size > MAX_FILE:
            raise tarfile.TarError(f"member {member.name!r} is larger than {MAX_FILE >> 20} MiB")
        if total > MAX_UNPACKED:
            raise tarfile.TarError(f"it unpacks to more than {MAX_UNPACKED >> 30} GiB")


def _extract(tar: tarfile.TarFile, dest: str) -> None:
    """Unpack regular files and directories only, inside dest: a snapshot from
    another machine is untrusted input."""
    _bounded(tar)
    if hasattr(tarfile, "data_filter"):
        tar.extractall(dest, filter="data")
        return
    for member in tar.getmembers():  # Pythons without extraction filters
        target = os.path.realpath(os.path.join(dest, member.name))
        if not target.startswith(os.path.realpath(dest)) or not (member.isfile() or member.isdir()):
            raise tarfile.TarError(f"refusing member {member.name!r}")
        tar.extract(member, dest)


def _checked(p: Path, shown: str) -> Root:
    if not (p / "proc").is_dir() and not (p / "sys").is_dir():
        raise UsageError(f"invalid --root {shown}: no proc/ or sys/ in it (expected a filesystem root or a snapshot)")
    return Root(p)
