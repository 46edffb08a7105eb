"""A run of an experiment's cell (a native workload or a user's command):
its metric in the terminal, its factors in the flat table. In a report the
experiment's table stands for it."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from quietcore.report.kinds.base import Kind, run_row
from quietcore.runs.model import Run

#: The cell's columns in the flat table; its factors follow as factor_NAME.
COLUMNS = ("experiment", "cell", "group", "baseline", "warmup", "rep")


class CellKind(Kind):
    name = "cell"

    def terminal(self, out: Console, run: Run) -> None:
        metric = run.result.get("metric") or {}
        out.print(f"  {metric.get('name')} = {metric.get('value')} {metric.get('unit', '')}")

    def rows(self, run: Run) -> list[dict[str, Any]]:
        row = run_row(run) | {k: run.params.get(k) for k in COLUMNS}
        row |= {f"factor_{name}": value for name, value in run.params.get("factors", {}).items()}
        return [row]


KIND = CellKind()
