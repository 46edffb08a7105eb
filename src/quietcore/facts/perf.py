"""Can this process count hardware events? Asked of the kernel directly with
perf_event_open(2) for retired instructions, user space only (so that
perf_event_paranoid=2 still allows it)."""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct

_SYSCALL = {"x86_64": 298, "aarch64": 241, "ppc64le": 319, "riscv64": 241}
PERF_TYPE_HARDWARE = 0
PERF_COUNT_HW_INSTRUCTIONS = 1
ATTR_SIZE_VER0 = 64  # the first published perf_event_attr size; every kernel takes it
DISABLED, EXCLUDE_KERNEL, EXCLUDE_HV = 1 << 0, 1 << 5, 1 << 6


def hardware_counters() -> tuple[bool | None, str]:
    """(True, how), (False, why not), or (None, why it cannot be asked)."""
    number = _SYSCALL.get(platform.machine())
    if number is None:
        return None, f"perf_event_open syscall number unknown on {platform.machine()}"
    attr = struct.pack(
        "IIQQQQQ", PERF_TYPE_HARDWARE, ATTR_SIZE_VER0, PERF_COUNT_HW_INSTRUCTIONS, 0, 0, 0,
        DISABLED | EXCLUDE_KERNEL | EXCLUDE_HV,
    ).ljust(ATTR_SIZE_VER0, b"\0")  # fmt: skip
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(attr, ATTR_SIZE_VER0)
    fd = libc.syscall(number, buf, 0, -1, -1, 0)
    if fd >= 0:
        os.close(fd)
        return True, "perf_event_open(PERF_COUNT_HW_INSTRUCTIONS) succeeded"
    err = ctypes.get_errno()
    if err in (errno.ENOENT, errno.EOPNOTSUPP, errno.ENODEV):
        return False, f"no hardware PMU is exposed, common in virtual machines; the kernel said {os.strerror(err)}"
    if err in (errno.EACCES, errno.EPERM):
        return False, f"not permitted, {os.strerror(err)}; lower /proc/sys/kernel/perf_event_paranoid or run as root"
    return False, f"perf_event_open failed: {os.strerror(err)}"
