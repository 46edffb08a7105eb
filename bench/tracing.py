"""What tracing costs the runs it watches, against the same runs untraced,
interleaved: the probe's compute workload (few events) and its mixed one
(compute with file writes: sched and block events), each timed with and
without quietcore's tracing of every CPU (the events of `intruders`, read
every 50 ms, as `run` and `intruders` do). Also: does tracing add a
periodic source to the noise probe's gaps (noise with `--explain-above`,
which traces every CPU, against `--trace off`)?

    python bench/tracing.py [--rounds 15] [--cpu N]

Needs root (tracefs). Prints each ratio traced/untraced (median of the
rounds, with a bootstrap interval) and the target of issue 20: <= 1.02."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from quietcore.attribution import intruders, tracer
from quietcore.probes.runner import probe_path
from quietcore.stats.bootstrap import bootstrap_ci

WORKLOADS = {
    "compute": ["compute", "--iters", "150000000"],
    "mixed": ["mixed", "--iters", "600", "--every", "100", "--checkpoint", "1M"],
}
TARGET = 1.02


def timed(argv: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return time.perf_counter() - t


def traced(argv: list[str], cpu: int) -> float:
    with tracer.TraceSession(None, intruders.EVENTS, 1024) as trace, tracer.Stream(trace, frozenset({cpu})):
        return timed(argv)


def periodic(extra: list[str], cpu: int, env: dict[str, str]) -> list[float]:
    argv = [sys.executable, "-m", "quietcore", "noise", "--cpus", str(cpu), "--duration", "3", "--json", *extra]
    out = json.loads(subprocess.run(argv, env=env, check=True, capture_output=True, text=True).stdout)
    return sorted(round(p["frequency_hz"], 1) for p in out["cpus"][0].get("periodic", []))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--cpu", type=int, default=max(os.sched_getaffinity(0)))
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("tracing needs root (tracefs)", file=sys.stderr)
        return 3
    probe = str(probe_path())
    print(f"tracing's cost on CPU {args.cpu}: median of {args.rounds} interleaved rounds, traced/untraced")
    misses = 0
    for name, work in WORKLOADS.items():
        argv = [probe, *work, "--cpus", str(args.cpu)]
        plain, with_trace = [], []
        for round_ in range(args.rounds):
            order = (False, True) if round_ % 2 else (True, False)  # alternate which goes first
            for trace_it in order:
                (with_trace if trace_it else plain).append(traced(argv, args.cpu) if trace_it else timed(argv))
        ratios = np.array(with_trace) / np.array(plain)
        ratio = float(np.median(with_trace) / np.median(plain))
        low, high = bootstrap_ci(list(ratios))
        verdict = "PASS" if ratio <= TARGET else "MISS"
        misses += verdict == "MISS"
        print(f"  {name:8s} {np.median(plain) * 1e3:8.1f} ms untraced  ratio {ratio:.3f} "
              f"[{low:.3f}-{high:.3f}]  target <= {TARGET}  {verdict}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "QUIETCORE_DB": f"{tmp}/r.db"}
        untraced = periodic(["--trace", "off"], args.cpu, env)
        traced_ = periodic(["--explain-above", "1000"], args.cpu, env)
    new = [f for f in traced_ if all(abs(f - g) > 0.02 * g for g in untraced)]
    print(f"  periodic sources in the noise probe's gaps: untraced {untraced} Hz, traced {traced_} Hz: "
          + ("no new one PASS" if not new else f"new {new} MISS"))  # fmt: skip
    return 1 if misses or new else 0


if __name__ == "__main__":
    raise SystemExit(main())
