"""The tracer's own reader: what draining the trace every 50 ms costs the
housekeeping CPU it runs on (issue 33 aims at 2 % of one), at rest and while
a shell forks `/bin/true` in a loop (sched, wakeup and IRQ events on every
CPU), and what a line of trace costs it. Every CPU is traced, as `intruders`
and `noise --explain-above` trace them.

    python bench/reader.py [--seconds 6]

Needs root (tracefs). The reader reads the instance's merged `trace_pipe`:
the kernel finds each next event by peeking every CPU's buffer, so on a node
of many CPUs a line costs more than here, where there are two."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from quietcore.attribution.tracer import Stream, TraceSession, usable

SHARE = 0.02  # of one CPU


def one(seconds: float, load: bool) -> tuple[int, float, float, dict[int, int]]:
    """(lines read, the reader's CPU ms, its share of one CPU, events lost by CPU) over `seconds`."""
    with TraceSession(None) as session:
        with Stream(session) as stream:
            if load:
                subprocess.run(["bash", "-c", f"end=$((SECONDS+{seconds:g})); while [ $SECONDS -lt $end ]; do "
                                "/bin/true; done"], check=True)  # fmt: skip
            else:
                time.sleep(seconds)
        text = stream.text()
        lost = session.lost_by_cpu()
    cost = stream.cost()
    return text.count("\n"), float(cost["cpu_ms"]), float(cost["share_of_one"]), lost


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=6.0)
    args = parser.parse_args()
    ok, why = usable()
    if not ok:
        print(f"skipped: {why}")
        return 0
    rest = one(args.seconds, load=False)
    busy = one(args.seconds, load=True)
    for name, (lines, cpu_ms, share, lost) in (("at rest", rest), ("forking", busy)):
        print(
            f"{name:8} {lines:8,} lines ({lines / args.seconds:8,.0f}/s)  reader {cpu_ms:6.0f} ms CPU, "
            f"{share:.2%} of one ({'PASS' if share <= SHARE else 'MISS'}: {SHARE:.0%})  lost by CPU {lost or 0}"
        )
    per_line = (busy[1] - rest[1]) / max(busy[0] - rest[0], 1) * 1e3
    print(f"a line beyond rest: {per_line:.2f} us of the reader's CPU ({len(os.sched_getaffinity(0))} CPUs here)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
