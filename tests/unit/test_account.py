"""What the output says of a run reads as one account: every column named
for what it counts, every header true of the rows under it, parameters as
a person reads them (issue: one account of where the time went)."""

from __future__ import annotations

import io

from rich.console import Console

from quietcore.attribution.explain import lines
from quietcore.report.tables import TRACED_COLUMNS, traced_table
from quietcore.runs.model import params_text


def _text(renderable: object) -> str:
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(renderable)
    return out.getvalue()


def _rows(renderable: object) -> list[list[str]]:
    return [[c.strip() for c in line.split("│")[1:-1]] for line in _text(renderable).splitlines() if "│" in line]


def test_a_traced_source_with_time_and_no_gap_is_said_why() -> None:
    """`hrtimer_expire │ 0 │ 5.97` read as a contradiction: it ran inside
    gaps the tick's interrupt led. The columns and the caption say so."""
    cpu = {"cpu": 1, "sources": [{"name": "local_timer", "gaps": 491, "ns": 6.63e6},
                                 {"name": "hrtimer_expire", "gaps": 0, "ns": 2.53e6}],
           "unmatched": {"gaps": 584, "ns": 8.29e6}}  # fmt: skip
    shown = _text(traced_table(cpu, "x86-tsc"))
    assert "gaps led" in shown and ["hrtimer_expire", "0", "2.53"] in _rows(traced_table(cpu, "x86-tsc"))
    assert TRACED_COLUMNS.startswith("gaps led: the gaps a source covered the most of; ms: all it covered inside")


def test_a_table_of_many_traced_sources_sums_the_rest() -> None:
    cpu = {"cpu": 0, "sources": [{"name": f"irq {i}", "gaps": 1, "ns": 1e6} for i in range(11)],
           "unmatched": {"gaps": 0, "ns": 0.0}}  # fmt: skip
    assert ["3 more", "3", "3.00"] in _rows(traced_table(cpu, "mono_raw"))


def test_the_explained_gaps_header_says_their_order_and_columns() -> None:
    """Its header said "the longest 20 a CPU" over gaps listed by time (the
    longest came 17th), and the rows had no column names."""
    gap = {"start_ns": 2e9, "duration_ns": 273e3, "untraced_ns": 200e3, "more": 0,
           "inside": [{"at_ns": 48.8e3, "ns": 67.4e3, "kind": "vector", "name": "local_timer", "pid": None,
                       "came": {}, "stack": []}]}  # fmt: skip
    explained = {"above_ns": 50e3, "limit": 20, "origin_ns": 0.0, "cpus": [{"cpu": 1, "over": 31, "gaps": [gap]}]}
    text = lines(explained)
    assert "in the order they came" in text[0] and "when it began (from the start of the gap)" in text[0]
    assert text[1] == "CPU 1: 31 gaps over 50 µs; its 1 longest:"
    assert text[2] == "CPU 1 at 2.000000 s: 273.0 µs, 200.0 µs of it untraced"
    assert text[3].split() == ["+48.8", "µs", "67.4", "µs", "vector", "local_timer"]


def test_a_runs_parameters_read_as_words_not_a_python_dict() -> None:
    """`results show` printed `noise {'cpus': '0', ..., 'threshold_ns': None}`, with
    `'max_events_basis': '--max-events'`, quietcore's own note of where a value came from."""
    params = {"cpus": "0-1", "duration_s": 2.0, "mode": "spin", "threshold_ns": None, "max_events": 100000,
              "max_events_basis": "--max-events", "force": False, "limits": {"tolerance": 0.005}}  # fmt: skip
    assert params_text(params) == ("cpus 0-1, duration 2 s, mode spin, max events 100,000, force no, "
                                   'limits {"tolerance": 0.005}')  # fmt: skip
