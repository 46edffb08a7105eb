"""The experiment table and its sentences, from the stored analysis."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.table import Table

# How a metric's unit is shown, in tables and figures alike: (factor, unit shown).
SCALE = {"s": (1e3, "ms"), "ns": (1.0, "ns"), "GB/s": (1.0, "GB/s")}


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    factor, _ = SCALE.get(unit, (1.0, unit))
    v = value * factor
    return f"{v:,.3f}" if abs(v) < 10 else f"{v:,.1f}" if abs(v) < 1000 else f"{v:,.0f}"


def shown_unit(unit: str) -> str:
    return SCALE.get(unit, (1.0, unit))[1]


def experiment_table(analysis: Mapping[str, Any]) -> Table:
    rows = analysis["rows"]
    extras: list[str] = []
    for row in rows:
        for key in row.get("extra", {}):
            if key not in extras:
                extras.append(key)
    table = Table(title=f"{analysis['experiment']}: {analysis['title']}", title_justify="left")
    with_p95 = any(row.get("stats") and row["stats"]["p95"] is not None for row in rows)
    columns = ["cell", "n", "median [95% CI]", "mean ± sd", "CV", *(["p95"] if with_p95 else []),
               "vs baseline [95% CI]", "p (Holm)", "verdict"]  # fmt: skip
    for name in columns:
        # Numbers never wrap; the verdict keeps room for its words, the cell name wraps first.
        words = name in ("cell", "verdict")
        table.add_column(
            name, justify="left" if words else "right", no_wrap=not words, min_width=24 if name == "verdict" else None
        )
    for key in extras:
        table.add_column(key, justify="right")
    for row in rows:
        stats = row.get("stats")
        if not stats:
            table.add_row(row["cell"], "0", *["-"] * (len(columns) - 3), "not run", *["" for _ in extras])
            continue
        unit = row["metric"]["unit"]
        ci = row.get("median_ci")
        comparison = row.get("comparison")
        std = stats["std"]
        cv = stats["cv"]
        table.add_row(
            row["cell"],
            str(stats["n"]),
            f"{fmt(stats['median'], unit)} {shown_unit(unit)}" + (f" [{fmt(ci[0], unit)}-{fmt(ci[1], unit)}]" if ci else ""),  # noqa: E501
            f"{fmt(stats['mean'], unit)} ± {fmt(std, unit)}" if std is not None else fmt(stats["mean"], unit),
            "-" if cv is None else f"{cv:.1%}",
            *([fmt(stats["p95"], unit) if stats["p95"] is not None else "n too small"] if with_p95 else []),
            "baseline" if row["baseline"] else
            f"{comparison['ratio']:.3f} [{comparison['ci_low']:.3f}-{comparison['ci_high']:.3f}]" if comparison else "-",  # noqa: E501
            f"{comparison['p_adjusted']:.3g}" if comparison else "",
            comparison["verdict"] if comparison else "",
            *[row.get("extra", {}).get(key, "") for key in extras],
        )  # fmt: skip
    return table


def metric_line(analysis: Mapping[str, Any]) -> str | None:
    for row in analysis["rows"]:
        if row.get("metric"):
            m = row["metric"]
            better = "lower is better" if m["better"] == "lower" else "higher is better"
            return f"Metric: {m['name']} ({better}); each cell against the baseline of its group, Holm-adjusted."
    return None
