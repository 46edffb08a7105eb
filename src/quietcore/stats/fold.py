"""The fold's per-gap loops in C (native/fold.c, built and installed beside
the probe, in quietcore/lib), for periodicity's fits: each one pass over a
CPU's gaps where numpy made six to eight, with a temporary of the run's
length each (the gaps near a line, a fit's members, each gap's window and
phase bin), and each window's densest stretch of phase bins. A fit on
65,000 gaps took about 2 ms, most of it in those passes, and a scout fits
some sixty times.

Each function gives the same bits as periodicity's numpy code, which stays
the reference (tests/unit/test_fold.py holds them equal on real traces) and
what runs where the library is not there: None from a function here means
"use numpy". The library is only ever the package's own file, never a path
from the environment: quietcore runs as root."""

from __future__ import annotations

import ctypes
from functools import cache
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

#: The library, where the build installs it inside the package.
LIBRARY = Path(__file__).resolve().parent.parent / "lib" / "libquietcore-fold.so"
#: False: numpy's loops, as without the library (the tests compare the two).
NATIVE = True

# Arrays go as their addresses (void *): data_as() cost 2 µs a pointer, some 15 µs a call of five. An address
# keeps no array alive, so every array passed is held by a name until the call returns.
_double_p = _int64_p = _int32_p = _uint8_p = ctypes.c_void_p


@cache
def _lib() -> ctypes.CDLL | None:
    if not LIBRARY.is_file():
        return None
    try:
        lib = ctypes.CDLL(str(LIBRARY))
    except OSError:  # not loadable here (another machine's build, a mount without exec): numpy's loops, same bits
        return None
    lib.qc_near_line.restype = ctypes.c_ssize_t
    lib.qc_near_line.argtypes = (_double_p, ctypes.c_ssize_t, ctypes.c_double, ctypes.c_double, ctypes.c_double,
                                 _int64_p, _double_p, _uint8_p)  # fmt: skip
    lib.qc_phase_counts.restype = ctypes.c_int
    lib.qc_phase_counts.argtypes = (_double_p, _double_p, _int64_p, ctypes.c_ssize_t, ctypes.c_double,
                                    ctypes.c_int64, ctypes.c_int64, _int32_p, _double_p)  # fmt: skip
    lib.qc_windows.restype = None
    lib.qc_windows.argtypes = (_double_p, ctypes.c_ssize_t, ctypes.c_double, ctypes.c_int64, _int64_p)
    lib.qc_densest.restype = ctypes.c_int
    lib.qc_densest.argtypes = (_double_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, _int64_p)
    lib.qc_members.restype = ctypes.c_ssize_t
    lib.qc_members.argtypes = (_double_p, _int64_p, _double_p, ctypes.c_int64, ctypes.c_ssize_t, ctypes.c_double,
                               ctypes.c_double, _int64_p, _double_p, _uint8_p)  # fmt: skip
    return lib


def available() -> bool:
    """Whether the fits run the C loops (the library is installed and not switched off)."""
    return NATIVE and _lib() is not None


def _doubles(a: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.ascontiguousarray(a, dtype=np.float64)


def _ints(a: NDArray[np.int64]) -> NDArray[np.int64]:
    return np.ascontiguousarray(a, dtype=np.int64)


def near_line(
    starts: NDArray[np.float64], center: float, period: float, tol: float
) -> tuple[NDArray[np.int64], NDArray[np.float64]] | None:
    """The gaps within tol of center + n * period: their indices and their n."""
    lib = _lib() if NATIVE else None
    if lib is None:
        return None
    s = _doubles(starts)
    idx = np.empty(len(s), dtype=np.int64)
    counts = np.empty(len(s))
    scratch = np.empty(len(s), dtype=np.uint8)  # held here: an address keeps no array alive
    k = lib.qc_near_line(s.ctypes.data, len(s), center, period, tol, idx.ctypes.data, counts.ctypes.data,
                         scratch.ctypes.data)  # fmt: skip
    return idx[:k], counts[:k]


def windows(starts: NDArray[np.float64], span: float, count: int) -> NDArray[np.int64] | None:
    """Each start's window of `count` splitting [0, span) evenly (the starts are in [0, span))."""
    if count < 1:
        raise ValueError(f"{count} windows")
    lib = _lib() if NATIVE else None
    if lib is None:
        return None
    s = _doubles(starts)
    w = np.empty(len(s), dtype=np.int64)
    lib.qc_windows(s.ctypes.data, len(s), span / count, count, w.ctypes.data)
    return w


def phase_counts(
    starts: NDArray[np.float64], strength: NDArray[np.float64], w: NDArray[np.int64] | None, period: float,
    bins: int, rows: int,
) -> NDArray[np.float64] | None:  # fmt: skip
    """Each row's (window's) strength in each of `bins` phase bins of the period (w None: one row)."""
    lib = _lib() if NATIVE else None
    if lib is None:
        return None
    s, g = _doubles(starts), _doubles(strength)
    counts = np.zeros(rows * bins)
    windows = None if w is None else _ints(w)
    if len(g) != len(s) or (windows is not None and len(windows) != len(s)):
        raise ValueError("starts, strengths and windows differ in length")
    scratch = np.empty(len(s), dtype=np.int32)
    if lib.qc_phase_counts(s.ctypes.data, g.ctypes.data, None if windows is None else windows.ctypes.data, len(s),
                           period, bins, rows, scratch.ctypes.data, counts.ctypes.data):  # fmt: skip
        raise ValueError("a window past the rows, or a start that is no number")
    return counts.reshape(rows, bins)


def densest(counts: NDArray[np.float64], steps: int) -> NDArray[np.int64] | None:
    """Each row's first bin of its largest circular stretch of `steps` bins
    (periodicity._densest_bins: its sums, its argmax)."""
    lib = _lib() if NATIVE else None
    if lib is None:
        return None
    c = _doubles(counts)
    if c.ndim != 2:
        raise ValueError("counts must be rows x bins")
    rows, bins = c.shape
    best = np.empty(rows, dtype=np.int64)
    if lib.qc_densest(c.ctypes.data, rows, bins, steps, best.ctypes.data):
        raise ValueError(f"a stretch of {steps} bins in rows of {bins}")
    return best


def members(
    starts: NDArray[np.float64], w: NDArray[np.int64], local: NDArray[np.float64], period: float, tol: float
) -> tuple[NDArray[np.int64], NDArray[np.float64]] | None:
    """periodicity._members with each window's phase local[w]: the members' indices, ascending, and their
    residuals."""
    lib = _lib() if NATIVE else None
    if lib is None:
        return None
    s, windows, phases = _doubles(starts), _ints(w), _doubles(local)
    if len(windows) != len(s):
        raise ValueError("starts and windows differ in length")
    found = np.empty(len(s), dtype=np.int64)
    residual = np.empty(len(s))
    scratch = np.empty(len(s), dtype=np.uint8)
    k = lib.qc_members(s.ctypes.data, windows.ctypes.data, phases.ctypes.data, len(phases), len(s), period, tol,
                       found.ctypes.data, residual.ctypes.data, scratch.ctypes.data)  # fmt: skip
    if k < 0:
        raise ValueError("a window past the phases given")
    return found[:k], residual[:k]
