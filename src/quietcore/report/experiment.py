"""The experiment table and its sentences, from the stored analysis."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.table import Table

from quietcore.safe import plain

# How a metric's unit is shown, in tables and figures alike: (factor, unit shown).
SCALE = {"s": (1e3, "ms"), "ns": (1.0, "ns"), "GB/s": (1.0, "GB/s")}


def fmt(value: float | None, unit: str, like: float | None = None) -> str:
    """A figure in its shown unit, with the decimals its size takes; `like`: those of that figure instead
    (a spread beside its mean: "234.7 ± 9.9", not "234.7 ± 9.931")."""
    if value is None:
        return "-"
    factor, _ = SCALE.get(unit, (1.0, unit))
    v, size = value * factor, abs((like if like is not None else value) * factor)
    return f"{v:,.3f}" if size < 10 else f"{v:,.1f}" if size < 1000 else f"{v:,.0f}"


def shown_unit(unit: str) -> str:
    return SCALE.get(unit, (1.0, unit))[1]


def experiment_table(analysis: Mapping[str, Any]) -> Table:
    """A row a cell, its columns by what a reader needs first: the cell, its median and interval, the
    ratio to its baseline with its interval, the verdict; then the spread and the test's p, the mean,
    p95 and what a workload measured beside (extra). A screen too narrow for them all gives the later
    ones a second table (report.screen)."""
    rows = analysis["rows"]
    extras: list[str] = []
    for row in rows:
        for key in row.get("extra", {}):
            if key not in extras:
                extras.append(key)
    title = str(analysis["title"])
    title = title if title.startswith(str(analysis["experiment"])) else f"{analysis['experiment']}: {title}"
    table = Table(title=f"Experiment {title}", title_justify="left")
    with_p95 = any(row.get("stats") and row["stats"]["p95"] is not None for row in rows)
    unit = next((shown_unit(row["metric"]["unit"]) for row in rows if row.get("stats")), "")
    # a figure and its interval in one cell, as hyperfine writes "305.6 ms ± 1.2 ms": a column of interval
    # alone took a header and a gutter each, and the verdict wrapped to two rows in 100 columns
    columns = ["cell", "n", f"median {unit} [95% CI]".replace("  ", " "), "vs baseline [95% CI]", "verdict", "CV",
               "p (Holm)", "mean ± sd", *(["p95"] if with_p95 else [])]  # fmt: skip
    for name in columns:
        table.add_column(name, justify="left" if name in ("cell", "verdict") else "right")
    for key in extras:
        table.add_column(key, justify="right")
    for row in rows:
        stats = row.get("stats")
        if not stats:
            table.add_row(row["cell"], "0", "-", "-", "not run", *["-"] * (len(columns) - 5),
                          *["" for _ in extras])  # fmt: skip
            continue
        unit_ = row["metric"]["unit"]
        ci = row.get("median_ci")
        comparison = row.get("comparison")
        std = stats["std"]
        cv = stats["cv"]
        table.add_row(
            row["cell"],
            str(stats["n"]),
            fmt(stats["median"], unit_) + (f" {interval(fmt(ci[0], unit_), fmt(ci[1], unit_))}" if ci else ""),
            "baseline" if row["baseline"] else (f"{comparison['ratio']:.3f} "
            f"{interval(format(comparison['ci_low'], '.3f'), format(comparison['ci_high'], '.3f'))}"
            if comparison else "-"),
            comparison["verdict"] if comparison else "",
            "-" if cv is None else f"{cv:.1%}",
            f"{comparison['p_adjusted']:.3g}" if comparison else "",
            f"{fmt(stats['mean'], unit_)} ± {fmt(std, unit_, like=stats['mean'])}" if std is not None
            else fmt(stats["mean"], unit_),
            *([fmt(stats["p95"], unit_) if stats["p95"] is not None else "n too small"] if with_p95 else []),
            *[row.get("extra", {}).get(key, "") for key in extras],
        )  # fmt: skip
    return table


def interval(low: str, high: str) -> str:
    """One way to write an interval, in every table: "[217.9, 338.6]"."""
    return f"[{low}, {high}]"


#: A built-in metric's name in words: the stored name is the JSON's.
_METRICS = {"wall_s": "the command's wall time"}


def metric_line(analysis: Mapping[str, Any]) -> str | None:
    for row in analysis["rows"]:
        if row.get("metric"):
            m = row["metric"]
            better = "lower is better" if m["better"] == "lower" else "higher is better"
            name = _METRICS.get(str(m["name"]), plain(str(m["name"])))
            return f"Metric: {name}, {better}. Each cell is held against the baseline of its group, Holm-adjusted."
    return None
