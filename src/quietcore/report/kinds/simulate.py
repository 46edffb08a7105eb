"""`quietcore simulate`'s study: the slowdown curves with their scale
limits, what each source costs, and the what-ifs, in the terminal and in a
report."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from quietcore.report.changes import Shares
from quietcore.report.kinds.base import Kind
from quietcore.report.text import console
from quietcore.runs.model import Run
from quietcore.safe import plain

if TYPE_CHECKING:
    from quietcore.report.builder import Builder, Section


def _shown(point: dict[str, Any]) -> str:
    lo, hi = point["ci"]
    return f"{point['slowdown']:.3f}" + (f" ±{(hi - lo) / 2:.3f}" if hi > lo else "")


def _model(study: dict[str, Any]) -> str:
    """A stored study's model: sessions before the round model are the fast model's."""
    return str(study.get("model") or "fast")


def heading(study: dict[str, Any], params: dict[str, Any]) -> list[str]:
    """What was simulated, a fact a line: the collective and its model, the network, the noise."""
    if _model(study) == "rounds":
        model = f"{params['collective']} by {study['algorithm']}, the round model"
    else:
        model = f"{params['collective']}, the fast model"
    net = f"L = {params['latency_us']:.3g} µs, o = {params['overhead_us']:.3g} µs"
    if "bytes" in params:
        net += f", G = {params['gap_per_byte_ns']:.3g} ns/B, {params['bytes']:,} B a message"
    if params.get("network"):
        net += f", as survey session {params['network']} measured them"
    charge = (
        ", charged as LogGOPSim does: a window of the work's own length"
        if study.get("noise_charge") == "window"
        else ""
    )
    out = [f"Simulated: {model}; {params['iterations']:,} iterations x {params['repeats']} seeds a point, phase "
           f"{params['phase']}.", f"Network: {net}.",
           f"Noise: {plain(str(study['noise']))}, {study['net_noise']:.2%} of the time lost{charge}."]  # fmt: skip
    shares = study.get("shares")
    if shares:  # one figure of each with lab, results show and audit (report.changes.Shares)
        said = Shares(shares["lost_ns"], shares["tick"], shares["host"], shares["virtualized"])
        out.append(said.line(shares["cpus"], shares["session"]))
    return out


def curves_table(study: dict[str, Any]) -> Table:
    ranks = [p["ranks"] for p in study["curves"][0]["points"]]
    rounds = _model(study) == "rounds"
    out = Table(title="Slowdown against the ranks N, the mean ± its 95% interval over seeds"
                + (". Each g's second row is the fast model's." if rounds else "."))  # fmt: skip
    out.add_column("g")
    for n in ranks:
        out.add_column(f"N = {n:,}", justify="right")
    out.add_column("noise costs 10% at")
    for c in study["curves"]:
        out.add_row(f"{c['granularity_us']:g} µs", *[_shown(p) for p in c["points"]], c["scale_limit"]["text"])
        if rounds:
            fast = c.get("fast_scale_limit")  # a study stored before it was kept has none
            out.add_row("  fast model", *[_shown(p["fast"]) for p in c["points"]], fast["text"] if fast else "",
                        style="dim")  # fmt: skip
    return out


def models_lines(study: dict[str, Any]) -> list[str]:
    """Where the round model and the fast model differ at the largest N: the g's each way, and why, once."""
    if _model(study) != "rounds":
        return []
    over: list[str] = []
    under: list[str] = []
    alike: list[str] = []
    ranks = 0
    for c in study["curves"]:
        p = c["points"][-1]
        ranks, r, f = p["ranks"], p["slowdown"], p["fast"]["slowdown"]
        g = f"{c['granularity_us']:g} µs"
        if f > 1 and abs(r - f) / f > 0.05:
            (over if r > f else under).append(f"{r / f:.2f}x at g = {g}, {r:.3f} against {f:.3f}")
        else:
            alike.append(g)
    lines = []
    if over:
        lines.append(f"At N = {ranks:,} the round model's slowdown is over the fast model's: {'; '.join(over)}. "
                     "A rank inside a burst delays its partners in every round, which the fast model does not "
                     "count.")  # fmt: skip
    if under:
        lines.append(f"At N = {ranks:,} the round model's slowdown is under the fast model's: {'; '.join(under)}. "
                     "The fast model's collective, a fixed cost after the slowest rank, is longer than this "
                     "schedule's.")  # fmt: skip
    if alike:
        lines.append(f"At N = {ranks:,} the two models agree within 5% at g = {', '.join(alike)}.")
    return lines


def _share(row: dict[str, Any]) -> str:
    return f", {row['share']:.0%}" if row["share"] is not None else ""


def _by_g(rows: list[dict[str, Any]], key: str) -> tuple[list[float], dict[str, dict[float, dict[str, Any]]]]:
    gs = sorted({r["granularity_us"] for r in rows})
    table: dict[str, dict[float, dict[str, Any]]] = {}
    for r in rows:
        table.setdefault(r[key], {})[r["granularity_us"]] = r
    return gs, table


def _sources(study: dict[str, Any]) -> list[tuple[str, dict[float, dict[str, Any]]]]:
    """The sources, costliest first, with their cells per granularity."""
    _, table = _by_g(study["by_source"], "source")
    return sorted(table.items(), key=lambda kv: -max(r["cost"] for r in kv[1].values()))


def sources_table(study: dict[str, Any]) -> Table:
    """Each source, costliest first: the slowdown without it at each g, and its share of the slowdown (not of
    the lost time: the lost time's shares are the account's, said above the tables)."""
    gs, table = _by_g(study["by_source"], "source")
    out = Table(title=f"Each source at N = {study['focus_ranks']:,}: the slowdown without it, and its share of the "
                      "slowdown, (baseline - without) / (baseline - 1)")  # fmt: skip
    out.add_column("source")
    for g in gs:
        out.add_column(f"g = {g:g} µs", justify="right")
    baseline = {g: next(iter(table.values()))[g]["baseline"] for g in gs}
    out.add_row("baseline", *[f"{baseline[g]:.3f}" for g in gs])
    for name, cells in _sources(study):
        out.add_row(plain(name), *[_shown(cells[g]) + _share(cells[g]) for g in gs])
    return out


def whatif_table(study: dict[str, Any]) -> Table:
    gs, table = _by_g(study["whatifs"], "variant")
    out = Table(title=f"What-ifs at N = {study['focus_ranks']:,}: runtime over the baseline's noiseless runtime")
    out.add_column("what if")
    for g in gs:
        out.add_column(f"g = {g:g} µs", justify="right")
    out.add_row("baseline", *[f"{next(iter(table.values()))[g]['baseline']:.3f}" for g in gs])
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
            lines.append(f"At N = {study['focus_ranks']:,} and g = {g:g} µs, the costliest source is "
                         f"{plain(top['source'])}. Without it the slowdown is {top['slowdown']:.3f} instead of "
                         f"{top['baseline']:.3f}.")  # fmt: skip
        # which is the tick: stored with the row (simulate.noise knows it by the source's kind); a study stored
        # before that, by its name
        tick = next((r for r in rows if r.get("tick", str(r["source"]).startswith("the tick"))), None)
        if tick:
            what = f"Without the tick, g = {g:g} µs: "
            if _shows_change(tick["slowdown"], tick["baseline"]):
                lines.append(f"{what}{tick['slowdown']:.3f} instead of {tick['baseline']:.3f}. That is what "
                             "nohz_full would buy if the CPUs run one task each.")  # fmt: skip
            else:
                lines.append(f"{what}{tick['baseline']:.3f} either way. The ranks wait on longer gaps than the tick's "
                             "in about every round, so it costs nothing to three digits.")  # fmt: skip
    return lines


def show(study: dict[str, Any], params: dict[str, Any], out: Console | None = None) -> None:
    if out is None:
        out = console()
    for line in heading(study, params):
        out.print(line)
    out.print(curves_table(study))
    if study["by_source"]:
        out.print(sources_table(study))
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
        s.paragraphs += heading(run.analysis, run.params)
        s.grids.append(grid(curves_table(run.analysis)))
        b.figure(s, figures.slowdown_curves(run.analysis), "simulate",
                 "Slowdown of a simulated bulk-synchronous job against the ranks, per work quantum g; the band is "
                 "the 95% interval over seeds, the dashed line the 10% that sets the scale limit.")  # fmt: skip
        if run.analysis["by_source"]:
            s.grids.append(grid(sources_table(run.analysis)))
        s.grids.append(grid(whatif_table(run.analysis)))
        s.paragraphs += models_lines(run.analysis) + costliest(run.analysis) + run.analysis.get("notes", [])


KIND = SimulateKind()
