"""A survey's own run: every node with its clock offset, figures and badge
(ok or odd, and why), and the configuration fields in which nodes differ
from the majority. It is the session's last run; the nodes' noise runs
precede it, one per rank."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from quietcore.report.kinds.base import Kind
from quietcore.runs.clock import Offset, to_rank0
from quietcore.runs.model import Run
from quietcore.store import sessions

if TYPE_CHECKING:
    from quietcore.report.builder import Builder, Section


def verdict_text(node: dict[str, Any]) -> str:
    """A node's badge: "odd: ...", "differs: ..." (too few nodes to call
    one odd: see survey.odd) or "ok"."""
    if node.get("odd"):
        return "odd: " + "; ".join(node["reasons"])
    if node.get("differs"):
        return "differs: " + "; ".join(node["reasons"])
    return "ok"


def nodes_table(analysis: dict[str, Any]) -> Table:
    out = Table(title=f"{analysis['ranks']} ranks: each node against the others")
    for header in ("rank", "host", "CPUs", "clock offset to rank 0", "noise", "max gap", "p99.9 gap", "events/s",
                   "verdict"):  # fmt: skip
        out.add_column(header)
    for n in analysis["nodes"]:
        c = n["clock"]
        offset = f"{c['start_ns'] / 1e3:,.1f} ± {c['uncertainty_ns'] / 1e3:.1f} µs (drift {c['drift_ppm']:.1f} ppm)"
        if "figures" not in n:
            out.add_row(str(n["rank"]), n["host"], n["cpus"], offset, "-", "-", "-", "-", f"failed: {n['error']}")
            continue
        f = n["figures"]
        p999 = f"{f['p99.9 gap']:,.1f} µs" if "p99.9 gap" in f else "n < 1,000"  # the percentiles' rule
        out.add_row(str(n["rank"]), n["host"], n["cpus"], offset, f"{f['noise fraction']:.3f} %",
                    f"{f['max gap']:,.1f} µs", p999, f"{f['events']:,.0f}", verdict_text(n))  # fmt: skip
    return out


def coupled_table(rows: list[dict[str, Any]]) -> Table:
    out = Table(title="Coupled: a work quantum W then an Allreduce on the first N ranks; predicted from rank 0's "
                      "trace: the max of N (closed form), and simulated in the fast and the round model")  # fmt: skip
    for header in ("W µs", "ranks", "iterations", "ideal µs", "measured slowdown", "max of N", "fast model",
                   "round model"):  # fmt: skip
        out.add_column(header, justify="right")
    for r in rows:
        predicted = [f"{r[k]:.3f}" if k in r else "-" for k in ("predicted", "fast", "rounds")]
        out.add_row(str(r["work_us"]), str(r["ranks"]), f"{r['iterations']:,}", f"{r['ideal_ns'] / 1e3:,.1f}",
                    f"{r['slowdown']:.3f}", *predicted)  # fmt: skip
    return out


def describe(net: dict[str, Any]) -> str:
    """One line for the terminal and the report."""
    where = "across hosts" if net.get("across_hosts") else "within one host"
    g = net["per_byte_ns"]
    rate = f" ({1 / g:.2f} GB/s)" if g > 0 else ""
    return (
        f"Network to rank {net['peer']} ({where}), by ping-pong over {len(net['sizes'])} sizes: "
        f"L = {net['latency_ns'] / 1e3:.2f} µs, o = {net['overhead_ns'] / 1e3:.2f} µs "
        f"(send {net['send_overhead_ns'] / 1e3:.2f}, receive {net['recv_overhead_ns'] / 1e3:.2f}), "
        f"G = {g:.3f} ns/B{rate}"
    )


def audit_lines(analysis: dict[str, Any]) -> list[str]:
    differ = analysis.get("audit")
    if differ is None:
        return []
    if not differ:
        return ["Every node's audit has the same result for every finding."]
    return [f"Audit {f['id']}: " + "; ".join(f"{status} on {', '.join(names)}" for status, names in
                                             f["statuses"].items()) for f in differ]  # fmt: skip


def diff_lines(analysis: dict[str, Any]) -> list[str]:
    diff = analysis.get("config_diff") or {}
    if not diff:
        return ["Every node has the same configuration (kernel, command line, clocksource, THP, governors, "
                "isolation, SMT, irqbalance, virtualization)."]  # fmt: skip
    return [f"{name}: {'; '.join(fields)}" for name, fields in diff.items()]


def _on_common_clock(b: Builder, run: Run) -> list[tuple[str, float, float, Any, Any]]:
    """Each node's noise run moved to rank 0's clock: the probe's origin is
    in CLOCK_MONOTONIC_RAW, less the rank's offset."""

    assert run.session_id is not None
    out = []
    for node in sessions.runs_of(b.conn, run.session_id):
        place, trace = node.params.get("survey"), node.trace
        if not place or trace is None:
            continue
        c = place["clock"]
        start, end = Offset(int(c.get("start_at_ns", 0)), c["start_ns"], 0.0, 0), \
            Offset(int(c.get("end_at_ns", 0)), c["end_ns"], 0.0, 0)  # fmt: skip
        origin = float(node.result.get("origin", {}).get("monotonic_raw_ns", 0.0))

        for cpu in trace.cpus:  # on rank 0's clock, the drift interpolated
            name = f"{place['host']}:{place['rank']} CPU {cpu.cpu}"
            begin, finish = (
                to_rank0(origin + cpu.span_start_ns, start, end),
                to_rank0(origin + cpu.span_end_ns, start, end),
            )
            out.append((name, begin, finish, to_rank0(origin + cpu.start_ns, start, end), cpu.duration_ns))
    return out


class SurveyKind(Kind):
    name = "survey"
    in_report = True
    in_table = False

    def terminal(self, out: Console, run: Run) -> None:
        out.print(nodes_table(run.analysis))
        if run.analysis.get("network"):
            out.print(describe(run.analysis["network"]))
        if run.analysis.get("coupled"):
            out.print(coupled_table(run.analysis["coupled"]))
        for line in diff_lines(run.analysis) + audit_lines(run.analysis) + run.analysis.get("notes", []):
            out.print(line)
        for w in run.analysis.get("warnings", []):
            out.print(f"warning: {w}")

    def section(self, b: Builder, s: Section, run: Run) -> None:
        from quietcore.report import figures
        from quietcore.report.render import grid

        s.title = f"Survey of {run.analysis['ranks']} ranks"
        s.grids.append(grid(nodes_table(run.analysis)))
        b.figure(s, figures.node_heatmap(_on_common_clock(b, run)), "nodes",
                 "Each node's share of time lost per bin, on rank 0's clock (each rank's offset from the ping-pong "
                 "estimate); the longest gaps each rank sent (--send-events).")  # fmt: skip
        if run.analysis.get("network"):
            s.paragraphs.append(describe(run.analysis["network"]))
        coupled = run.analysis.get("coupled") or []
        if coupled:
            s.grids.append(grid(coupled_table(coupled)))
            b.figure(s, figures.amplification(coupled), "amplification",
                     "Slowdown of a work quantum + Allreduce against the ranks, measured (solid) beside what "
                     "simulate predicts from rank 0's noise trace and the measured network: the round model "
                     "(dashed) and the fast model (dotted).")  # fmt: skip
        s.paragraphs += [
            "How the nodes differ in configuration:",
            *diff_lines(run.analysis),
            *audit_lines(run.analysis),
        ]
        s.paragraphs += run.analysis.get("notes", [])
        s.warnings += run.analysis.get("warnings", [])


KIND = SurveyKind()
