"""What every kind of run provides, with the defaults most kinds keep."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console

from quietcore.facts.cpulist import cpus_phrase, parse_cpulist
from quietcore.runs.model import Run

if TYPE_CHECKING:
    from quietcore.report.builder import Builder, Section

#: Columns of the flat table every run row has (after the session's).
RUN_COLUMNS = ("run_id", "seq", "kind", "run_status", "started_at")
METRIC = ("metric_name", "metric_unit", "metric_value", "metric_better")
# The measured region of a workload, prefixed: noise rows have ctxsw columns of their own.
MEASURED_KEYS = ("wall_ns", "cpu_ns", "user_ns", "system_ns", "ctxsw_voluntary", "ctxsw_involuntary", "minor_faults",
                 "major_faults")  # fmt: skip
MEASURED = tuple(f"measured_{k}" for k in MEASURED_KEYS)
RUN_JSON = ("params", "envelope", "context", "analysis")
#: The figures several tools measure alike, in µs or %: a spinning loop's longest gap (quietcore
#: noise, oslat's max, rtla osnoise's longest single noise), the share of the CPU it had (noise,
#: rtla), and a timer's wake-up latency (quietcore latency, cyclictest).
GAP_MAX = "longest gap (µs)"
AVAILABLE = "available (%)"
WAKE_MAX, WAKE_P50, WAKE_P99 = "wake-up latency max (µs)", "wake-up latency p50 (µs)", "wake-up latency p99 (µs)"
FIGURES = (GAP_MAX, AVAILABLE, WAKE_MAX, WAKE_P50, WAKE_P99)


#: What a run is, by its kind, for its heading: {cpus} is its CPUs in a phrase ("CPUs 0-1").
WHAT = {"calibrate": "The counter's calibration", "noise": "Noise of {cpus}", "latency": "Wake-up latency of {cpus}",
        "ctxswitch": "Context switches", "audit": "The audit", "experiment": "The experiment",
        "tune-prove": "Before and after tune", "survey": "The survey", "simulate": "The simulation",
        "intruders": "Intruders on {cpus}", "job": "A job's account", "check": "The check of {cpus}",
        "exec": "A command's run",
        "oslat": "oslat's noise of {cpus}", "cyclictest": "cyclictest's latency of {cpus}",
        "rtla-osnoise": "rtla osnoise's noise of {cpus}"}  # fmt: skip


def heading(run: Run) -> str:
    """A run's heading, by what it is: "Noise of CPUs 0-1, run 2"; its status where it did not complete."""
    what = WHAT.get(run.kind, f"A {run.kind} run")
    if "{cpus}" in what:
        what = what.format(cpus=_cpus(run.params.get("cpus")))
    number = "" if run.kind in ONE_A_SESSION else f", run {run.seq}"
    return f"{what}{number}" + ("" if run.status == "complete" else f": {run.status}")


#: The kinds a session has one run of: their heading needs no number ("The experiment, run 193" was its
#: last run's, after 192 measured ones).
ONE_A_SESSION = frozenset(("job", "calibrate", "audit", "experiment", "tune-prove", "survey", "simulate"))


def _cpus(value: Any) -> str:
    """A run's CPUs as stored (numbers, or a kernel list) in a phrase; "its CPUs" for anything else."""
    if isinstance(value, list) and value and all(type(c) is int and c >= 0 for c in value):
        return cpus_phrase(value)
    if isinstance(value, str):
        try:
            return cpus_phrase(parse_cpulist(value)) if value else "its CPUs"
        except ValueError:
            return "its CPUs"
    return "its CPUs"


class Kind:
    name = "generic"
    in_report = False  # whether a report gives it a section of its own
    in_table = True  # whether it has rows in the flat export table

    def terminal(self, out: Console, run: Run) -> None:
        """What `quietcore results show` prints under the run's title."""

    def section(self, b: Builder, s: Section, run: Run) -> None:
        """Fill the run's report section: paragraphs, grids, figures."""

    def rows(self, run: Run) -> list[dict[str, Any]]:
        """Rows of the flat export table: one per run by default."""
        return [run_row(run)] if self.in_table else []

    def figures(self, run: Run) -> dict[int, dict[str, float]]:
        """Per CPU, the figures a peer's tool also gives, by their shared names
        (FIGURES): what `compare` sets beside each other across tools."""
        return {}

    def to_json(self, run: Run) -> dict[str, Any]:
        """The run in the JSON export (schemas/results-v1.schema.json)."""
        return {"id": run.id, "seq": run.seq, "kind": run.kind, "params": run.params, "started_at": run.started,
                "ended_at": run.ended, "status": run.status, "envelope": run.full_envelope(), "context": run.context,
                "analysis": run.analysis, "summary": run.summary}  # fmt: skip


def run_row(run: Run) -> dict[str, Any]:
    """The columns every kind shares: the run, its metric and measured region."""
    row: dict[str, Any] = {"run_id": run.id, "seq": run.seq, "kind": run.kind, "run_status": run.status,
                           "started_at": run.started}  # fmt: skip
    metric = run.result.get("metric")
    if metric:
        row |= {f"metric_{k}": metric[k] for k in ("name", "unit", "value", "better")}
    measured = run.result.get("measured") or {}
    row |= {f"measured_{k}": measured[k] for k in MEASURED_KEYS if k in measured}
    return row
