"""Tables for the probes' results, shared by the commands that measure and
`results show`, which reads them back. Presentation only."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from quietcore.report.account import Account

LABELS = {
    "switch_pipe": "context switch, pipe method (lmbench)",
    "switch_yield": "context switch, sched_yield pair",
    "pipe_round_trip": "pipe round trip, same CPU (raw)",
    "pipe_overhead_pair": "pipe write+read, no switch (subtracted)",
    "wake_cross_pipe": "cross-CPU wake-up, pipe",
    "wake_cross_futex": "cross-CPU wake-up, futex",
}


def latency_table(result: dict[str, Any]) -> Table:
    title = f"Wake-up latency, every {result['interval_us']} µs (µs)"
    table = Table(title=title, title_justify="left")
    for name in ("CPU", "samples", "min", "p50", "p99", "p99.9", "max", f"over {result['threshold_us']}", "missed"):
        table.add_column(name, justify="right")
    for c in result["cpus"]:
        p999 = "-" if c["samples"] < 1000 else f"{c['p999_ns'] / 1000:,.1f}"  # a p99.9 of fewer is the max
        p99 = "-" if c["samples"] < 100 else f"{c['p99_ns'] / 1000:,.1f}"
        us = [f"{c[k] / 1000:,.1f}" for k in ("min_ns", "p50_ns")]
        table.add_row(str(c["cpu"]), f"{c['samples']:,}", *us, p99, p999, f"{c['max_ns'] / 1000:,.1f}",
                      f"{c['over_threshold']:,}", f"{c['missed']:,}")  # fmt: skip
    return table


def ctxswitch_table(result: dict[str, Any]) -> Table:
    where = f"CPU {result['cpu']}" + (f" and CPU {result['cpu_b']}" if result.get("cpu_b") is not None else "")
    table = Table(title=f"Context switches on {where}: median of {result['reps']} reps", title_justify="left")
    for name, justify in (("measure", "left"), ("ns", "right"), ("95% CI", "right"), ("n", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for key, label in LABELS.items():
        s = result["analysis"].get(key)
        if s:
            table.add_row(label, f"{s['median']:,.0f}", f"{s['ci_low']:,.0f} - {s['ci_high']:,.0f}", str(s["n"]))
    return table


def slice_lines(result: dict[str, Any]) -> list[str]:
    s = result.get("slice")
    if not s:
        return []
    lines = []
    for policy in ("other", "rr"):
        r = s[policy]
        if "error" in r:
            lines.append(f"Time slice under SCHED_{policy.upper()}: not measured: {r['error']}")
        else:
            lines.append(f"Time slice under SCHED_{policy.upper()}: median run {r['median_ms']:.2f} ms "
                         f"({r['runs']} runs in {s['duration_ms']} ms, two spinners on one CPU)")  # fmt: skip
    lines.append(f"sched_rr_get_interval: {s['rr_interval_ms']:g} ms")
    return lines


def account_table(a: Account, shown: int = 10) -> Table:
    """Where one CPU's lost time went (report.account): a row per source, the
    rest, and, by the counters, how each was measured; the rows add up to the
    time lost. By the trace every row has one basis, said in account_note."""
    by = "by the trace" if a.traced else "by the kernel's counters"
    table = Table(title=f"CPU {a.cpu}: where {a.lost_ns / 1e6:,.2f} ms went, {by}", title_justify="left")
    columns = [("source", "left"), ("gaps" if a.traced else "events", "right"), ("lost ms", "right"),
               ("share", "right")] + ([] if a.traced else [("how", "left")])  # fmt: skip
    for name, justify in columns:
        table.add_column(name, justify=justify)  # type: ignore[arg-type]

    def add(name: str, count: int | None, ns: float, basis: str) -> None:
        share = min(ns / a.lost_ns, 1.0) if a.lost_ns else 0.0
        cells = [name, "-" if count is None else f"{count:,}", f"{ns / 1e6:,.2f}", f"{share:.0%}"]
        table.add_row(*cells, *([] if a.traced else [basis]))

    for r in a.rows[:shown]:
        add(r.name, r.count, r.ns, r.basis)
    if len(a.rows) > shown:
        rest = a.rows[shown:]
        add(f"{len(rest)} more", sum(r.count or 0 for r in rest) if a.traced else None, sum(r.ns for r in rest), "")
    add(a.rest.name, a.rest.count, a.rest.ns, a.rest.basis)
    return table


#: Under an account by the trace: what its rows count.
ACCOUNT_NOTE = ("Each gap counts whole for the traced event that led it; untraced: the gaps no traced event "
                "touched.")  # fmt: skip
