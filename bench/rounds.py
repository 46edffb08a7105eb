"""`quietcore simulate`'s round model at scale: every message of a
recursive-doubling allreduce (LogGP, L = 1 µs, o = 0.2 µs) at 100,000 ranks
x 1,000 iterations and at 10,000 x 10,000, on this node's own noise (a
fresh 10 s trace of its last CPU) and on a quiet bare-metal-like tick.
Peers in the same run: the same model in numpy (quietcore.simulate.rounds,
vectorised over the ranks, on fewer iterations), in rank-rounds a second;
and the fast model on the same job. Then the memory the kernel holds per
rank at 10,000, 100,000 and 1,000,000 ranks (linear: the same bytes a
rank), and a default study (`quietcore simulate --trace 1`, today's
default options) from start to its stored session.

    python bench/rounds.py"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

# The installed package (`make install`), whose native core is built in.
from quietcore.simulate import rounds
from quietcore.simulate.engine import Network, Timeline
from quietcore.simulate.native import replay

TARGET_S, STUDY_TARGET_S = 10.0, 60.0
WORK_NS = 100e3
NET = Network(1000.0, 200.0, 0.1, 8)
NUMPY_RANKS, NUMPY_ITERATIONS = 10_000, 20


def measured(db: str, env: dict[str, str]) -> list[Timeline]:
    """A 10 s noise run of this node's last CPU, as `simulate --trace` replays it (session 1 of db)."""
    cpu = max(os.sched_getaffinity(0))
    subprocess.run([sys.executable, "-m", "quietcore", "noise", "--cpus", str(cpu), "--duration", "10", "--trace",
                    "off", "--json"], env=env, check=True, capture_output=True)  # fmt: skip
    from quietcore.simulate.noise import from_session
    from quietcore.store import db as store

    with store.open_db(Path(db), chosen=True) as conn:
        return from_session(conn, "1").timelines()


def job(timelines: list[Timeline], ranks: int, iterations: int, algorithm: str | None) -> dict[str, float]:
    rng = np.random.default_rng(1)
    periods = np.array([t.period for t in timelines])
    assign = np.arange(ranks) % len(timelines)
    offsets = rng.random(ranks) * periods[assign]
    return replay(timelines, assign, offsets, WORK_NS, iterations, "allreduce", NET, algorithm=algorithm)


def timed(name: str, timelines: list[Timeline]) -> float:
    """Both sizes in the round model, beside numpy's round model and the fast model; the slower's seconds."""
    rng = np.random.default_rng(2)
    assign = np.arange(NUMPY_RANKS) % len(timelines)
    offsets = rng.random(NUMPY_RANKS) * np.array([t.period for t in timelines])[assign]
    t = time.perf_counter()
    rounds.run(timelines, assign, offsets, WORK_NS, NUMPY_ITERATIONS, "recursive-doubling", NET)
    steps = NUMPY_RANKS * NUMPY_ITERATIONS * (1 + rounds.rounds("recursive-doubling", NUMPY_RANKS))
    numpy_rate = steps / (time.perf_counter() - t)
    worst = 0.0
    for ranks, iterations in ((100_000, 1_000), (10_000, 10_000)):
        got = job(timelines, ranks, iterations, "recursive-doubling")
        fast = job(timelines, ranks, iterations, None)
        rate = ranks * iterations * (1 + got["rounds"]) / got["seconds"]
        print(f"{name:<21} {ranks:>7,} x {iterations:<6,} {got['slowdown']:>6.3f} {fast['slowdown']:>6.3f} "
              f"{got['seconds']:>6.2f} s {fast['seconds']:>5.2f} s {rate:>8.3g} {numpy_rate:>8.3g} "
              f"{rate / numpy_rate:>5.0f}x")  # fmt: skip
        worst = max(worst, float(got["seconds"]))
    return worst


def memory() -> bool:
    """The kernel's memory with everything allocated (as it reports it) at
    growing N: linear means the same bytes for every further rank."""
    peaks = {}
    tl = Timeline(np.array([0.0, 5e5]), np.array([2e3, 3e4]), 4e6)
    for ranks in (10_000, 100_000, 1_000_000):
        got = replay([tl], np.zeros(ranks, dtype=np.int64), np.random.default_rng(1).random(ranks) * 4e6, 1e5, 5,
                     "allreduce", NET, algorithm="recursive-doubling")  # fmt: skip
        peaks[ranks] = int(got["rss_bytes"])
    growth = (peaks[1_000_000] - peaks[100_000]) / 900_000
    early = (peaks[100_000] - peaks[10_000]) / 90_000
    print("memory: " + ", ".join(f"{n:,} ranks {p / 2**20:.0f} MiB" for n, p in peaks.items()))
    print(f"  {early:.0f} bytes a rank from 10,000 to 100,000 ranks, {growth:.0f} from 100,000 to 1,000,000")
    return abs(growth / early - 1) < 0.25


def study(env: dict[str, str]) -> float:
    """`quietcore simulate --trace 1` with every default, its wall time."""
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "quietcore", "simulate", "--trace", "1", "--json"], env=env, check=True,
                   capture_output=True)  # fmt: skip
    return time.perf_counter() - t


def main() -> int:
    print(f"round model: recursive-doubling allreduce, g = {WORK_NS / 1e3:g} µs, L = 1 µs, o = 0.2 µs")
    print(f"numpy's round model on {NUMPY_RANKS:,} ranks x {NUMPY_ITERATIONS} iterations")
    print(f"{'':<21} {'':>16} {'slowdown':>13} {'seconds':>16}")
    print(f"{'noise':<21} {'job':>16} {'rounds':>6} {'fast':>6} {'native':>8} {'fast':>7} {'steps/s':>8} "
          f"{'numpy/s':>8} {'ratio':>6}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "bench.db")
        env = {**os.environ, "QUIETCORE_DB": db}
        trace = measured(db, env)
        tick = [Timeline(np.array([0.0]), np.array([2e3]), 4e6)]
        worst = max(timed("tick, 250 Hz x 2 µs", tick), timed("this node, 10 s traced", trace))
        linear = memory()
        took = study(env)
    ok = worst <= TARGET_S
    print(f"round model, 100,000 x 1,000 and 10,000 x 10,000: {worst:.2f} s at the slowest "
          f"(target <= {TARGET_S:g} s) {'PASS' if ok else 'MISS'}")  # fmt: skip
    print(f"memory linear in the ranks: {'PASS' if linear else 'MISS'}")
    print(f"a default study (simulate --trace 1 on that trace): {took:.1f} s (target <= {STUDY_TARGET_S:g} s) "
          f"{'PASS' if took <= STUDY_TARGET_S else 'MISS'}")  # fmt: skip
    print(json.dumps({"seconds": worst, "target_s": TARGET_S, "study_s": took, "study_target_s": STUDY_TARGET_S}))
    return 0 if ok and linear and took <= STUDY_TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
