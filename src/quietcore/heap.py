"""The heap quietcore's own process keeps.

glibc serves an allocation over its mmap threshold (128 kB at first, raised
as such blocks are freed) from a fresh mapping, and gives it back on free;
the next one's pages fault in again, zeroed by the kernel. The analysis
makes many such arrays a CPU (a spectrum of 600,000 bins, the fits' arrays
over 30,000-80,000 gaps): `results analyse` of a 384-CPU x 30 s replay of
this VM's noise (bench/manycpu.py's, 1,024 events a CPU-second) spent
2.6-2.7 s of its 11.3-12.6 s of CPU in the kernel so; with freed memory kept
for reuse, 0.7 s of 9.7-10.1, at the same peak memory (330 MB).
"""

from __future__ import annotations

import ctypes

# mallopt's parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

#: Blocks up to this size come from the heap: glibc's own ceiling for the threshold (32 MiB on 64-bit).
MMAP_THRESHOLD = 32 << 20
#: Free memory at the heap's top past this is given back to the kernel: a CPU's arrays are reused, and a
#: process that shrinks by more still shrinks.
TRIM_THRESHOLD = 256 << 20


def keep_freed_memory() -> bool:
    """Have malloc keep freed blocks of up to MMAP_THRESHOLD for reuse, in
    this process and those it forks after. True where the C library took
    it (glibc's mallopt); a C library without it (musl) is left as it is."""
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
