"""Two sides' noise, CPU by CPU, each side one session or several of one
configuration: B's lost time against A's, with an interval, a test and a
verdict, and the periodic sources that changed.

The unit is the session (stats.sessions). Each gives its median 100 ms
window (fleet.baseline: a window's lost ratio, its longest gap left out, so
that one stall of a vCPU by its host moves no window's middle). The shift is
B's mean of those less A's, tested by Student t against the spread of
repeated sessions: pooled over A's, B's and up to HISTORY earlier sessions
of either's configuration. Holm adjusts over the CPUs. B is noisier or
quieter only when the adjusted p is under alpha and the interval leaves out
zero, and slightly so when the shift is under 0.1 % of the CPU. Windows
tested as samples called 5 of 10 A/A comparisons different here. Sources:
B's periodic sources A lacks, or has at less than B's cost by over a tenth
of a percent of the CPU, and A's that B lacks (the sides' latest sessions)."""

from __future__ import annotations

import sqlite3
from typing import Any

import numpy as np

from quietcore.fleet.baseline import cpu_noise
from quietcore.fleet.verdict import known_sources, new_sources
from quietcore.report.account import Account, of_run
from quietcore.runs.model import SessionRecord
from quietcore.runs.reference import CpuNoise
from quietcore.stats.compare import holm
from quietcore.stats.said import lost_pct as pct
from quietcore.stats.sessions import session_shift, shown
from quietcore.store import sessions

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


#: Earlier sessions of a side's configuration read for the spread of repeated runs: the latest this many.
HISTORY = 20


def _history(conn: sqlite3.Connection, groups: list[list[SessionRecord]]) -> list[tuple[str, dict[int, CpuNoise]]]:
    """The latest sessions of the sides' configurations (their fingerprints) that neither side holds, each
    one's noise per CPU: the node's run-to-run spread for those configurations."""
    mine = {r.id for g in groups for r in g}
    prints = {r.fingerprint for g in groups for r in g} - {"imported"}
    every = sessions.list_sessions(conn) if prints else []
    out = []
    for fingerprint in sorted(prints):
        for row in [r for r in every if r.fingerprint == fingerprint and r.id not in mine][-HISTORY:]:
            noise = _noise(conn, row)[0]
            if noise:
                out.append((fingerprint, noise))
    return out


def compare_noise(conn: sqlite3.Connection, a: SessionRecord | list[SessionRecord],
                  b: SessionRecord | list[SessionRecord]) -> list[dict[str, Any]]:  # fmt: skip
    """A row per CPU both sides measured, each side one session or several of one configuration. The
    session is the unit (stats.sessions): each gives its median 100 ms window, and B's mean of those less
    A's is tested against the spread of repeated sessions, pooled over A's, B's and earlier sessions of
    either's configuration (Student t, Holm over the CPUs). With one session a side and no earlier
    session, no spread is known and no verdict given. Sources changed: between the two sides' latest."""
    side_a = a if isinstance(a, list) else [a]
    side_b = b if isinstance(b, list) else [b]
    read_a = [_noise(conn, r) for r in side_a]
    read_b = [_noise(conn, r) for r in side_b]
    (na, aa), (nb, ab) = read_a[-1], read_b[-1]
    history = _history(conn, [side_a, side_b])

    def values(reads: list[tuple[dict[int, CpuNoise], dict[int, Account]]], cpu: int) -> list[float]:
        return [float(np.median(n[cpu].windows)) for n, _ in reads if cpu in n and n[cpu].windows]

    common = [cpu for cpu in sorted(set(na) & set(nb)) if na[cpu].windows and nb[cpu].windows]
    judged = []
    for cpu in common:
        others: dict[str, list[float]] = {}
        for fingerprint, n in history:
            if cpu in n and n[cpu].windows:
                others.setdefault(fingerprint, []).append(float(np.median(n[cpu].windows)))
        judged.append(session_shift(values(read_a, cpu), values(read_b, cpu), list(others.values())))
    known = [(i, j.p) for i, j in enumerate(judged) if j.p is not None]
    adjusted: list[float | None] = [None] * len(judged)
    for (i, _), corrected in zip(known, holm([q for _, q in known]) if known else [], strict=True):
        adjusted[i] = corrected
    rows = []
    for cpu, j, p in zip(common, judged, adjusted, strict=True):
        if shown(j, p):
            verdict = "B noisier" if j.shift > 0 else "B quieter"
            if abs(j.shift) < SLIGHT:
                verdict += f", slightly (under {SLIGHT:.1%} of the CPU)"
        elif j.known and j.p is None:
            verdict = "no verdict: the repeated runs do not vary"
        elif j.known:
            verdict = "no difference shown"  # within the spread of repeated runs
        else:
            verdict = "no verdict: no repeated runs"
        new = _changed(nb[cpu], na[cpu], "new in B", "dearer in B")
        gone = _changed(na[cpu], nb[cpu], "gone in B", "cheaper in B")
        top = _top(ab.get(cpu))
        if top is not None:
            top["a_share"] = _share_of(aa.get(cpu), top["name"])
        lost_a = [n[cpu].lost_ratio for n, _ in read_a if cpu in n]
        lost_b = [n[cpu].lost_ratio for n, _ in read_b if cpu in n]
        rows.append({
            "cpu": cpu, "a": float(np.mean(values(read_a, cpu))), "b": float(np.mean(values(read_b, cpu))),
            "a_lost": float(np.mean(lost_a)), "b_lost": float(np.mean(lost_b)),
            "a_sessions": j.sessions_a, "b_sessions": j.sessions_b,
            "a_windows": sum(len(n[cpu].windows) for n, _ in read_a if cpu in n),
            "b_windows": sum(len(n[cpu].windows) for n, _ in read_b if cpu in n),
            "shift": j.shift, "ci_low": j.low, "ci_high": j.high, "p_adjusted": p, "spread": j.spread,
            "spread_df": j.df, "needed": j.needed, "verdict": verdict, "sources": new + gone, "b_top": top,
        })  # fmt: skip
    return rows
