from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from quietcore.attribution import instances, tracer
from quietcore.attribution.tracer import Interval, converter, intervals, match_gaps
from tests.conftest import PINGPONG

SAMPLE = (Path(__file__).parents[1] / "fixtures" / "trace" / "x86-tsc.txt").read_text()


def test_real_trace_lines_become_intervals() -> None:
    spans = intervals(SAMPLE, float, probe_comm="taskset")
    names = {s.name for s in spans}
    assert "irq 36 (virtio1-req.0)" in names and "softirq BLOCK" in names
    irq = next(s for s in spans if s.name == "irq 36 (virtio1-req.0)")
    assert irq.cpu == 1 and irq.start == 9049609393553 and irq.end == 9049609402211
    # taskset was switched out for sleep and back: the span is named by who ran.
    switched = [s for s in spans if s.name.startswith("task ")]
    assert switched[0] == Interval(1, 9049611509719, 9049611714989, "task sleep")


def test_converter_for_both_clocks() -> None:
    tsc = converter("x86-tsc", {"ticks": 1000, "monotonic_raw_ns": 0}, 2e9)
    assert tsc("3000") == 1000.0  # 2000 ticks at 2 GHz
    raw = converter("mono_raw", {"ticks": 0, "monotonic_raw_ns": 5_000_000_000}, 1.0)
    assert raw("5.000001") == 1000.0


def test_spans_explain_only_what_they_overlap() -> None:
    spans = [
        Interval(1, 100, 110, "local_timer"),
        Interval(1, 1000, 1400, "task kworker"),
        Interval(0, 0, 1e9, "other"),
    ]
    out = match_gaps(1, np.array([95.0, 990.0, 5000.0]), np.array([20.0, 500.0, 50.0]), spans)
    by = {s["name"]: s for s in out["sources"]}
    assert by["local_timer"]["ns"] == 10 and by["local_timer"]["gaps"] == 1
    assert by["task kworker"]["ns"] == 400
    assert "other" not in by  # another CPU's span
    # untraced: the rest of the first two gaps, and all of the third
    assert out["unmatched"] == {"gaps": 1, "ns": 10 + 100 + 50, "gap_ns": 50, "long_gaps": 0, "long_gap_ns": 0.0}
    # each gap whole to the source that led it: the led and the untouched add up to every gap
    assert by["local_timer"]["led_ns"] == 20 and by["task kworker"]["led_ns"] == 500
    assert sum(s["led_ns"] for s in out["sources"]) + out["unmatched"]["gap_ns"] == 20 + 500 + 50


def test_a_setup_that_fails_half_way_leaves_no_instance(monkeypatch: pytest.MonkeyPatch) -> None:
    """The instance is made, then a write fails (a kernel without a clock,
    say): the instance (and a tracefs mount made for it) is gone after."""
    ok, why = tracer.usable()
    if not ok or os.geteuid() != 0:
        pytest.skip(f"needs root and tracefs: {why or 'not root'}")
    write = tracer.TraceSession._write

    def failing(self: tracer.TraceSession, name: str, value: str) -> None:
        if name == "buffer_size_kb":
            raise OSError(errno.ENOMEM, "injected")
        write(self, name, value)

    monkeypatch.setattr(tracer.TraceSession, "_write", failing)
    with pytest.raises(OSError, match="injected"), tracer.TraceSession(frozenset({0})):
        pass
    assert not any((m / "instances" / f"{instances.PREFIX}{os.getpid()}").exists() for m in instances.MOUNTS)


def test_lost_events_per_cpu_buffer_from_its_stats(tmp_path: Path) -> None:
    """per_cpu/cpuN/stats, as the kernel writes it (Documentation/trace/ftrace.rst): overrun and
    dropped events, per buffer; at 384 CPUs which buffers lost is what to give more."""
    from quietcore.attribution.tracer import TraceSession
    from quietcore.report.kinds.intruders import notes

    stats = (
        "entries: {e}\noverrun: {o}\ncommit overrun: 0\nbytes: 0\noldest event ts: 0.0\nnow ts: 1.0\n"
        "dropped events: {d}\n"
    )
    for cpu, (o, d) in {0: (0, 0), 3: (120, 5), 12: (0, 40)}.items():
        (tmp_path / "per_cpu" / f"cpu{cpu}").mkdir(parents=True)
        (tmp_path / "per_cpu" / f"cpu{cpu}" / "stats").write_text(stats.format(e=7, o=o, d=d))
    session = TraceSession(frozenset({0, 3, 12}))
    session.instance = tmp_path
    assert session.lost_by_cpu() == {3: 125, 12: 40} and session.lost() == 165
    said = notes({"lost_events": 165, "lost_by_cpu": {"3": 125, "12": 40}})
    assert said == [
        "warning: the kernel lost 165 trace events, its buffer full between reads: CPU 3 125; CPU 12 40. The "
        "figures are short by what they held; more --buffer-kb keeps them."
    ]


def test_a_stream_reads_each_cpu_raw_and_the_merged_text_where_it_cannot(monkeypatch: pytest.MonkeyPatch) -> None:
    """Live: the same session streamed twice, raw pages then (the page header
    made unknown) the merged trace_pipe; each gives marks, the clock, and
    interrupts, and says how it read."""
    ok, why = tracer.usable()
    if not ok or os.geteuid() != 0:
        pytest.skip(f"needs root and tracefs: {why or 'not root'}")
    import subprocess

    from quietcore.attribution import rawtrace

    got = {}
    with tracer.TraceSession(None) as session:
        for read in ("per-CPU raw pages", "merged text"):
            if read == "merged text":
                monkeypatch.setattr(rawtrace, "layout", lambda events_dir: None)
            session.skip()
            with tracer.Stream(session) as stream:  # which marks the clock as it starts and as it ends
                subprocess.run(["sh", "-c", "for i in $(seq 20); do /bin/true; done; sleep 0.3"], check=True)
            text = stream.text()
            assert stream.cost()["read"] == read
            to_ns, (lo, hi) = tracer.marked_clock(text, session.clock)
            spans = intervals(text, to_ns)
            got[read] = {s.cpu for s in spans if s.name in ("local_timer", "reschedule", "call_function_single")
                         or s.name.startswith(("softirq", "irq "))}  # fmt: skip
            assert hi - lo > 0.3e9 and got[read] <= set(tracer._online()), got
            assert got[read], f"no interrupt told from the {read}"


def test_a_burst_as_a_stream_opens_and_as_it_ends_loses_neither_clock_mark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Live, in buffers of 4 KB: a burst on the marking CPU while the stream
    opens its buffers, and another as the run inside it ends. The first mark
    was written before the buffers were opened, and such a burst (TLB-flush
    IPIs, in `intruders --buffer-kb 4` after the fleet tests) overwrote it."""
    ok, why = tracer.usable()
    if not ok or os.geteuid() != 0:
        pytest.skip(f"needs root and tracefs: {why or 'not root'}")
    import subprocess
    import sys

    mask = os.sched_getaffinity(0)
    cpu = min(mask)

    def burst() -> None:
        subprocess.run([sys.executable, "-c", PINGPONG, str(cpu)], check=True, timeout=60)

    os.sched_setaffinity(0, {cpu})  # the marks are written on this CPU, where the bursts run
    try:
        with tracer.TraceSession(None, ("sched/sched_switch", "sched/sched_waking"), 4) as session:
            opened = session.buffers

            def opened_in_a_burst() -> Any:
                buffers = opened()
                burst()
                return buffers

            monkeypatch.setattr(session, "buffers", opened_in_a_burst)
            with tracer.Stream(session) as stream:
                burst()
            text = stream.text()
            lost = session.lost_by_cpu()  # the session's: the first burst came before the stream counted
    finally:
        os.sched_setaffinity(0, mask)
    assert lost.get(cpu, 0) > 0, "the bursts did not overflow the buffer: the test shows nothing"
    _, (lo, hi) = tracer.marked_clock(text, session.clock)  # raises where a mark was lost
    assert hi > lo
