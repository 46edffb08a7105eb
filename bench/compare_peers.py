"""quietcore's probes beside their peers, in one run, on the same CPU.

  noise     vs oslat (rt-tests): loop period, lost time in gaps of 2 us or
            more, gaps over 2/10/100 us; the two alternate, ROUNDS times each,
            each first in turn, so that drifting host noise falls on both alike.
  latency   vs cyclictest (rt-tests): p99 and max wake-up latency, SCHED_FIFO.
  ctxswitch vs perf bench sched pipe: one pipe round trip between two
            processes pinned to the same CPU.

Every figure is printed beside its peer's with the ratio quietcore/peer.
Targets (checked, and printed as PASS/MISS): quietcore's minimum loop period
at most 30 ns on x86-64, and its lost time within 10 % of oslat's (the
median of the rounds' ratios, each round's two runs back to back).

usage: python bench/compare_peers.py [--cpu N] [--rounds R] [--seconds S] [--keep DIR]
Needs rt-tests (oslat, cyclictest), optionally linux-perf, and root.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from quietcore.probes.runner import probe_path

#: Rounds of the noise pair: the lost time of one 5 s run of either tool moved by a quarter from one round
#: to the next here (31-58 ms), and the ratio of the medians of three rounds missed the 10 % target in both
#: runs of the bench one afternoon (1.17, 1.11) where 17 rounds summed agreed within 3 %.
ROUNDS = 5


def run_json(argv: list[str]) -> dict[str, Any]:
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=600)
    data: dict[str, Any] = json.loads(out.stdout)
    return data


def quietcore_noise(cpu: int, seconds: float) -> dict[str, float]:
    r = run_json([str(probe_path()), "noise", "--cpus", str(cpu), "--duration", str(seconds), "--threshold-ns", "1000"])
    c = r["result"]["cpus"][0]
    gaps = [d for _, d in c["events"]]
    return {
        "min_loop_ns": c["min_period_ns"],
        "mean_loop_ns": c["measured_ns"] / c["loops"],
        "lost_2us_ms": sum(d for d in gaps if d >= 2000) / 1e6,
        "over_2us": sum(d > 2000 for d in gaps),
        "over_10us": sum(d > 10000 for d in gaps),
        "over_100us": sum(d > 100000 for d in gaps),
        "max_us": c["max_gap_ns"] / 1000,
    }


KEEP: Path | None = None  # --keep DIR: the peers' last JSON files are copied there


def _kept(path: Path) -> None:
    if KEEP is not None:
        shutil.copy(path, KEEP / path.name)


def oslat(cpu: int, seconds: float, main_cpu: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "oslat.json"
        subprocess.run(["oslat", "-c", str(cpu), "-C", str(main_cpu), "-D", str(int(seconds)), "-b", "1024", "-q",
                        f"--json={path}"], capture_output=True, check=True, timeout=600)  # fmt: skip
        _kept(path)
        t = next(iter(json.loads(path.read_text())["thread"].values()))
    hist = {int(k): v for k, v in t["histogram"].items()}
    loops = sum(hist.values())
    # Bucket b holds loops of b-1 to b us (oslat rounds up); take the middle.
    return {
        "min_loop_ns": float("nan"),  # oslat's resolution is 1 us
        "mean_loop_ns": t["duration"] * 1e9 / loops,
        "lost_2us_ms": sum((b - 0.5) * n for b, n in hist.items() if b >= 3) / 1e3,
        "over_2us": sum(n for b, n in hist.items() if b >= 3),
        "over_10us": sum(n for b, n in hist.items() if b >= 11),
        "over_100us": sum(n for b, n in hist.items() if b >= 101),
        "max_us": float(t["max"]),
    }


def quietcore_latency(cpu: int, seconds: float) -> dict[str, float]:
    # cyclictest writes 0 to /dev/cpu_dma_latency by default (unless --laptop),
    # which keeps CPUs out of idle states; quietcore does so only when asked.
    # Like for like: ask.
    r = run_json([str(probe_path()), "latency", "--cpus", str(cpu), "--duration", str(seconds),
                  "--policy", "fifo", "--priority", "80", "--dma-latency", "0"])  # fmt: skip
    c = r["result"]["cpus"][0]
    return {"p99_us": c["p99_ns"] / 1000, "max_us": c["max_ns"] / 1000, "min_us": c["min_ns"] / 1000}


def cyclictest(cpu: int, seconds: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cyc.json"
        argv = ["cyclictest", "-t1", f"-a{cpu}", "-m", "-p80", "-i1000", "-h20000", "-q", "-D", str(int(seconds))]
        subprocess.run([*argv, f"--json={path}"], capture_output=True, check=True, timeout=600)
        _kept(path)
        t = next(iter(json.loads(path.read_text())["thread"].values()))
    hist = sorted((int(k), v) for k, v in t["histogram"].items())
    total, seen, p99 = sum(v for _, v in hist), 0, float("nan")
    for us, n in hist:
        seen += n
        if seen >= 0.99 * total:
            p99 = float(us)
            break
    return {"p99_us": p99, "max_us": float(t["max"]), "min_us": float(t["min"])}


def quietcore_pipe(cpu: int) -> float:
    r = run_json([str(probe_path()), "ctxswitch", "--cpus", str(cpu), "--tests", "pipe", "--reps", "5"])
    return float(statistics.median(r["result"]["series_ns"]["pipe_round_trip"]))


def perf_pipe(cpu: int) -> float | None:
    if not shutil.which("perf"):
        return None
    out = subprocess.run(["taskset", "-c", str(cpu), "perf", "bench", "sched", "pipe", "-l", "100000"],
                         capture_output=True, text=True, check=False, timeout=600)  # fmt: skip
    match = re.search(r"([\d.]+) usecs/op", out.stdout)
    return float(match.group(1)) * 1000 if match else None


def row(name: str, ours: float | None, peer: float | None, unit: str) -> str:
    ratio = f"{ours / peer:6.2f}" if ours is not None and peer else "     -"
    fmt = lambda v: "-" if v is None or v != v else f"{v:,.2f}"  # noqa: E731
    return f"  {name:<28} {fmt(ours):>14} {fmt(peer):>14} {unit:<6} {ratio}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu", type=int, default=max(os.sched_getaffinity(0)))
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--keep", metavar="DIR", type=Path, help="copy oslat's and cyclictest's JSON files here")
    args = parser.parse_args()
    global KEEP
    KEEP = args.keep
    missing = [tool for tool in ("oslat", "cyclictest") if not shutil.which(tool)]
    if missing:
        print(f"bench: needs {' and '.join(missing)} (apt-get install rt-tests)", file=sys.stderr)
        return 2
    main_cpu = min(os.sched_getaffinity(0) - {args.cpu} or {args.cpu})
    q, o = [], []
    for round_ in range(args.rounds):  # alternate, each first in turn: drifting host noise falls on both
        for ours in (True, False) if round_ % 2 == 0 else (False, True):
            if ours:
                q.append(quietcore_noise(args.cpu, args.seconds))
            else:
                o.append(oslat(args.cpu, args.seconds, main_cpu))
    med = {k: statistics.median(r[k] for r in q) for k in q[0]}
    peer = {k: statistics.median(r[k] for r in o) for k in o[0]}
    print(f"noise on CPU {args.cpu}: quietcore vs oslat, median of {args.rounds} alternating {args.seconds:g} s runs")
    print(f"  {'':<28} {'quietcore':>14} {'oslat':>14} {'':<6} {'ratio'}")
    for key, name, unit in (("mean_loop_ns", "mean loop period", "ns"), ("lost_2us_ms", "lost in gaps >= 2 us", "ms"),
                            ("over_2us", "gaps over 2 us", ""), ("over_10us", "gaps over 10 us", ""),
                            ("over_100us", "gaps over 100 us", ""), ("max_us", "max gap", "us")):  # fmt: skip
        print(row(name, med[key], peer[key], unit))
    print(row("min loop period", med["min_loop_ns"], None, "ns") + "   (oslat: 1 us resolution)")
    # The lost time's target is judged on the rounds' own ratios (each pair ran back to back, sharing the host's
    # drift): the ratio of the two medians above pairs a run with one of another minute. Each run's figure is
    # printed for the host's spread (this VM: 31-58 ms in 5 s for one tool, a round's ratio 0.81-1.25).
    paired = [a["lost_2us_ms"] / b["lost_2us_ms"] for a, b in zip(q, o, strict=True) if b["lost_2us_ms"]]
    lost_ratio = statistics.median(paired) if paired else float("nan")
    each = ", ".join(f"{a['lost_2us_ms']:.1f}/{b['lost_2us_ms']:.1f}" for a, b in zip(q, o, strict=True))
    print(f"  lost in gaps >= 2 us, quietcore/oslat, round by round: {each} ms; the median ratio {lost_ratio:.2f}")
    targets = []
    if platform.machine() == "x86_64":
        targets.append(("minimum loop period <= 30 ns", med["min_loop_ns"] <= 30))
    targets.append(("lost time within 10 % of oslat's (the median of the rounds' ratios)", abs(lost_ratio - 1) <= 0.10))

    ql, cl = quietcore_latency(args.cpu, args.seconds), cyclictest(args.cpu, args.seconds)
    print(
        f"\nlatency on CPU {args.cpu}: quietcore vs cyclictest, SCHED_FIFO 80, 1 ms interval, "
        f"cpu_dma_latency 0 (cyclictest's default), {args.seconds:g} s each"
    )
    for key, name in (("min_us", "min"), ("p99_us", "p99"), ("max_us", "max")):
        print(row(name, ql[key], cl[key], "us"))

    qp, pp = quietcore_pipe(args.cpu), perf_pipe(args.cpu)
    print(f"\npipe round trip on CPU {args.cpu}: quietcore ctxswitch vs perf bench sched pipe")
    print(row("round trip (2 switches)", qp, pp, "ns") + ("" if pp else "   (perf bench unavailable)"))

    print("\ntargets:")
    for name, ok in targets:
        print(f"  {'PASS' if ok else 'MISS'}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
