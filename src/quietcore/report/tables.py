"""Tables for the probes' results, shared by the commands that measure and
`results show`, which reads them back. Presentation only."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from quietcore.runs.analysis import Attribution

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


def attribution_table(cpu: int, a: Attribution, shown: int = 10) -> Table:
    table = Table(title=f"CPU {cpu}: where {a.lost_ns / 1e6:,.2f} ms went", title_justify="left")
    for name, justify in (("source", "left"), ("count", "right"), ("cost µs", "right"),
                          ("estimate ms", "right"), ("share", "right"), ("basis", "left")):  # fmt: skip
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for s in a.sources[:shown]:
        cost = "-" if s.cost_ns is None else f"{s.cost_ns / 1000:,.1f}"
        share = min(s.estimate_ns / a.lost_ns, 1.0) if a.lost_ns else 0  # steal's 10 ms ticks can read over it
        table.add_row(s.name, f"{s.count:,}" if s.count else "-", cost, f"{s.estimate_ns / 1e6:,.2f}",
                      f"{share:.0%}", s.basis)  # fmt: skip
    if len(a.sources) > shown:
        rest = sum(s.estimate_ns for s in a.sources[shown:])
        table.add_row(f"{len(a.sources) - shown} more", "", "", f"{rest / 1e6:,.2f}", "", "")
    unexplained = a.unexplained_ns
    part = f"{unexplained / a.lost_ns:.0%}" if a.lost_ns else "-"
    table.add_row("unexplained", "", "", f"{unexplained / 1e6:,.2f}", part, "lost time no counter accounts for")
    return table


#: What the traced table's columns count, said once under its tables.
TRACED_COLUMNS = ("gaps led: the gaps a source covered the most of; ms: all it covered inside gaps. untraced: the gaps "
                  "no traced event touched, and the time no event covered in any gap.")  # fmt: skip


def traced_table(cpu: dict[str, Any], clock: str, shown: int = 8) -> Table:
    """Gaps matched to tracepoints by time. One gap may hold several
    sources: each gets the time it covered, and the gap counts once, for the
    one that covered most of it; so a source seen only inside others' gaps
    (a timer expiring within the tick) has time and no gap. TRACED_COLUMNS,
    printed under it, says so, where a row would read as a contradiction."""
    table = Table(title=f"CPU {cpu['cpu']}: gaps matched to tracepoints ({clock} clock)", title_justify="left")
    for name, justify in (("traced source", "left"), ("gaps led", "right"), ("ms", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for s in cpu["sources"][:shown]:
        table.add_row(s["name"], f"{s['gaps']:,.0f}", f"{s['ns'] / 1e6:,.2f}")
    rest = cpu["sources"][shown:]
    if rest:
        table.add_row(f"{len(rest)} more", f"{sum(s['gaps'] for s in rest):,.0f}",
                      f"{sum(s['ns'] for s in rest) / 1e6:,.2f}")  # fmt: skip
    un = cpu["unmatched"]
    table.add_row("untraced (in a VM: the host)", f"{un['gaps']:,}", f"{un['ns'] / 1e6:,.2f}")
    return table
