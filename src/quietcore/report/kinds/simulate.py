"""`quietcore simulate`'s study: the slowdown curves with their scale
limits, what each source costs, and the what-ifs, in the terminal and in a
report."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from quietcore.report.kinds.base import Kind
from quietcore.report.text import console
from quietcore.runs.model import Run

if TYPE_CHECKING:
    from quietcore.report.builder import Builder, Section


def _shown(point: dict[str, Any]) -> str:
    lo, hi = point["ci"]
    return f"{point['slowdown']:.3f}" + (f" ±{(hi - lo) / 2:.3f}" if hi > lo else "")


def _model(study: dict[str, Any]) -> str:
    """A stored study's model: sessions before the round model are the fast model's."""
    return str(study.get("model") or "fast")


def heading(study: dict[str, Any], params: dict[str, Any]) -> str:
    if _model(study) == "rounds":
        model = f"{params['collective']} by {study['algorithm']} (round model)"
    else:
        model = f"{params['collective']} (fast model)"
    net = f"L = {params['latency_us']:.3g} µs, o = {params['overhead_us']:.3g} µs"
    if "bytes" in params:
        net += f", G = {params['gap_per_byte_ns']:.3g} ns/B, {params['bytes']:,} B"
    if params.get("network"):
        net += f" (as survey session {params['network']} measured them)"
    charge = ("; noise charged as LogGOPSim does (a window of the work's own length)"
              if study.get("noise_charge") == "window" else "")  # fmt: skip
    return (
        f"{model}, {params['iterations']:,} iterations x {params['repeats']} seeds per point, {net}, phase "
        f"{params['phase']}; noise: {study['noise']}, {study['net_noise'] * 100:.2f} % of the time lost{charge}"
    )


def curves_table(study: dict[str, Any]) -> Table:
    ranks = [p["ranks"] for p in study["curves"][0]["points"]]
    rounds = _model(study) == "rounds"
    out = Table(title="Slowdown against the ranks (mean ± its 95 % interval over seeds)"
                + ("; each g's second row the fast model's" if rounds else ""))  # fmt: skip
    out.add_column("g")
    for n in ranks:
        out.add_column(f"N = {n:,}", justify="right")
    out.add_column("noise costs 10 % at")
    for c in study["curves"]:
        out.add_row(f"{c['granularity_us']:g} µs", *[_shown(p) for p in c["points"]], c["scale_limit"]["text"])
        if rounds:
            out.add_row("  fast model", *[_shown(p["fast"]) for p in c["points"]], "", style="dim")
    return out


def models_lines(study: dict[str, Any]) -> list[str]:
    """Where the round model and the fast model differ, per g, at the largest N."""
    if _model(study) != "rounds":
        return []
    lines = []
    for c in study["curves"]:
        p = c["points"][-1]
        r, f = p["slowdown"], p["fast"]["slowdown"]
        if f > 1 and abs(r - f) / f > 0.05:
            why = ("a rank inside a burst delays its partners in every round, which the fast model does not count"
                   if r > f else "the fast model's collective, a fixed cost after the slowest rank, is longer "
                   "than this schedule's")  # fmt: skip
            lines.append(f"g = {c['granularity_us']:g} µs, N = {p['ranks']:,}: the round model says {r:.3f}, the "
                         f"fast model {f:.3f} ({r / f:.2f}x): {why}.")  # fmt: skip
        else:
            lines.append(f"g = {c['granularity_us']:g} µs, N = {p['ranks']:,}: the two models agree within 5 % "
                         f"({r:.3f} and {f:.3f}).")  # fmt: skip
    return lines


def _share(row: dict[str, Any]) -> str:
    return f" ({row['share'] * 100:.0f} %)" if row["share"] is not None else ""


def _by_g(rows: list[dict[str, Any]], key: str) -> tuple[list[float], dict[str, dict[float, dict[str, Any]]]]:
    gs = sorted({r["granularity_us"] for r in rows})
    table: dict[str, dict[float, dict[str, Any]]] = {}
    for r in rows:
        table.setdefault(r[key], {})[r["granularity_us"]] = r
    return gs, table


SHORT = 28  # a source's label in a table: the full name is listed below it


def short_label(index: int, name: str) -> str:
    """ "S1 the host", for "the host: aperiodic gaps >= 100 µs (vCPU
    preempted)": a key and the name's first words, so that an 80-column
    terminal does not wrap the name into a tall cell."""
    head = name.split(":")[0].split("(")[0].split(",")[0].strip()
    head = head if len(head) <= SHORT else head[: SHORT - 1].rstrip() + "…"
    return f"S{index} {head}"


def _sources(study: dict[str, Any]) -> list[tuple[str, dict[float, dict[str, Any]]]]:
    """The sources, costliest first, with their cells per granularity."""
    _, table = _by_g(study["by_source"], "source")
    return sorted(table.items(), key=lambda kv: -max(r["cost"] for r in kv[1].values()))


def source_legend(study: dict[str, Any]) -> list[str]:
    """The full name of each source of the table, by its key."""
    return [f"S{i}: {name}" for i, (name, _) in enumerate(_sources(study), start=1)]


def sources_table(study: dict[str, Any]) -> Table:
    gs, table = _by_g(study["by_source"], "source")
    out = Table(title=f"Each source at N = {study['focus_ranks']:,}: the slowdown without it (its share of the "
                      "slowdown, (baseline - without) / (baseline - 1))")  # fmt: skip
    out.add_column("source")
    out.add_column("lost time", justify="right")
    for g in gs:
        out.add_column(f"g = {g:g} µs", justify="right")
    baseline = {g: next(iter(table.values()))[g]["baseline"] for g in gs}
    out.add_row("(baseline)", "", *[f"{baseline[g]:.3f}" for g in gs])
    lost = dict(zip(study["sources"], study["lost_by_source"], strict=True))
    for i, (name, cells) in enumerate(_sources(study), start=1):
        out.add_row(short_label(i, name), f"{lost[name] * 100:.0f} %",
                    *[_shown(cells[g]) + _share(cells[g]) for g in gs])  # fmt: skip
    return out


def whatif_table(study: dict[str, Any]) -> Table:
    gs, table = _by_g(study["whatifs"], "variant")
    out = Table(title=f"What-ifs at N = {study['focus_ranks']:,}: runtime over the baseline's noiseless runtime")
    out.add_column("what if")
    for g in gs:
        out.add_column(f"g = {g:g} µs", justify="right")
    out.add_row("(baseline)", *[f"{next(iter(table.values()))[g]['baseline']:.3f}" for g in gs])
    for name, cells in table.items():
        out.add_row(name, *[_shown(cells[g]) for g in gs])
    return out


def _shows_change(without: float, baseline: float) -> bool:
    """Whether taking a source away changes the slowdown as the lines print it (three digits)."""
    return f"{without:.3f}" != f"{baseline:.3f}"


def costliest(study: dict[str, Any]) -> list[str]:
    """Per granularity, the source whose removal helps most, and what
    taking the tick away (nohz_full on the compute CPUs) would buy. A removal
    that changes nothing to three digits is said so, not "2.587 instead of
    2.587": at that N some rank waits on a longer gap than the source's in
    about every round, so taking it away changes no round."""
    lines = []
    for g in sorted({r["granularity_us"] for r in study["by_source"]}):
        rows = [r for r in study["by_source"] if r["granularity_us"] == g]
        top = max(rows, key=lambda r: r["cost"])
        if top["cost"] > 0 and _shows_change(top["slowdown"], top["baseline"]):
            lines.append(f"At N = {study['focus_ranks']:,} and g = {g:g} µs, {top['source']} costs the most: without "
                         f"it the slowdown is {top['slowdown']:.3f} instead of {top['baseline']:.3f}.")  # fmt: skip
        tick = next((r for r in rows if "scheduler tick" in r["source"]), None)
        if tick:
            what = (f"Without the scheduler tick (what nohz_full would buy, if the CPUs run one task each), "
                    f"g = {g:g} µs: ")  # fmt: skip
            if _shows_change(tick["slowdown"], tick["baseline"]):
                lines.append(f"{what}{tick['slowdown']:.3f} instead of {tick['baseline']:.3f}.")
            else:
                lines.append(f"{what}{tick['baseline']:.3f} either way: the ranks wait on longer gaps than the "
                             f"tick's in about every round, so it costs nothing to three digits.")  # fmt: skip
    return lines


def show(study: dict[str, Any], params: dict[str, Any], out: Console | None = None) -> None:
    if out is None:
        out = console()
    out.print(heading(study, params))
    out.print(curves_table(study))
    if study["by_source"]:
        out.print(sources_table(study))
        for line in source_legend(study):
            out.print(line)
    out.print(whatif_table(study))
    for line in models_lines(study) + costliest(study) + study.get("notes", []):
        out.print(line)


class SimulateKind(Kind):
    name = "simulate"
    in_report = True
    in_table = False

    def terminal(self, out: Console, run: Run) -> None:
        show(run.analysis, run.params, out)

    def section(self, b: Builder, s: Section, run: Run) -> None:
        from quietcore.report import figures
        from quietcore.report.render import grid

        s.title = "Simulated at scale"
        s.paragraphs.append(heading(run.analysis, run.params))
        s.grids.append(grid(curves_table(run.analysis)))
        b.figure(s, figures.slowdown_curves(run.analysis), "simulate",
                 "Slowdown of a simulated bulk-synchronous job against the ranks, per work quantum g; the band is "
                 "the 95 % interval over seeds, the dashed line the 10 % that sets the scale limit.")  # fmt: skip
        if run.analysis["by_source"]:
            s.grids.append(grid(sources_table(run.analysis)))
            s.paragraphs += source_legend(run.analysis)
        s.grids.append(grid(whatif_table(run.analysis)))
        s.paragraphs += models_lines(run.analysis) + costliest(run.analysis) + run.analysis.get("notes", [])


KIND = SimulateKind()
