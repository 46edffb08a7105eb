"""quietcore-probe stream's triad beside STREAM's own (McCalpin's method:
static arrays, the triad loop, the best of 5 passes, built here with -O3),
the same array size on the same CPU, alternating, 3 pairs; and beside
likwid-bench -t triad when likwid is installed.

    python bench/stream.py [--cpu N] [--size BYTES]

Target (issue 11): quietcore >= 0.95x of the peer."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
from quietcore.probes.runner import probe_path

STREAM_C = r"""
#include <stdio.h>
#include <time.h>
static double a[N], b[N], c[N];
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(void) {
    for (long i = 0; i < N; i++) { a[i] = 0; b[i] = 1.0; c[i] = 2.0; }
    double best = 1e30, s = 3.0;
    for (int p = 0; p < 5; p++) {
        double t0 = now();
        for (long i = 0; i < N; i++) a[i] = b[i] + s * c[i];
        double t = now() - t0;
        if (t < best) best = t;
    }
    if (a[N / 3] != 7.0) return 1;
    printf("%.4f\n", 3.0 * 8.0 * N / best / 1e9);
    return 0;
}
"""
TARGET = 0.95


def build_stream(size: int, where: Path) -> Path:
    source, exe = where / "stream.c", where / "stream"
    source.write_text(STREAM_C)
    subprocess.run(["cc", "-O3", f"-DN={size // 8}", "-o", str(exe), str(source)], check=True)
    return exe


def quietcore(cpu: int, size: int) -> float:
    out = subprocess.run([str(probe_path()), "stream", "--cpus", str(cpu), "--size", str(size)],
                         capture_output=True, text=True, check=True)  # fmt: skip
    return float(json.loads(out.stdout)["result"]["metric"]["value"])


def peer(exe: Path, cpu: int) -> float:
    out = subprocess.run(["taskset", "-c", str(cpu), str(exe)], capture_output=True, text=True, check=True)
    return float(out.stdout)


def likwid(cpu: int, size: int) -> float | None:
    if not shutil.which("likwid-bench"):
        return None
    out = subprocess.run(["likwid-bench", "-t", "triad", "-w", f"S0:{size * 3 // 1024}kB:1", "-C", str(cpu)],
                         capture_output=True, text=True, check=False)  # fmt: skip
    for line in out.stdout.splitlines():
        if line.startswith("MByte/s:"):
            return float(line.split()[1]) / 1000
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", type=int, default=max(os.sched_getaffinity(0)))
    parser.add_argument("--size", type=int, default=64 << 20, help="bytes per array (default 64 MiB)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        exe = build_stream(args.size, Path(tmp))
        ours, theirs = [], []
        for _ in range(3):  # alternating, so drift on the host lands on both
            ours.append(quietcore(args.cpu, args.size))
            theirs.append(peer(exe, args.cpu))
    q, s = statistics.median(ours), statistics.median(theirs)
    ratio = q / s
    print(f"triad, {args.size >> 20} MiB arrays, CPU {args.cpu}, median of 3 alternating pairs")
    print(f"  quietcore-probe stream  {q:6.2f} GB/s  ({', '.join(f'{v:.2f}' for v in ours)})")
    print(f"  STREAM method, cc -O3   {s:6.2f} GB/s  ({', '.join(f'{v:.2f}' for v in theirs)})")
    print(f"  ratio {ratio:.3f} (target >= {TARGET}) {'PASS' if ratio >= TARGET else 'MISS'}")
    lk = likwid(args.cpu, args.size)
    print(f"  likwid-bench -t triad   {lk:6.2f} GB/s, ratio {q / lk:.3f}" if lk else "  likwid-bench: not installed")
    return 0 if ratio >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
