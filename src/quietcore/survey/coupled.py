"""The cost of noise in a synchronised program, measured and predicted.

Measured (`survey --coupled`): every rank of a sub-communicator of the
first N ranks (N = 1, 2, 4, ... up to the job) runs a fixed work quantum of
W µs, then an Allreduce, many times. The noiseless ideal of an iteration
is its minimum over the run; the slowdown is the mean over the minimum.
The quantum is a calibrated count of SHA-256 blocks over a 4 KiB buffer
that stays in L1: fixed work, which noise stretches (a quantum fixed in
time would hide it), done in C by hashlib, so that its time is the CPU's
and the noise's. A loop of Python integer additions, as it was, allocates
once its sum outgrows the small integers, and its quanta here spread with
no noise at all (mean over minimum 1.06-1.71 in five runs on an idle CPU,
three over 1.5, against 1.04-1.08 for the hash).

Predicted, from one rank's noise trace of the same survey: an iteration
on one rank is delayed by the gaps that start within its W µs; sampling
windows of W µs at random places in the trace gives that delay's
distribution F, and a job of N ranks waits each iteration for the slowest,
E[max of N] = integral of (1 - F(x)^N) dx (the ranks' noise taken as
independent). The predicted slowdown is (ideal + E[max]) / ideal.

Simulated, from the same trace and the network the survey measured
(survey.network): each row's job of N ranks replayed by `simulate`'s
kernel in the fast model (the Allreduce a noiseless cost after the
slowest rank) and in the round model (its recursive doubling's every
message, whose overheads the noise stretches), each rank at a random
offset, the mean over SEEDS."""

from __future__ import annotations

import hashlib
import time
from typing import Any

import numpy as np

SAMPLES = 20_000  # windows drawn from the trace
SEEDS = 5  # simulated jobs per row and model
SIMULATED_ITERATIONS = 2_000  # at most, per simulated job
ITERATION_BUDGET_S = 0.5  # per (W, N): iterations = this / W, within the bounds below
MIN_ITERATIONS, MAX_ITERATIONS = 100, 20_000


BLOCK = bytes(4096)


def work(steps: int) -> bytes:
    """`steps` updates of a SHA-256 over BLOCK: fixed work in C."""
    h = hashlib.sha256()
    for _ in range(steps):
        h.update(BLOCK)
    return h.digest()


def calibrate(work_ns: float) -> int:
    """Updates whose fastest run takes about `work_ns`."""
    steps = 1
    for _ in range(3):
        best = min(_timed(steps) for _ in range(20))
        steps = max(1, int(steps * work_ns / max(best, 1.0)))
    return steps


def _timed(steps: int) -> float:
    t = time.perf_counter_ns()
    work(steps)
    return float(time.perf_counter_ns() - t)


def sizes(world: int) -> list[int]:
    """1, 2, 4, ... and the whole job."""
    out, n = [], 1
    while n < world:
        out.append(n)
        n *= 2
    return [*out, world]


def measure(comm: Any, work_us: list[int]) -> list[dict[str, Any]]:
    """Collective. Rank 0 gets one row per (W, N); the others []."""
    from mpi4py import MPI

    rank = comm.Get_rank()
    rows = []
    buf, out = np.zeros(1), np.zeros(1)
    for w in work_us:
        steps = calibrate(w * 1000.0)
        iterations = int(min(max(ITERATION_BUDGET_S / (w * 1e-6), MIN_ITERATIONS), MAX_ITERATIONS))
        for n in sizes(comm.Get_size()):
            sub = comm.Split(0 if rank < n else MPI.UNDEFINED, rank)
            comm.Barrier()
            if sub != MPI.COMM_NULL:
                times = np.empty(iterations)
                sub.Barrier()
                for i in range(iterations):
                    t = time.perf_counter_ns()
                    work(steps)
                    sub.Allreduce(buf, out)
                    times[i] = time.perf_counter_ns() - t
                sub.Free()
                if rank == 0:
                    ideal = float(times.min())
                    rows.append({"work_us": w, "ranks": n, "iterations": iterations, "ideal_ns": ideal,
                                 "mean_ns": float(times.mean()), "slowdown": float(times.mean()) / ideal})  # fmt: skip
            comm.Barrier()
    return rows


def delays(starts: np.ndarray, durations: np.ndarray, span_ns: float, window_ns: float,
           seed: int = 1) -> np.ndarray:  # fmt: skip
    """The delay of a window of `window_ns` at SAMPLES random places of a
    trace whose starts count from its beginning: the total length of the
    gaps that start within it. Linear in the events."""
    order = np.argsort(starts)
    s, d = starts[order], durations[order]
    cum = np.concatenate([[0.0], np.cumsum(d)])
    rng = np.random.default_rng(seed)
    begin = rng.uniform(0.0, max(span_ns - window_ns, 0.0), SAMPLES)
    lo, hi = np.searchsorted(s, begin), np.searchsorted(s, begin + window_ns)
    return np.asarray(cum[hi] - cum[lo])


def expected_max(samples: np.ndarray, n: int) -> float:
    """E[max of n independent draws] from the empirical distribution:
    sum over the sorted samples of x_(i) ((i/M)^n - ((i-1)/M)^n)."""
    x = np.sort(samples)
    m = len(x)
    if m == 0:
        return 0.0
    i = np.arange(1, m + 1)
    weights = (i / m) ** n - ((i - 1) / m) ** n
    return float(np.dot(x, weights))


def predict(rows: list[dict[str, Any]], starts: np.ndarray, durations: np.ndarray, span_ns: float) -> None:
    """Add to each measured row the slowdown the one-rank trace predicts."""
    for row in rows:
        samples = delays(starts, durations, span_ns, row["work_us"] * 1000.0)
        row["predicted"] = (row["ideal_ns"] + expected_max(samples, row["ranks"])) / row["ideal_ns"]


def simulate(rows: list[dict[str, Any]], starts: np.ndarray, durations: np.ndarray, span_ns: float,
             net: dict[str, Any] | None) -> None:  # fmt: skip
    """Add to each row the slowdown both of simulate's models give, over the
    survey's measured network (without one, a one-rank survey's, none)."""
    from quietcore.simulate.engine import Network, union
    from quietcore.simulate.native import replay

    order = np.argsort(starts)
    inside = (starts[order] >= 0) & (starts[order] < span_ns)
    timeline = union(starts[order][inside], durations[order][inside], span_ns)
    if timeline.total >= span_ns:
        return
    network = Network(0.0, 0.0, 0.0, 8)
    if net is not None:
        network = Network(net["latency_ns"], net["overhead_ns"], net["per_byte_ns"], 8)
    for row in rows:
        n, iterations = int(row["ranks"]), min(int(row["iterations"]), SIMULATED_ITERATIONS)
        for model, algorithm in (("fast", None), ("rounds", "recursive-doubling")):
            got = []
            for seed in range(SEEDS):
                offsets = np.random.default_rng([seed, n]).uniform(0, span_ns, n)
                result = replay([timeline], np.zeros(n, dtype=np.int64), offsets, row["work_us"] * 1e3, iterations,
                                "allreduce", network, threads=1, algorithm=algorithm)  # fmt: skip
                got.append(float(result["slowdown"]))
            row[model] = float(np.mean(got))
