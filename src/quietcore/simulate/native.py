"""The simulator's kernel in the native core (`quietcore-probe simulate`):
the same max-plus replay as engine.run, exact, at about a hundred times its
speed (bench/simulate.py measures both). Timelines and ranks go to the probe
as one binary file, laid out as native/simulate.c reads it."""

from __future__ import annotations

import os
import struct
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from quietcore.probes.runner import run_probe
from quietcore.simulate.engine import COLLECTIVES, Network, Timeline

MAGIC = b"QCSIM001"
#: Rank-iterations a second the kernel does at the least here (for its watchdog, not a promise).
SLOWEST_RATE = 2e7


def write_input(path: Path, timelines: list[Timeline], assign: np.ndarray, offsets: np.ndarray) -> None:
    """The probe's input: header, each timeline's period and (start, length)
    pairs, then each rank's timeline and offset."""
    with open(path, "wb") as out:
        out.write(MAGIC + struct.pack("<QQ", len(timelines), assign.size))
        for tl in timelines:
            out.write(struct.pack("<dQ", tl.period, tl.starts.size))
            out.write(np.column_stack([tl.starts, tl.lengths]).astype("<f8").tobytes())
        out.write(np.asarray(assign, dtype="<i4").tobytes())
        out.write(np.asarray(offsets, dtype="<f8").tobytes())


def replay(timelines: list[Timeline], assign: np.ndarray, offsets: np.ndarray, work_ns: float, iterations: int,
           collective: str = "allreduce", network: Network | None = None,
           threads: int | None = None) -> dict[str, Any]:  # fmt: skip
    """engine.run in the native core: the job's result (slowdown, runtime,
    the share of iterations some rank was delayed in, its own speed)."""

    if collective not in COLLECTIVES:
        raise ValueError(f"unknown collective {collective!r}")
    cost = (network or Network()).rounds(assign.size, collective)
    fd, name = tempfile.mkstemp(prefix="quietcore-simulate-", suffix=".bin")
    os.close(fd)
    try:
        write_input(Path(name), timelines, assign, offsets)
        args = ["--input", name, "--work-ns", repr(float(work_ns)), "--iterations", str(iterations),
                "--collective", collective, "--cost-ns", repr(float(cost))]  # fmt: skip
        if threads:
            args += ["--threads", str(threads)]
        expected = assign.size * iterations / SLOWEST_RATE
        return run_probe("simulate", args, expected_s=expected).result
    finally:
        os.unlink(name)
