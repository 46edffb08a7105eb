"""How noise is charged to work, on a measured trace: quietcore's round model
with each `--noise-charge` against LogGOPSim, at 16, 256 and 1,024 ranks.

The job is bench/loggopsim.py's (200 x (g of work, then an 8-byte allreduce
by recursive doubling), each rank from its own random offset into the same
trace), on a zero-cost network, g = 100 µs and 1 ms. The trace is a measured
one: by default a 20 s `noise --cpus 1` of this guest, exported with
`results export --format trace` (tests/fixtures/loggopsim/vm-cpu1-20s.trace.gz).

LogGOPSim (`Noise.hpp`, `get_noise`) charges an operation [s, s + len] with
the rest of an event under way at s and every event that starts inside that
window, not stretched by the noise it adds; quietcore's default, stretch,
runs the work through every gap it meets until it is done. On a trace whose
long stalls come in clusters the two part as the ranks grow: the slowest
rank is the one that met a cluster, and the window charge leaves out what
starts in the delay. The `window` charge must be within 15 % of LogGOPSim
at every point; the points go to tests/fixtures/loggopsim/charge.json, which
tests/integration/test_loggopsim.py holds the kernel to.

With --plant-clusters, clusters of host stalls are planted on the trace
(every 1.5-2.5 s, 4-7 stalls of 1.5-4 ms each, 0.2-1 ms apart: what this
guest's host did on the day issue 37 was measured, and not on the day the
default trace was), so that both charges are seen where they part.

    python bench/charge.py --bin DIR --revision COMMIT [--trace FILE] [--plant-clusters] [--runs N] [--seeds N]"""

from __future__ import annotations

import argparse
import gzip
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE)]
from loggopsim import _second, goal, loggopsim, timeline_of, written  # noqa: E402  (its job, runner, verdict)

from quietcore.simulate.engine import Network, Timeline  # noqa: E402
from quietcore.simulate.native import replay  # noqa: E402

FIXTURES = HERE.parent / "tests" / "fixtures" / "loggopsim"
TRACE = FIXTURES / "vm-cpu1-20s.trace.gz"
SIZES, WORK_US = (16, 256, 1024), (100, 1000)
ZERO = (0, 0, 0, 0)
ITERATIONS, BYTES = 200, 8


def plant_clusters(pairs: np.ndarray, seed: int = 28) -> np.ndarray:
    """The trace's (start, duration) pairs with clusters of host stalls planted, a gap the stalls overlap
    made one with them (the CPU is lost once)."""
    rng = np.random.default_rng(seed)
    extra, at = [], 0.7e9
    while at < pairs[-1, 0] - 0.1e9:
        t = at
        for _ in range(int(rng.integers(4, 8))):
            d = rng.uniform(1.5e6, 4e6)
            extra.append((t, d))
            t += d + rng.uniform(0.2e6, 1.0e6)
        at += rng.uniform(1.5e9, 2.5e9)
    both = np.vstack([pairs, np.array(extra)])
    both = both[np.argsort(both[:, 0], kind="stable")]
    kept = [both[0].copy()]
    for s, d in both[1:]:
        last = kept[-1]
        if s < last[0] + last[1]:
            last[1] = max(last[1], s + d - last[0])
        else:
            kept.append(np.array([s, d]))
    return np.array(kept)


def ours(tl: Timeline, p: int, work_ns: float, seeds: int, charge: str) -> list[float]:
    """The round model's slowdown with each of `seeds` seeds (bench/loggopsim.py's offsets)."""
    got = []
    for seed in range(seeds):
        offsets = np.random.default_rng([seed, p]).uniform(0, tl.period, p)
        res = replay([tl], np.zeros(p, dtype=np.int64), offsets, work_ns, ITERATIONS,
                     network=Network(0.0, 0.0, 0.0, BYTES), algorithm="recursive-doubling",
                     charge=charge)  # fmt: skip
        got.append(float(res["slowdown"]))
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", type=Path, required=True, help="the directory of LogGOPSim and txt2bin")
    ap.add_argument("--revision", required=True, help="the LogGOPSim commit they were built from")
    ap.add_argument("--trace", type=Path, default=TRACE, help="an exported trace (start_ns<TAB>duration_ns; .gz too)")
    ap.add_argument("--runs", type=int, default=12, help="LogGOPSim runs a point (a second apart: its seed)")
    ap.add_argument("--seeds", type=int, default=10, help="quietcore's seeds a point")
    ap.add_argument("--plant-clusters", action="store_true", help="plant clusters of host stalls on the trace")
    ap.add_argument("--out", type=Path, help="default: tests/fixtures/loggopsim/charge[-clustered].json")
    args = ap.parse_args()
    args.out = args.out or FIXTURES / f"charge{'-clustered' if args.plant_clusters else ''}.json"
    raw = args.trace.read_bytes()
    text = (gzip.decompress(raw) if args.trace.name.endswith(".gz") else raw).decode().rstrip("\n")
    if args.plant_clusters:
        pairs = np.array([[float(x) for x in line.split("\t")] for line in text.splitlines() if line.strip()])
        text = "\n".join(f"{s:.0f}\t{d:.0f}" for s, d in plant_clusters(pairs))
    tl = timeline_of(text)
    points: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="quietcore-charge-") as tmp:
        work = Path(tmp)
        noise = work / "noise.trace"
        noise.write_text(text)  # no final newline: LogGOPSim reads one as the last event again
        for p in SIZES:
            for g_us in WORK_US:
                (work / "job.goal").write_text(goal(p, g_us * 1000))
                subprocess.run([str(args.bin / "txt2bin"), "-i", str(work / "job.goal"), "-o", str(work / "job.bin")],
                               check=True, capture_output=True)  # fmt: skip
                quiet = loggopsim(args.bin, work / "job.bin", ZERO, None)
                runs = []
                for _ in range(args.runs):
                    _second()
                    runs.append(loggopsim(args.bin, work / "job.bin", ZERO, noise) / quiet)
                lgs = float(np.mean(runs))
                point: dict[str, Any] = {"ranks": p, "work_us": g_us, "loggopsim": lgs, "loggopsim_runs": runs}
                for charge in ("stretch", "window"):
                    mine = ours(tl, p, g_us * 1e3, args.seeds, charge)
                    point[charge] = {"mean": float(np.mean(mine)), "runs": mine, "ratio": float(np.mean(mine)) / lgs}
                points.append(point)
                print(f"P = {p:5}  g = {g_us:4} µs  LogGOPSim {lgs:6.3f}  stretch {point['stretch']['mean']:6.3f} "
                      f"({point['stretch']['ratio']:.2f})  window {point['window']['mean']:6.3f} "
                      f"({point['window']['ratio']:.2f})", flush=True)  # fmt: skip
    worst = max(abs(pt["window"]["ratio"] - 1) for pt in points)
    doc = {"loggopsim": {"repository": "https://github.com/spcl/LogGOPSim", "revision": args.revision},
           "job": {"iterations": ITERATIONS, "bytes": BYTES, "algorithm": "recursive-doubling", "network": "zero"},
           "trace": args.trace.name, "clusters_planted": args.plant_clusters, "gaps": int(tl.starts.size),
           "span_s": tl.period / 1e9, "points": points, "worst_window_difference": worst}  # fmt: skip
    return written(doc, args.out, worst, "the window charge", len(points))


if __name__ == "__main__":
    sys.exit(main())
