"""quietcore on nodes of many CPUs, from real traces: a fresh noise run of
this node's CPUs (or the traces of a directory given), replicated to 16,
64 and 384 CPUs with a phase shift each and two planted outliers (the CPU
at a quarter with an extra 100 Hz x 200 us source, the CPU at two thirds
with every gap twice as long), then `results import --from trace`,
`results analyse`, `results show` and `report` on each, as a user runs
them (`python -m quietcore`).

    python bench/manycpu.py [--cpus 16,64,384] [--seconds 10] [--traces DIR]

Printed per size: wall and CPU time of each command, their peak RSS, the
database's bytes per event, lines of `results show`, and whether each
planted outlier was named (and nothing else). Targets (issue 33): a
384-CPU x 30 s trace analysed in 15 s or less here (scaled: 0.5 s per
CPU-minute), at most 60 lines plus one per outlier, the report in 5 s and
5 MB, 16 bytes per event in the database."""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

LINES, REPORT_S, REPORT_MB, BYTES_PER_EVENT = 60, 5.0, 5.0, 16.0


def qc(env: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess[str], float, float, float]:
    """(the process, wall s, CPU s, peak RSS MB) of `python -m quietcore ARGS`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "quietcore", *args], env=env, capture_output=True, text=True,
                          check=False)  # fmt: skip
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode:
        sys.exit(f"quietcore {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc, wall, cpu, after.ru_maxrss / 1024


def templates(env: dict[str, str], where: Path, seconds: float, given: Path | None) -> tuple[list[Path], float]:
    """Per-CPU traces to replicate: the directory given, or a fresh run of every CPU here."""
    if given is not None:
        files = sorted(given.glob("*.trace"))
        span = max(float(np.loadtxt(f, delimiter="\t", ndmin=2)[:, :2].sum(axis=1).max()) for f in files)
        return files, span
    cpus = ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))
    qc(env, "noise", "--cpus", cpus, "--duration", str(seconds), "--trace", "off")
    out = where / "measured"
    qc(env, "results", "export", "last", "--format", "trace", "--out", str(out))
    return sorted(out.glob("*.trace")), seconds * 1e9


def replicate(files: list[Path], cpus: int, span: float, out: Path) -> dict[int, str]:
    """`cpus` traces from the templates, phase-shifted; the planted outliers, by CPU."""
    out.mkdir()
    planted = {cpus // 4: "source", 2 * cpus // 3: "loss"}
    pairs = [np.loadtxt(f, dtype=np.float64, delimiter="\t", ndmin=2) for f in files]
    for cpu in range(cpus):
        p = pairs[cpu % len(pairs)]
        starts = np.mod(p[:, 0] + cpu * 1_234_567.0, span - 50e6)
        lengths = p[:, 1] * (2 if planted.get(cpu) == "loss" else 1)
        if planted.get(cpu) == "source":
            extra = np.arange(3e6, span - 50e6, 10e6)
            starts, lengths = np.concatenate([starts, extra]), np.concatenate([lengths, np.full(extra.size, 200e3)])
        order = np.argsort(starts)
        np.savetxt(out / f"bench-rank0-cpu{cpu}.trace", np.column_stack([starts[order], lengths[order]]),
                   fmt="%.0f", delimiter="\t")  # fmt: skip
    return planted


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpus", default="16,64,384")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--traces", type=Path, help="a directory of HOST-rankR-cpuC.trace files to replicate")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="qc-manycpu-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as d:
        where = Path(d)
        (where / "state").mkdir(mode=0o700)
        env = {**os.environ, "QUIETCORE_DB": str(where / "results.db"), "QUIETCORE_STATE_DIR": str(where / "state")}
        files, span = templates(env, where, args.seconds, args.traces)
        print(f"templates: {len(files)} CPU trace(s) of {span / 1e9:g} s")
        for n in (int(x) for x in args.cpus.split(",")):
            db = where / f"db-{n}.db"
            envn = {**env, "QUIETCORE_DB": str(db)}
            planted = replicate(files, n, span, where / f"cpus-{n}")
            events = sum(f.read_bytes().count(b"\n") for f in (where / f"cpus-{n}").iterdir())
            _, iw, ic, im = qc(envn, "results", "import", "--from", "trace", str(where / f"cpus-{n}"), "--duration",
                               f"{span / 1e9:g}")  # fmt: skip
            _, aw, ac, am = qc(envn, "results", "analyse", "1")
            shown, sw, sc, sm = qc(envn, "results", "show", "1")
            _, rw, rc, rm = qc(envn, "report", "1", "--out", str(where / f"report-{n}"), "--force")
            said = shown.stdout.splitlines()
            odd = {int(line.split()[1].rstrip(":")) for line in said if ": outlier:" in line}
            lines_ok = len(said) <= LINES + len(odd)
            report_mb = sum(f.stat().st_size for f in (where / f"report-{n}").rglob("*") if f.is_file()) / 2**20
            per_event = db.stat().st_size / max(events, 1)
            cpu_minutes = n * span / 60e9
            print(f"\n{n} CPUs, {events:,} events over {span / 1e9:g} s:")
            print(f"  import   {iw:6.2f} s wall  {ic:6.2f} s CPU  {im:6.0f} MB  "
                  f"({ic / cpu_minutes:.2f} s CPU per CPU-minute; target 0.5)")  # fmt: skip
            print(f"  analyse  {aw:6.2f} s wall  {ac:6.2f} s CPU  {am:6.0f} MB")
            print(f"  show     {sw:6.2f} s wall  {sc:6.2f} s CPU  {sm:6.0f} MB  {len(said)} lines "
                  f"({'PASS' if lines_ok else 'MISS'}: at most {LINES} + one per outlier)")  # fmt: skip
            print(f"  report   {rw:6.2f} s wall  {rc:6.2f} s CPU  {rm:6.0f} MB  {report_mb:.1f} MB written "
                  f"({'PASS' if rw <= REPORT_S and report_mb <= REPORT_MB else 'MISS'}: {REPORT_S:g} s, "
                  f"{REPORT_MB:g} MB)")  # fmt: skip
            print(f"  database {per_event:.0f} bytes per event "
                  f"({'PASS' if per_event <= BYTES_PER_EVENT else 'MISS'}: {BYTES_PER_EVENT:g})")  # fmt: skip
            named = set(planted) <= odd
            print(f"  outliers planted {sorted(planted)}, named {sorted(odd)} "
                  f"({'PASS' if named and odd == set(planted) else 'MISS'})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
