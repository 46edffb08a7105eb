"""A directory of noise traces, one file a node and CPU, as `results export
--format trace` writes them and netgauge's and LogGOPSim's noise traces
are: HOST-rankR-cpuC.trace, a line `start_ns<TAB>duration_ns` a gap, the
start from the CPU's measured span's beginning. Read whole or refused with
the file and line named: nothing half-read is stored. Each file is read
within its bounds (inputs.trace_kind: a line of 64 bytes at most, and a
size the measurement it says it is could have).

The span of every CPU is one: --duration S, or else the latest end of any
gap in any file (the format does not carry it); a gap that ends after
--duration is refused. The gaps' lost time is their length (the format
carries no loop period)."""

from __future__ import annotations

import multiprocessing as mp
import os
import re
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import numpy.typing as npt

from quietcore import inputs
from quietcore.errors import UsageError

NAME = re.compile(r"^(?P<host>.+)-rank(?P<rank>\d+)-cpu(?P<cpu>\d+)\.trace$")
#: Bounds of what is read: files, and gaps in all (18 million lines read in seconds, not minutes).
MAX_FILES = 100_000
MAX_GAPS = 100_000_000


@dataclass(frozen=True)
class CpuGaps:
    host: str
    rank: int
    cpu: int
    starts: npt.NDArray[np.float64]
    durations: npt.NDArray[np.float64]


def _bad(path: Path, why: str) -> UsageError:
    return UsageError(f"invalid trace {path}: {why}; nothing imported")


def read_one(path: Path, host: str, rank: int, cpu: int, kind: inputs.Kind = inputs.TRACE) -> CpuGaps:
    """One file's gaps, checked: two non-negative numbers a line, starts ascending. Read in chunks within the
    kind's bounds (inputs.trace_kind), each parsed as it comes: a file of one endless line is refused at its
    64th byte, and what is held is the chunk and 16 bytes a gap."""
    parts, line, blank = [], 1, True
    for piece in inputs.chunks(path, kind, "invalid trace"):
        blank = blank and not piece.strip()
        if not piece.strip():
            line += piece.count(b"\n")
            continue
        values = _integers(piece)
        if values is None:
            try:
                values = np.loadtxt(piece.decode("ascii").splitlines(), dtype=np.float64, delimiter="\t", ndmin=2)
            except (ValueError, UnicodeDecodeError):
                raise _bad(path, f"line {line - 1 + _first_bad_line(piece)} is not start_ns<TAB>duration_ns") from None
        if values.shape[1] != 2:
            raise _bad(path, "not two columns (start_ns<TAB>duration_ns)")
        parts.append(values)
        line += piece.count(b"\n")
    if blank:
        raise _bad(path, "empty (a CPU with no gap over the threshold has one line or none: give its file a gap)")
    values = parts[0] if len(parts) == 1 else np.concatenate(parts)
    starts, durations = values[:, 0], values[:, 1]
    wrong = np.flatnonzero(~np.isfinite(values).all(axis=1) | (starts < 0) | (durations <= 0))
    if wrong.size:
        raise _bad(path, f"line {int(wrong[0]) + 1}: a start below 0 or a length not above 0")
    back = np.flatnonzero(np.diff(starts) < 0)
    if back.size:
        raise _bad(path, f"line {int(back[0]) + 2}: a gap that starts before the one above it")
    return CpuGaps(host, rank, cpu, np.ascontiguousarray(starts), np.ascontiguousarray(durations))


def _integers(raw: bytes) -> npt.NDArray[np.float64] | None:
    """The file's pairs when it is what `results export` writes, whole
    nanoseconds, a tab and a newline on every line (a token, a tab, a token
    a line: as many tabs as lines, twice as many tokens), parsed as integers:
    half numpy's loadtxt's time (34 ms against 68 for 83,000 lines). None
    for anything else (decimals, blank lines, a comment), which loadtxt
    reads, or refuses naming the line."""
    lines = raw.count(b"\n") + (not raw.endswith(b"\n"))
    tokens = raw.split()
    if raw.count(b"\t") != lines or len(tokens) != 2 * lines or b"_" in raw:  # int() takes 1_000, loadtxt not
        return None
    try:
        values = np.array(tokens, dtype=np.int64)
    except (ValueError, OverflowError):
        return None
    return values.astype(np.float64).reshape(-1, 2)


def _first_bad_line(raw: bytes) -> int:
    for number, line in enumerate(raw.decode("ascii", errors="replace").splitlines(), start=1):
        parts = line.split("\t")
        try:
            if len(parts) != 2:
                raise ValueError
            float(parts[0]), float(parts[1])
        except ValueError:
            return number
    return 1


#: Read the files in processes from this many on (parsing is the import's own cost: numpy's parser holds the GIL,
#: and 13 million lines took 4.6 s in one process here).
PARALLEL_FROM = 16


def _read_all(directory: Path, named: list[tuple[str, str, int, int]], kind: inputs.Kind) -> Iterator[CpuGaps]:
    """read_one of every file, in order: spread over a process a CPU here when
    there are many (forked; the first bad file's error is raised as it would
    be read in turn, and what is read ahead of it is bounded by the workers)."""
    workers = min(len(os.sched_getaffinity(0)), len(named))
    if len(named) < PARALLEL_FROM or workers < 2 or "fork" not in mp.get_all_start_methods():
        for entry, host, rank, cpu in named:
            yield read_one(directory / entry, host, rank, cpu, kind)
        return
    with ProcessPoolExecutor(workers, mp_context=mp.get_context("fork")) as pool:
        yield from pool.map(partial(read_one, kind=kind), [directory / e for e, *_ in named],
                            *zip(*[n[1:] for n in named], strict=True), chunksize=4)  # fmt: skip


def read_dir(directory: Path, duration_s: float | None) -> tuple[list[CpuGaps], float]:
    """Every trace of the directory, and the span (ns) they share."""
    if not directory.is_dir():
        raise UsageError(f"invalid --from trace {directory}: not a directory of HOST-rankR-cpuC.trace files")
    named = []
    for entry in sorted(os.listdir(directory)):
        m = NAME.match(entry)
        if m:
            named.append((entry, m["host"], int(m["rank"]), int(m["cpu"])))
        if len(named) > MAX_FILES:
            raise UsageError(f"invalid --from trace {directory}: over {MAX_FILES:,} trace files")
    if not named:
        raise UsageError(f"invalid --from trace {directory}: no HOST-rankR-cpuC.trace file in it")
    gaps, total = [], 0
    for one in _read_all(directory, named, inputs.trace_kind(duration_s)):
        total += one.starts.size
        if total > MAX_GAPS:
            raise UsageError(f"invalid --from trace {directory}: over {MAX_GAPS:,} gaps")
        gaps.append(one)
    ends = {g.cpu: float((g.starts + g.durations).max()) for g in gaps}
    if duration_s is None:
        return gaps, max(ends.values())
    span = duration_s * 1e9
    for g, (entry, *_) in zip(gaps, named, strict=True):
        over = np.flatnonzero(g.starts + g.durations > span)
        if over.size:
            raise _bad(directory / entry, f"line {int(over[0]) + 1}: a gap that ends after --duration {duration_s:g}")
    return gaps, span
