"""Two sessions' noise, CPU by CPU: B's lost time against A's, with an
interval, a test and a verdict, and the periodic sources that changed.

The unit is the 100 ms window that `check` tests (fleet.baseline: each
window's lost ratio, its longest gap left out, so that one stall of a vCPU
by its host moves no window's middle). The shift is B's median window less
A's, with a seeded percentile bootstrap interval over each side's windows;
the test is two-sided Mann-Whitney U, Holm-adjusted over the CPUs; B is
noisier or quieter only when the adjusted p is under alpha and the interval
leaves out zero, and slightly so when the shift is under 0.1 % of the CPU.
Sources: B's periodic sources A lacks, or has at less than B's cost by
over a tenth of a percent of the CPU, and A's that B lacks."""

from __future__ import annotations

import sqlite3
from typing import Any

import numpy as np

from quietcore.fleet.baseline import cpu_noise
from quietcore.fleet.verdict import known_sources, new_sources
from quietcore.report.account import Account, of_run
from quietcore.runs.model import SessionRecord
from quietcore.runs.reference import CpuNoise
from quietcore.stats.bootstrap import SEED
from quietcore.stats.compare import ALPHA, holm
from quietcore.stats.rank import mann_whitney
from quietcore.stats.said import lost_pct as pct
from quietcore.store import sessions

RESAMPLES = 2000
#: A shift under this share of the CPU is said to be slight, however sure the test is of it.
SLIGHT = 0.001
#: A source is "changed" when its cost moved by more than this share of the CPU.
SOURCE_TOLERANCE = 0.001
#: A source new or gone is said from this share of the CPU (10 µs a second): the GPU node's sessions had
#: "new in B: 1.5 Hz x 0.685 µs (0.00011 % of the CPU)" beside its host timer's change; a daemon's 20 Hz
#: x 33 µs (0.065 %) is told.
SOURCE_FLOOR = 1e-5


def _noise(conn: sqlite3.Connection, row: SessionRecord) -> tuple[dict[int, CpuNoise], dict[int, Account]]:
    """Each CPU's noise in a session's spin-mode noise runs (the last run of a CPU, where several), and its
    account of where the lost time went."""
    out: dict[int, CpuNoise] = {}
    accounts: dict[int, Account] = {}
    for run in sessions.runs_of(conn, row.id):
        if run.kind == "noise" and run.trace is not None:
            out.update({c.cpu: c for c in cpu_noise(run)})
            accounts.update(of_run(run))
    return out, accounts


def _top(account: Account | None) -> dict[str, Any] | None:
    """The account's costliest named row (its rest aside): what took most of the CPU's lost time."""
    if account is None or not account.rows:
        return None
    row = max(account.rows, key=lambda r: r.ns)
    return {"name": row.name, "share": account.share(row)}


def _share_of(account: Account | None, name: str) -> float | None:
    row = next((r for r in account.rows if r.name == name), None) if account is not None else None
    return account.share(row) if account is not None and row is not None else None


def _median_shift_ci(a: np.ndarray, b: np.ndarray, seed: int) -> tuple[float, float]:
    """The 95 % percentile interval of median(B) - median(A), each side resampled."""
    rng = np.random.default_rng(seed)
    ma = np.median(a[rng.integers(0, a.size, size=(RESAMPLES, a.size))], axis=1)
    mb = np.median(b[rng.integers(0, b.size, size=(RESAMPLES, b.size))], axis=1)
    low, high = np.percentile(mb - ma, [2.5, 97.5])
    return float(low), float(high)


def _changed(one: CpuNoise, other: CpuNoise, missing: str, costlier: str) -> list[dict[str, Any]]:
    """`one`'s periodic sources `other` lacks (`missing`), or has at their rate for less of the CPU
    (`costlier`), with what they cost in each: the GPU node's host timer at 1 kHz, on every CPU of two
    sessions, was "new in B" on seven of twelve where it went from 0.6 % of a CPU to 0.91 % on CPU 5."""
    out = []
    for s in new_sources(one, other, SOURCE_TOLERANCE):
        known = known_sources(s, other)
        # of a length like its own (as the screen tells one source on two CPUs): a planted 100 Hz x 241 µs beside
        # this VM's host timer at 100 Hz x 17 µs is a source new in B, not the host's timer dearer
        if any(r.alike(s) for r in known):
            out.append({"change": costlier, "hz": s.frequency_hz, "label": s.label(), "here": s.lost_ratio,
                        "there": sum(r.lost_ratio for r in known)})  # fmt: skip
        elif s.lost_ratio >= SOURCE_FLOOR:
            out.append({"change": missing, "hz": s.frequency_hz, "label": s.label(), "here": s.lost_ratio,
                        "there": None})  # fmt: skip
    return out


def change_words(c: dict[str, Any]) -> str:
    """A periodic source that changed, as the table says it: "new in B: 100 Hz x 228 µs, 2.3% of the CPU"."""
    if c["there"] is None:
        return f"{c['change']}: {c['label']}, {pct(c['here'])} of the CPU"
    side, other = ("B", "A") if c["change"].endswith("in B") and c["change"].startswith("dearer") else ("A", "B")
    return f"{c['change']}: {c['label']}, {pct(c['here'])} of the CPU in {side}, {pct(c['there'])} in {other}"


def compare_noise(conn: sqlite3.Connection, a: SessionRecord, b: SessionRecord) -> list[dict[str, Any]]:
    """A row per CPU both sessions measured: A's and B's median window, the
    shift with its interval, p (Holm over the CPUs), the verdict, and the
    sources that changed. Empty when they share no measured CPU."""
    (na, aa), (nb, ab) = _noise(conn, a), _noise(conn, b)
    common = [cpu for cpu in sorted(set(na) & set(nb)) if len(na[cpu].windows) >= 2 and len(nb[cpu].windows) >= 2]
    raw = [mann_whitney(nb[cpu].windows, na[cpu].windows)[1] for cpu in common]
    adjusted = holm(raw) if raw else []
    rows = []
    for cpu, p in zip(common, adjusted, strict=True):
        wa, wb = np.asarray(na[cpu].windows, dtype=float), np.asarray(nb[cpu].windows, dtype=float)
        shift = float(np.median(wb) - np.median(wa))
        low, high = _median_shift_ci(wa, wb, SEED + cpu)
        if p < ALPHA and (low > 0 or high < 0):
            verdict = "B noisier" if low > 0 else "B quieter"
            if abs(shift) < SLIGHT:
                verdict += f", slightly (under {SLIGHT:.1%} of the CPU)"
        else:
            verdict = "no difference shown"
        new = _changed(nb[cpu], na[cpu], "new in B", "dearer in B")
        gone = _changed(na[cpu], nb[cpu], "gone in B", "cheaper in B")
        top = _top(ab.get(cpu))
        if top is not None:
            top["a_share"] = _share_of(aa.get(cpu), top["name"])
        rows.append({
            "cpu": cpu, "a": float(np.median(wa)), "b": float(np.median(wb)), "a_lost": na[cpu].lost_ratio,
            "b_lost": nb[cpu].lost_ratio, "a_windows": int(wa.size),
            "b_windows": int(wb.size), "shift": shift, "ci_low": low, "ci_high": high, "p_adjusted": p,
            "verdict": verdict, "sources": new + gone, "b_top": top,
        })  # fmt: skip
    return rows
