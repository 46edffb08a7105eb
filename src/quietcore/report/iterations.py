"""A benchmark's own figure, iteration by iteration (--metric): its slowest
and fastest iterations, with what the trace saw in each, as one table."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from quietcore.report.spread import figure, lines, ms
from quietcore.safe import plain

__all__ = ["figure", "iteration_lines", "iterations_table", "ms"]


def iterations_table(explained: dict[str, Any], title: str) -> Table:
    """The slowest and fastest iterations: score, intruders, steal, the workload's own threads."""
    t = Table(title=plain(title), title_justify="left")
    for name, justify in (("", "left"), ("iteration", "left"), ("score", "right"), ("intruders", "right"),
                          ("largest", "left"), ("steal", "right"), ("the workload's threads", "left")):  # fmt: skip
        t.add_column(name, justify=justify)  # type: ignore[arg-type]
    for which in ("slowest", "fastest"):
        for k, row in enumerate(explained.get(which, [])):
            steal = row.get("steal_ms")
            t.add_row(which if k == 0 else "", plain(row["where"]), f"{figure(row['value'])} {plain(row['unit'])}",
                      f"{row['intruders_ms']:.1f} ms", plain(row["intruders"]),
                      f"{steal:.0f} ms" if steal is not None else "-", plain(row["threads"]))  # fmt: skip
    return t


def iteration_lines(explained: dict[str, Any]) -> list[str]:
    """The sentences: why iterations differ, whether forks do; the method once (report.spread)."""
    return lines([explained])
