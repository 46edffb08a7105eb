"""Kernel identity and build options: release, version string, preemption
model, and the options that decide noise, from /proc/config.gz or
/boot/config-RELEASE."""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

from quietcore.facts.root import Root

#: Options that decide how noisy a CPU can be made.
NOISE_OPTIONS = (
    "CONFIG_HZ",
    "CONFIG_NO_HZ_FULL",
    "CONFIG_NO_HZ_IDLE",
    "CONFIG_RCU_NOCB_CPU",
    "CONFIG_PREEMPT_NONE",
    "CONFIG_PREEMPT_VOLUNTARY",
    "CONFIG_PREEMPT",
    "CONFIG_PREEMPT_LAZY",
    "CONFIG_PREEMPT_RT",
    "CONFIG_PREEMPT_DYNAMIC",
    "CONFIG_TRANSPARENT_HUGEPAGE",
    "CONFIG_OSNOISE_TRACER",
)


@dataclass(frozen=True)
class KernelIdentity:
    release: str | None
    version: str | None
    machine: str | None


def gunzip_bounded(packed: bytes, limit: int = 16 << 20) -> bytes:
    """gzip.decompress, but never more than `limit` bytes out (a kernel
    config is ~300 KB): a gzip bomb in a snapshot raises OSError."""
    stream = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    out = stream.decompress(packed, limit)
    if stream.unconsumed_tail:
        raise OSError(f"config.gz unpacks to more than {limit >> 20} MiB")
    return out


def parse_kernel_config(text: str) -> dict[str, str]:
    """CONFIG_X=value lines; "is not set" lines become "n"."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        unset = re.fullmatch(r"# (CONFIG_\w+) is not set", line)
        if unset:
            out[unset.group(1)] = "n"
        elif line.startswith("CONFIG_") and "=" in line:
            key, _, value = line.partition("=")
            out[key] = value.strip('"')
    return out


def read_identity(root: Root) -> KernelIdentity:
    release = root.read_line("proc/sys/kernel/osrelease")
    version = root.read_line("proc/sys/kernel/version")
    machine = None
    arch = root.read_line("proc/sys/kernel/arch")
    if arch:
        machine = arch
    return KernelIdentity(release=release, version=version, machine=machine)


def read_config(root: Root, release: str | None) -> tuple[dict[str, str], str | None]:
    """The kernel config and where it came from, or ({}, None)."""
    packed = root.read_bytes("proc/config.gz")
    if packed is not None:
        try:
            return parse_kernel_config(gunzip_bounded(packed).decode("utf-8", "replace")), "/proc/config.gz"
        except (OSError, EOFError, zlib.error):
            pass
    if release:
        text = root.read_text(f"boot/config-{release}")
        if text is not None:
            return parse_kernel_config(text), f"/boot/config-{release}"
    return {}, None


def preempt_from_version(version: str | None) -> str | None:
    """What `uname -v` says: PREEMPT_RT, PREEMPT_DYNAMIC, PREEMPT, or None."""
    if not version:
        return None
    for token in ("PREEMPT_RT", "PREEMPT_DYNAMIC", "PREEMPT_LAZY", "PREEMPT"):
        if re.search(rf"\b{token}\b", version):
            return token
    return None


def preempt_dynamic_mode(root: Root) -> str | None:
    """The active model on PREEMPT_DYNAMIC kernels: the word in parentheses in
    /sys/kernel/debug/sched/preempt (root-only, needs debugfs)."""
    text = root.read_line("sys/kernel/debug/sched/preempt")
    match = re.search(r"\((\w+)\)", text or "")
    return match.group(1) if match else None
