"""A process's own peak memory, for the benchmarks' memory targets.

getrusage's ru_maxrss (RUSAGE_SELF in a child, wait4's, RUSAGE_CHILDREN's)
counts the pages a child had before its exec, which are its parent's: a
`results show` under bench/manycpu.py read 98 MB, the bench's own. The
kernel's VmHWM (/proc/self/status) is the high-water mark of the memory
the process has had since its exec. So a command measured here writes its
own as it exits (`quietcore`), and a child the bench runs reads it itself
(`own_peak_mb`)."""

from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def own_peak_mb() -> float:
    """This process's peak resident memory since its exec (VmHWM), in MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("/proc/self/status has no VmHWM")


#: `python -c WRAP FILE ARGS`: `python -m quietcore ARGS`, which writes own_peak_mb to FILE as it exits.
WRAP = f"""
import atexit, runpy, sys
sys.path.insert(0, {str(HERE)!r})
from peak import own_peak_mb
del sys.path[0]
out = sys.argv.pop(1)
def written():
    with open(out, "w") as f:
        f.write(repr(own_peak_mb()))
atexit.register(written)
sys.argv[0] = "quietcore"
runpy.run_module("quietcore", run_name="__main__", alter_sys=True)
"""


def quietcore(env: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess[str], float, float, float]:
    """`python -m quietcore ARGS`: the process, its wall and CPU seconds, and its own peak memory in MiB
    (nan where it wrote none; its analysis workers have their own)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.NamedTemporaryFile(prefix="quietcore-peak-") as peak:
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", WRAP, peak.name, *args], env=env, capture_output=True,
                              text=True, check=False)  # fmt: skip
        wall = time.perf_counter() - t
        written = Path(peak.name).read_text().strip()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return proc, wall, cpu, float(written) if written else float("nan")
