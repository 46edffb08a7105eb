"""Each verdict's false-alarm rate, measured on A/A runs (issue 58): nothing
changes between the two sides, so every "different" is a false alarm.

- compare, noise: 2 x PAIRS sessions of `noise --duration S` of every CPU,
  then `compare` of each pair, a CPU a comparison. The session is the unit:
  each pair is judged against the spread of the node's repeated sessions
  (all of them share this configuration). Claimed: 5 %.
- check: a reference set from the first session, then CHECKS runs of
  `check` against it. A FAIL drains a node. Claimed: at most 0.1 % of
  node-checks, so none here.
- run custom, a null factor: `run custom --cmd CMD --factor replicate=a,b`,
  RUNS times; the cell b against a. Claimed: 5 %.

`tune prove` is not run: it applies a plan, and its A/A is `run custom`'s
(the same interleaved runs and test), which is measured here instead.

    python bench/aa.py [--pairs 10] [--duration 5] [--checks 20] [--runs 10]

Prints, per verdict, the comparisons, the "different" ones, their rate with
its 95 % Wilson interval, and the alpha the verdict claims; PASS when the
rate is at most the alpha, or, for check, when none failed. Runs on this
node's CPUs: keep them otherwise idle."""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The 95 % Wilson interval of k in n."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def quietcore(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "quietcore", *args], env=env, capture_output=True, text=True,
                          check=False)  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--checks", type=int, default=20)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--cmd", default=f"{sys.executable} -c pass", help="run custom's command")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="quietcore-aa-"))
    state = work / "state"
    state.mkdir(mode=0o700)
    env = {**os.environ, "QUIETCORE_DB": str(work / "aa.db"), "QUIETCORE_STATE_DIR": str(state)}
    results = []
    cpus = ",".join(map(str, sorted(os.sched_getaffinity(0))))

    for i in range(2 * args.pairs):
        done = quietcore(env, "noise", "--cpus", cpus, "--duration", str(args.duration), "--tag", f"aa={i}")
        if done.returncode != 0:
            print(f"noise session {i}: {done.stderr.strip()}", file=sys.stderr)
            return 1
    said = total = 0
    for k in range(args.pairs):
        done = quietcore(env, "compare", f"aa={2 * k}", f"aa={2 * k + 1}", "--json")
        rows = json.loads(done.stdout)["noise"]
        total += len(rows)
        said += sum(r["verdict"].startswith("B ") for r in rows)
    results.append(("compare, noise (a CPU of a pair)", said, total, 0.05))

    ref = quietcore(env, "reference", "set", "1")  # the first noise session
    if ref.returncode != 0:
        print(f"reference set: {ref.stderr.strip()}", file=sys.stderr)
        return 1
    failed = 0
    for _ in range(args.checks):
        failed += quietcore(env, "check", "--reference", "auto").returncode == 1
    results.append(("check (a node-check)", failed, args.checks, 0.001))

    said = total = 0
    for _ in range(args.runs):
        done = quietcore(env, "run", "custom", "--cmd", args.cmd, "--factor", "replicate=a,b", "--reps", "10",
                         "--json")  # fmt: skip
        if done.returncode != 0:
            print(f"run custom: {done.stderr.strip()}", file=sys.stderr)
            return 1
        compared = [r["comparison"] for r in json.loads(done.stdout)["rows"] if r.get("comparison")]
        total += len(compared)
        said += sum(c["verdict"].startswith(("faster", "slower")) for c in compared)
    results.append(("run custom, replicate=a,b (a cell)", said, total, 0.05))

    print(f"A/A on this node ({work}):")
    print(f"{'verdict':38} {'compared':>8} {'different':>9} {'rate':>7} {'95% interval':>16} {'claimed':>8}")
    ok = True
    for name, k, n, alpha in results:
        low, high = wilson(k, n)
        rate = k / n if n else float("nan")
        passed = k == 0 if alpha < 0.01 else rate <= alpha
        ok &= passed
        print(f"{name:38} {n:8d} {k:9d} {rate:7.1%} {f'[{low:.1%}, {high:.1%}]':>16} {alpha:8.1%}  "
              f"{'PASS' if passed else 'MISS'}")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
