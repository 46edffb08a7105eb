"""The probe's disturber as a benchmark's load: every CPU given woken every
period for a burst, so that a noise run there has that many more gaps
(bench/memory.py's busy runs, bench/manycpu.py's run at issue 33's rate)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def disturbed(cpus: str, seconds: float, period_us: int, burst_us: int) -> Iterator[None]:
    """`quietcore-probe disturb` on `cpus` (a CPU list) for the block, at most `seconds`: started and running
    (it says so on stderr) before the block, killed after it."""
    from quietcore.probes.runner import probe_path

    argv = [str(probe_path()), "disturb", "--cpus", cpus, "--period-us", str(period_us), "--burst-us", str(burst_us),
            "--duration", f"{seconds:g}"]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        told = proc.stderr.readline()
        if "running" not in told:
            sys.exit(f"the probe's disturber did not start: {told.strip() or proc.wait()}")
        yield
    finally:
        proc.kill()
        proc.wait()
