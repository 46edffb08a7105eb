"""Comparing two sessions: what changed in the node (the facts behind the
fingerprint), then every cell both sessions measured, B against A."""

from __future__ import annotations

import sqlite3
from dataclasses import asdict
from typing import Any

from quietcore.facts.fingerprint import changed
from quietcore.runs.model import SessionRecord
from quietcore.stats.compare import compare_many, describe
from quietcore.store import sessions


def fact_changes(a: SessionRecord, b: SessionRecord) -> list[tuple[str, Any, Any]]:
    # A peer's file says little of its node: set side by side only what both say.
    return changed(a.facts, b.facts, common_only="imported" in a.facts or "imported" in b.facts)


def cell_values(conn: sqlite3.Connection, session_id: int) -> dict[tuple[str, str], tuple[list[float], dict[str, Any]]]:
    """(experiment, cell) -> (measured values, metric) of a session's experiment runs."""
    out: dict[tuple[str, str], tuple[list[float], dict[str, Any]]] = {}
    runs = sessions.runs_of(conn, session_id)
    planned: list[tuple[str, str]] = []  # the experiment's own cell order
    for run in runs:
        if run.kind == "experiment":
            planned += [(run.result.get("name", ""), c["cell"]) for c in run.result.get("cells", [])]
    for run in runs:
        if not run.is_cell or run.params.get("warmup") or run.status != "complete":
            continue
        metric = run.result.get("metric")
        if not metric:
            continue
        values, _ = out.setdefault((run.params["experiment"], run.params["cell"]), ([], metric))
        values.append(float(metric["value"]))
    rank = {key: i for i, key in enumerate(planned)}
    return dict(sorted(out.items(), key=lambda item: (rank.get(item[0], len(rank)), item[0])))


def compare_sessions(conn: sqlite3.Connection, a: SessionRecord, b: SessionRecord) -> dict[str, Any]:
    va, vb = cell_values(conn, a.id), cell_values(conn, b.id)
    common = [key for key in va if key in vb]
    rows: list[dict[str, Any]] = []
    pending: list[tuple[dict[str, Any], list[float], list[float]]] = []
    for key in common:
        (xa, metric), (xb, _) = va[key], vb[key]
        row: dict[str, Any] = {"experiment": key[0], "cell": key[1], "metric": metric,
                               "a": {"n": len(xa), "median": describe(xa).median},
                               "b": {"n": len(xb), "median": describe(xb).median}}  # fmt: skip
        if len(xa) >= 2 and len(xb) >= 2:
            pending.append((row, xa, xb))
        rows.append(row)
    done = compare_many([(xa, xb, row["metric"].get("better") == "higher") for row, xa, xb in pending])
    for (row, _, _), c in zip(pending, done, strict=True):
        row["comparison"] = asdict(c)
    only = sorted({f"{e}: {c}" for (e, c) in set(va) ^ set(vb)})
    return {
        "a": {"id": a.id, "command": a.command, "fingerprint": a.fingerprint, "started_at": a.started_at},
        "b": {"id": b.id, "command": b.command, "fingerprint": b.fingerprint, "started_at": b.started_at},
        "same_fingerprint": a.fingerprint == b.fingerprint,
        "changes": [{"fact": k, "a": x, "b": y} for k, x, y in fact_changes(a, b)],
        "cells": rows,
        "unmatched": only,
    }
