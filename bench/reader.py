"""The tracer's own reader: what draining the trace every 50 ms costs the
housekeeping CPU it runs on (issue 33 aims at 2 % of one at 384 CPUs), read
as quietcore reads it (each CPU's buffer raw, a page at a time) and as the
peer it replaced (the merged `trace_pipe`, which formats each event as text
in the kernel, on the reader's CPU), in the same run: at rest, and while a
shell forks `/bin/true` in a loop (sched, wakeup and IRQ events on every
CPU). Every CPU is traced, as `intruders` and `noise --explain-above` trace
them. The raw pages are told as text after the run: that cost is printed
too, since it moved there.

This node has 2 CPUs. At 384, each drain also reads 382 more buffers, empty
or not: that part is measured by reading 384 open per-CPU files (this
node's two, opened 192 times each) with tracing off, every one empty.

    python bench/reader.py [--seconds 6]

Needs root (tracefs)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from quietcore.attribution.rawtrace import CpuBuffers, events
from quietcore.attribution.tracer import Stream, TraceSession, usable

SHARE = 0.02  # of one CPU
DRAINS_A_SECOND = 20  # every 50 ms


def one(seconds: float, load: bool, raw: bool) -> tuple[int, float, float, float, dict[int, int]]:
    """(lines, the reader's CPU ms, its share of one CPU, ms telling pages as text, events lost by CPU)."""
    with TraceSession(None) as session:
        with Stream(session, raw=raw) as stream:
            if load:
                subprocess.run(["bash", "-c", f"end=$((SECONDS+{seconds:g})); while [ $SECONDS -lt $end ]; do "
                                "/bin/true; done"], check=True)  # fmt: skip
            else:
                time.sleep(seconds)
        text = stream.text()
        lost = stream.lost_by_cpu
        cost = stream.cost()
        assert cost["read"] == ("per-CPU raw pages" if raw else "merged text"), cost
    return text.count("\n"), float(cost["cpu_ms"]), float(cost["share_of_one"]), float(cost["told_ms"]), lost


def quiet_buffers(cpus: int = 384, seconds: float = 3.0, buffer_kb: int = 8192) -> tuple[float, float, float]:
    """The reader's share of one CPU over `cpus` empty per-CPU buffers (this
    node's, each opened many times; tracing off): reading every buffer at
    every drain, and draining as the reader does (a quiet buffer once a
    second, or sooner in a smaller buffer where the kernel wakes no reader:
    CpuBuffers.longest), each wait a poll of every file, as the reader's."""
    with TraceSession(None) as session:
        assert session.instance is not None
        (session.instance / "tracing_on").write_text("0")
        session.skip()
        here = sorted(os.sched_getaffinity(0))
        files = {i: session.instance / "per_cpu" / f"cpu{here[i % len(here)]}" / "trace_pipe_raw" for i in range(cpus)}
        buffers = CpuBuffers(files, 4096, buffer_bytes=buffer_kb * 1024, woken=session.woken)
        try:
            shares = []
            for everything in (True, False):
                cpu0, wall0 = time.thread_time_ns(), time.monotonic_ns()
                while time.monotonic_ns() - wall0 < seconds * 1e9:
                    buffers.drain(everything)
                    # the reader's wait, a poll of the 384 files: 50 ms, or as long as none is due
                    buffers.due(1 / DRAINS_A_SECOND if everything else buffers.next_wait(1 / DRAINS_A_SECOND))
                shares.append((time.thread_time_ns() - cpu0) / (time.monotonic_ns() - wall0))
            return shares[0], shares[1], buffers.longest
        finally:
            buffers.close()


def page_cost(seconds: float = 2.0) -> tuple[float, int, int]:
    """(µs of CPU, pages, events) reading buffers a forking shell filled with
    no reader running, tracing off: the raw reader's cost a line, alone."""
    with TraceSession(None) as session:
        assert session.instance is not None
        session.skip()
        subprocess.run(["bash", "-c", f"end=$((SECONDS+{seconds:g})); while [ $SECONDS -lt $end ]; do /bin/true; "
                        "done"], check=True)  # fmt: skip
        (session.instance / "tracing_on").write_text("0")
        buffers = session.buffers()
        assert buffers is not None
        try:
            started = time.thread_time_ns()
            buffers.drain()
            spent = (time.thread_time_ns() - started) / 1e3
        finally:
            buffers.close()
        pages = [p for kept in buffers.pages.values() for p in kept]
        return spent, len(pages), sum(1 for p in pages for _ in events(p, buffers.data_at))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=6.0)
    args = parser.parse_args()
    ok, why = usable()
    if not ok:
        print(f"skipped: {why}")
        return 0
    results = {}
    for load in (False, True):
        for raw in (True, False):  # alternated, so that both see the same host
            results[(load, raw)] = one(args.seconds, load, raw)
    for (load, raw), (lines, cpu_ms, share, told_ms, lost) in results.items():
        how = "raw pages " if raw else "merged text"
        told = f"  told after: {told_ms:5.0f} ms ({told_ms / max(lines, 1) * 1e3:.1f} us a line)" if raw else ""
        print(f"{'forking' if load else 'at rest':8} {how:12} {lines:8,} lines ({lines / args.seconds:7,.0f}/s)  "
              f"reader {cpu_ms:6.0f} ms CPU, {share:.2%} of one{told}  lost by CPU {lost or 0}")  # fmt: skip
    for load in (False, True):
        mine, peer = results[(load, True)], results[(load, False)]
        print(
            f"{'forking' if load else 'at rest'}: the raw reader's CPU / the merged text reader's: "
            f"{mine[1] / max(peer[1], 1e-9):.2f}"
        )
    busy_raw, rest_raw = results[(True, True)], results[(False, True)]
    busy_text, rest_text = results[(True, False)], results[(False, False)]
    per_line_raw = (busy_raw[1] - rest_raw[1]) / max(busy_raw[0] - rest_raw[0], 1) * 1e3
    per_line_text = (busy_text[1] - rest_text[1]) / max(busy_text[0] - rest_text[0], 1) * 1e3
    print(f"a line beyond rest, to the reader: raw {per_line_raw:.2f} us, merged text {per_line_text:.2f} us "
          f"({len(os.sched_getaffinity(0))} CPUs here; the raw figure is in the noise of its wake-ups)")  # fmt: skip
    spent, pages, lines = page_cost()
    per_line = spent / max(lines, 1)
    print(f"reading full buffers: {spent / 1e3:.1f} ms for {pages:,} pages of {lines:,} events, {per_line:.3f} us an "
          "event")  # fmt: skip
    lines_at_384 = 384 * 1_000  # a 250 Hz tick makes about 4 lines a tick (its entry and exit, a softirq's)
    # 1 MB: what intruders and run trace with (a quiet one read every 0.25 s); 8 MB: noise --explain-above's
    for kb in (1024, 8192):
        every, as_read, wait = quiet_buffers(buffer_kb=kb)
        share_384 = as_read + lines_at_384 * per_line / 1e6
        verdict = "PASS" if share_384 <= SHARE else "MISS"
        print(f"{kb // 1024} MB buffers: 384 empty ones cost {every:.2%} of one CPU read at every drain "
              f"({DRAINS_A_SECOND} a second), {as_read:.2%} as the reader drains them (a quiet one every {wait:g} s); "
              f"384 CPUs at 1,000 lines a CPU-second: the raw reader {share_384:.2%} of one CPU ({verdict}: "
              f"{SHARE:.0%})")  # fmt: skip
    print(f"the merged text at its {per_line_text:.2f} us a line here: {lines_at_384 * per_line_text / 1e6:.0%} of "
          "one CPU at 384 CPUs, before the kernel peeks at 384 buffers a line")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
