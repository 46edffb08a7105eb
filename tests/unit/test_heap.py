"""quietcore.heap: freed arrays are kept for reuse, not faulted in afresh."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

# 200 arrays of 4 MB made and dropped in turn, as a CPU's analysis makes its spectra and fits' arrays: the minor
# page faults they cost (zeroed pages from the kernel), read from getrusage.
FAULTS = """
import resource, sys
import numpy as np
if sys.argv[1] == "kept":
    from quietcore.heap import keep_freed_memory
    assert keep_freed_memory()
np.ones(1 << 19).sum()  # numpy's own start, out of the count
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(200):
    np.ones(1 << 19).sum()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def faults(mode: str) -> int:
    proc = subprocess.run([sys.executable, "-c", FAULTS, mode], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout)


def test_arrays_made_and_dropped_fault_in_once_not_each_time() -> None:
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("mallopt is glibc's")
    # glibc's default raises its mmap threshold once such a block is freed, so the arrays after the first
    # come from the heap; but the heap's top is trimmed back to the kernel on each free, and faults in again
    # (here 500 faults: 2 MB huge pages; 4 kB pages would be 1,024 an array).
    default, kept = faults("default"), faults("kept")
    assert default >= 200 and kept * 10 < default, (kept, default)
