"""The simulator's kernel in the native core (`quietcore-probe simulate`):
the same max-plus replays as engine.run (the fast model) and rounds.run
(the round model), exact, at about a hundred times their speed
(bench/simulate.py measures them). Timelines and ranks go to the probe
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
from quietcore.simulate.rounds import rounds

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
           collective: str = "allreduce", network: Network | None = None, threads: int | None = None,
           algorithm: str | None = None, charge: str = "stretch") -> dict[str, Any]:  # fmt: skip
    """The job in the native core: with an algorithm, the round model
    (rounds.run's); without, the fast model (engine.run's). Its result:
    runtime, noiseless runtime and slowdown, its own speed, and in the fast
    model the share of iterations some rank was delayed in."""

    if collective not in COLLECTIVES:
        raise ValueError(f"unknown collective {collective!r}")
    network = network or Network()
    if algorithm is not None:
        model = ["--algorithm", algorithm, "--latency-ns", repr(network.latency_ns), "--overhead-ns",
                 repr(network.overhead_ns), "--per-byte-ns", repr(network.per_byte_ns), "--bytes",
                 str(network.bytes)]  # fmt: skip
    else:
        model = ["--collective", collective, "--cost-ns", repr(float(network.rounds(assign.size, collective)))]
    fd, name = tempfile.mkstemp(prefix="quietcore-simulate-", suffix=".bin")
    os.close(fd)
    try:
        write_input(Path(name), timelines, assign, offsets)
        args = ["--input", name, "--work-ns", repr(float(work_ns)), "--iterations", str(iterations), *model]
        if threads:
            args += ["--threads", str(threads)]
        if charge != "stretch":
            args += ["--noise-charge", charge]
        steps = 1 + (rounds(algorithm, assign.size) if algorithm is not None else 0)
        expected = assign.size * iterations * steps / SLOWEST_RATE
        return run_probe("simulate", args, expected_s=expected).result
    finally:
        os.unlink(name)
