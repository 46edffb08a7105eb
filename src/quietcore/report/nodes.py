"""Per-node exports of a session's noise runs, in the formats the
cluster-noise tools read:
- `trace`: one file per node and CPU of `start_ns<TAB>duration_ns` lines,
  the trace format of netgauge's noise mode and of LogGOPSim's
  `--noise-trace` (times from the start of that CPU's measurement);
- `psnap`: PSNAP-style histograms, one line per 1 µs bin of gap length
  that has gaps: `rank bin_us count host`.
A run of a survey is named by its host and rank; another noise run by the
session's host and rank 0."""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

import numpy as np
import numpy.typing as npt

from quietcore import outputs
from quietcore.errors import UsageError
from quietcore.runs.model import Run, SessionRecord
from quietcore.safe import ident, write_atomic
from quietcore.store import sessions


def _noise_runs(conn: sqlite3.Connection, row: SessionRecord) -> list[tuple[str, int, Run]]:
    out = []
    for run in sessions.runs_of(conn, row.id):
        if run.kind != "noise" or run.trace is None:
            continue
        place = run.params.get("survey") or {}
        out.append((str(place.get("host", row.host)), int(place.get("rank", 0)), run))
    if not out:
        raise UsageError(f"session {row.id} has no noise runs to export as node traces (valid: a noise, lab or "
                         "survey session)")  # fmt: skip
    return out


def trace_text(starts: npt.NDArray[np.float64], durations: npt.NDArray[np.float64]) -> str:
    """`start_ns<TAB>duration_ns` lines, one gap each."""
    return "".join(f"{s:.0f}\t{d:.0f}\n" for s, d in zip(starts.tolist(), durations.tolist(), strict=True))


def write_traces(conn: sqlite3.Connection, row: SessionRecord, out: Path, force: bool) -> list[Path]:
    """Into directory `out`: HOST-rankR-cpuC.trace per node and CPU."""
    runs = _noise_runs(conn, row)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file: --format trace writes a directory of traces (valid: a directory)")
    out = outputs.directory(out, "--out")
    written = []
    for host, rank, run in runs:
        assert run.trace is not None
        for cpu in run.trace.cpus:
            path = out / f"{ident(host)}-rank{rank}-cpu{cpu.cpu}.trace"  # the host is stored text
            if path.exists() and not force:
                raise UsageError(f"{path} exists, will not overwrite without --force")
            write_atomic(path, trace_text(cpu.start_ns - cpu.span_start_ns, cpu.duration_ns))
            written.append(path)
    return written


def psnap(conn: sqlite3.Connection, row: SessionRecord) -> str:
    lines = []
    for host, rank, run in _noise_runs(conn, row):
        assert run.trace is not None
        bins: Counter[int] = Counter()
        for cpu in run.trace.cpus:
            bins.update((cpu.duration_ns // 1000).astype(int).tolist())
        lines += [f"{rank} {b} {n} {host}" for b, n in sorted(bins.items())]
    return "\n".join(lines) + "\n"
