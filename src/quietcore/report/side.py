"""The figures several tools measure alike, set side by side per CPU across
two sessions: quietcore noise's longest gap beside oslat's max or rtla
osnoise's longest single noise, quietcore latency beside cyclictest. Apart
from crosscheck, which the report's builder loads: this module reads every
run kind."""

from __future__ import annotations

import sqlite3
from typing import Any

from quietcore.report.kinds import kind_of
from quietcore.report.kinds.base import FIGURES
from quietcore.runs.model import SessionRecord
from quietcore.store import sessions


def cpu_figures(conn: sqlite3.Connection, session_id: int) -> dict[tuple[int, str], tuple[float, str]]:
    """(CPU, figure) -> (value, the kind of run that gave it): the figures several
    tools measure alike (kinds.base.FIGURES), the session's last run of each."""
    out: dict[tuple[int, str], tuple[float, str]] = {}
    for run in sessions.runs_of(conn, session_id):
        if run.is_cell or run.status != "complete":
            continue
        for cpu, figures in kind_of(run).figures(run).items():
            for name, value in figures.items():
                out[(cpu, name)] = (value, run.kind)
    return out


def figure_rows(conn: sqlite3.Connection, a: SessionRecord, b: SessionRecord) -> list[dict[str, Any]]:
    fa, fb = cpu_figures(conn, a.id), cpu_figures(conn, b.id)
    order = {name: i for i, name in enumerate(FIGURES)}
    common = sorted(set(fa) & set(fb), key=lambda k: (k[0], order.get(k[1], len(order))))
    return [{"cpu": cpu, "figure": name, "a": fa[(cpu, name)][0], "a_from": fa[(cpu, name)][1],
             "b": fb[(cpu, name)][0], "b_from": fb[(cpu, name)][1]} for cpu, name in common]  # fmt: skip
