"""Runs read from peers' files (`results import --from`): oslat, cyclictest
and rtla osnoise, each a kind of its own, shown per CPU with the figures
quietcore's own runs share with it (base.FIGURES), so that `compare` and a
report set them beside quietcore's."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from quietcore.report.kinds.base import AVAILABLE, GAP_MAX, WAKE_MAX, WAKE_P50, WAKE_P99, Kind, run_row
from quietcore.runs.model import Run
from quietcore.safe import plain

if TYPE_CHECKING:
    from quietcore.report.builder import Builder, Section


def _us(value: Any) -> str:
    return "-" if value is None else f"{float(value):,.1f}"


class PeerKind(Kind):
    in_report = True
    columns: tuple[tuple[str, str], ...] = ()  # (header, key of a CPU's entry)

    def __init__(self, name: str, columns: tuple[tuple[str, str], ...],
                 shared: Callable[[dict[str, Any]], dict[str, float]]) -> None:  # fmt: skip
        self.name = name
        self.columns = columns
        self.shared = shared  # a CPU's entry -> the figures quietcore's own runs also give (base.FIGURES)

    def table(self, run: Run) -> Table:
        result = run.result
        mode = f" {result['mode']}" if result.get("mode") else ""
        title = f"{self.name}{mode}, imported from {run.params.get('imported', '?')}"
        if result.get("cmdline"):
            title += f": {result['cmdline']}"
        out = Table(title=plain(title), title_justify="left")
        out.add_column("CPU", justify="right")
        for header, _ in self.columns:
            out.add_column(header, justify="right")
        for c in result.get("cpus", []):
            out.add_row(str(c["cpu"]), *(_us(c.get(key)) if key.endswith(("_us", "_pct")) else str(c.get(key, "-"))
                                         for _, key in self.columns))  # fmt: skip
        return out

    def terminal(self, out: Console, run: Run) -> None:
        out.print(self.table(run))

    def section(self, b: Builder, s: Section, run: Run) -> None:
        from quietcore.report.render import grid

        s.grids.append(grid(self.table(run)))

    def rows(self, run: Run) -> list[dict[str, Any]]:
        shared = run_row(run)
        return [{**shared, "cpu": c["cpu"], **{k: v for k, v in c.items() if isinstance(v, int | float)}}
                for c in run.result.get("cpus", [])] or [shared]  # fmt: skip

    def figures(self, run: Run) -> dict[int, dict[str, float]]:
        return {int(c["cpu"]): self.shared(c) for c in run.result.get("cpus", [])}


def _oslat(c: dict[str, Any]) -> dict[str, float]:
    return {GAP_MAX: float(c["max_us"])}


def _cyclictest(c: dict[str, Any]) -> dict[str, float]:
    out = {WAKE_MAX: float(c["max_us"])}
    out |= {figure: float(c[key]) for figure, key in ((WAKE_P50, "p50_us"), (WAKE_P99, "p99_us"))
            if c.get(key) is not None}  # fmt: skip
    return out


def _rtla(c: dict[str, Any]) -> dict[str, float]:
    if "max_single_us" in c:  # top: the longest single noise, and the share rtla calls % CPU Aval
        return {GAP_MAX: float(c["max_single_us"]), AVAILABLE: float(c["available_pct"])}
    return {GAP_MAX: float(c["max_us"])} if "max_us" in c else {}  # hist: its longest sample


OSLAT = PeerKind("oslat", (("duration s", "duration_s"), ("min µs", "min_us"), ("avg µs", "avg_us"),
                           ("p50 µs", "p50_us"), ("p99 µs", "p99_us"), ("max µs", "max_us")), _oslat)  # fmt: skip
CYCLICTEST = PeerKind("cyclictest", (("cycles", "cycles"), ("min µs", "min_us"), ("avg µs", "avg_us"),
                                     ("p50 µs", "p50_us"), ("p99 µs", "p99_us"), ("max µs", "max_us")),
                      _cyclictest)  # fmt: skip
RTLA = PeerKind("rtla-osnoise", (("periods", "periods"), ("noise µs", "noise_us"), ("available %", "available_pct"),
                                 ("max noise µs", "max_noise_us"), ("max single µs", "max_single_us"),
                                 ("HW", "hw"), ("NMI", "nmi"), ("IRQ", "irq"), ("softirq", "softirq"),
                                 ("thread", "thread"), ("count", "count"), ("max µs", "max_us")), _rtla)  # fmt: skip
