"""A health check's cost: `quietcore check` as slurmd or a timer runs it,
start-up, measuring, analysis, the verdict and the metrics file included,
against its target (<= 10 s with the default 0.5 s measurement), and a 1 s
check beside the peer measured in the same run: `oslat -D 1` on the same
CPUs, the nearest single-shot noise measurement a site would otherwise script.

    python bench/check.py [--reps 5]

Runs in a temporary database and lock directory, with a 5 s reference taken first."""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

QC = [sys.executable, "-m", "quietcore"]
TARGET_S = 10.0


def timed(argv: list[str], env: dict[str, str], ok: tuple[int, ...] = (0,)) -> float:
    t = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if proc.returncode not in ok:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return time.perf_counter() - t


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        (where / "state").mkdir(mode=0o755)
        (where / "metrics").mkdir()
        env = {**os.environ, "QUIETCORE_DB": str(where / "r.db"), "QUIETCORE_STATE_DIR": str(where / "state")}
        cpus = ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))
        timed([*QC, "noise", "--cpus", cpus, "--duration", "5", "--trace", "off"], env)
        timed([*QC, "reference", "set", "1"], env)
        check = [*QC, "check", "--prometheus", str(where / "metrics")]
        oslat = shutil.which("oslat")
        ours, second, peer = [], [], []
        for _ in range(args.reps):  # interleaved: the host's noise falls on both alike
            ours.append(timed(check, env, ok=(0, 1)))
            second.append(timed([*check, "--duration", "1"], env, ok=(0, 1)))
            if oslat:
                peer.append(timed([oslat, "--cpu-list", cpus, "--duration", "1"], env))
    mine = statistics.median(ours)
    met = mine <= TARGET_S
    print(f"{'check, default 0.5 s, start-up to metrics file':<48} {mine:6.2f} s (target <= {TARGET_S:g} s) "
          f"{'PASS' if met else 'MISS'}")  # fmt: skip
    one = statistics.median(second)
    ratio = f"{one / statistics.median(peer):4.2f}x oslat -D 1" if peer else "(no oslat: apt-get install rt-tests)"
    print(f"{'check --duration 1, the same':<48} {one:6.2f} s {ratio}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
