"""Tasks that shared a measured CPU with the probe: a CPU busy with work is
not a noisy CPU. A CPU-bound task beside the spinner takes turns with it,
and its time slices (4 ms each under CFS at 250 Hz) came back as "periodic
sources at 125 and 250 Hz of 4 ms" (seen on the GPU node: a GPU loop in
Python on CPU 0), which `check --slurm-drain` would have drained the node
for: the job it was there to run.

Read without a tracer: every thread's CPU time (/proc/PID/task/TID/schedstat)
and the CPU it last ran on, before and after the probe (attribution.sampled).
A thread that is on a measured CPU at the end, and ran BUSY_SHARE of the
measured time or more while that CPU lost as much, shared that CPU. quietcore's own threads are not
counted, and the probe is gone by the second look."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from quietcore.attribution.sampled import Thread, threads
from quietcore.facts.cpulist import cpus_phrase
from quietcore.runs.analysis import of_slices
from quietcore.safe import plain

#: A thread that ran this share of a measured CPU's time shared it with the probe: a co-runner (an always
#: runnable task gets half under CFS), not an interruption. Below it, a task is the node's noise, which the
#: audit's placement check names.
BUSY_SHARE = 0.2
#: On a busy CPU, periodic gaps this long or longer are the task's time slices, not a source of noise.
SLICE_NS = 500_000.0


def look() -> dict[int, Thread]:
    """Every thread now, by tid."""
    return threads()[0]


def busy(before: Mapping[int, Thread], after: Mapping[int, Thread], measured_ns: Mapping[int, float],
         own: frozenset[int], lost_ns: Mapping[int, float]) -> dict[int, list[dict[str, Any]]]:  # fmt: skip
    """Per measured CPU, the threads that shared it, costliest first: pid, tid,
    command and the share of the measured time each ran. The two looks bracket
    more than the measurement (the probe's start and end), so a thread counts
    no more than the CPU lost while measured: one that ran before or after, or
    on another CPU before it came here, is not made a co-runner (seen in a
    suite run: another process was named as having run 66 % of a check's
    CPU, its time counted over the whole bracket)."""
    out: dict[int, list[dict[str, Any]]] = {}
    for tid, now in after.items():
        span = measured_ns.get(now.cpu)
        if not span or now.tgid in own or tid in own:
            continue
        then = before.get(tid)
        ran = min(now.runtime - (then.runtime if then is not None else 0), lost_ns.get(now.cpu, 0.0))
        if ran >= BUSY_SHARE * span:
            out.setdefault(now.cpu, []).append({"pid": now.tgid, "tid": tid, "comm": now.comm,
                                                "share": min(ran / span, 1.0)})  # fmt: skip
    return {cpu: sorted(found, key=lambda t: -t["share"]) for cpu, found in sorted(out.items())}


def apply(analysis: dict[str, Any], found: Mapping[int, list[dict[str, Any]]]) -> None:
    """Record the busy CPUs in a run's analysis, and take their tasks' time slices
    out of its periodic sources (kept, under "slices", for --json)."""
    if not found:
        return
    analysis["busy"] = {str(cpu): tasks for cpu, tasks in found.items()}
    for cpu in analysis.get("cpus", ()):
        if int(cpu["cpu"]) not in found:
            continue
        periodic = cpu.get("periodic") or []
        cpu["slices"] = [p for p in periodic if float(p.get("median_duration_ns") or 0) >= SLICE_NS]
        cpu["periodic"] = [p for p in periodic if float(p.get("median_duration_ns") or 0) < SLICE_NS]


#: Up to this many busy CPUs each is a line; above, one line for them all (a job on every CPU of a node).
EACH_UP_TO = 4


def lines(analysis: Mapping[str, Any], why: bool = True) -> list[str]:
    """'CPU 0 busy: python3 (pid 4242) ran 50% of it: a task, not noise' (and, with
    `why`, that its slices are not counted as sources); above EACH_UP_TO busy CPUs,
    one line: 'CPUs 0-63 busy: python3 (64 processes) ran 48-56% of each: ...'."""
    found = {int(cpu): tasks for cpu, tasks in (analysis.get("busy") or {}).items()}
    slices = " Its time slices are left out of the periodic sources." if why else ""
    if len(found) > EACH_UP_TO:
        tops = [tasks[0] for tasks in found.values()]
        comms = sorted({t["comm"] for t in tops})
        pids = len({t["pid"] for t in tops})
        low, high = min(t["share"] for t in tops), max(t["share"] for t in tops)
        who = (
            f"{', '.join(comms[:3])}{' and more' if len(comms) > 3 else ''} ({pids} process{'es' if pids > 1 else ''})"
        )
        share = f"{low:.0%}" if f"{low:.0%}" == f"{high:.0%}" else f"{100 * low:.0f}-{high:.0%}"
        return [f"{cpus_phrase(frozenset(found))} were shared: {plain(who)} ran {share} of each. A task is work, not "
                f"noise.{slices}"]  # fmt: skip
    out = []
    for cpu, tasks in found.items():
        who = ", ".join(f"{t['comm']} (pid {t['pid']}) ran {t['share']:.0%}" for t in tasks[:3])
        more = f" and {len(tasks) - 3} more" if len(tasks) > 3 else ""
        out.append(f"CPU {cpu} was shared: {plain(who)}{more} of its time. A task is work, not noise.{slices}")
    return out


def sliced(analysis: Mapping[str, Any]) -> list[int]:
    """The CPUs where the analysis named a periodic source a task's time slices (attribution.naming: gaps of a
    slice as often as the probe was preempted), busy as surely as where a thread was seen (the two looks can
    miss one: a task that ended before the second, or moved)."""
    return sorted(int(c["cpu"]) for c in analysis.get("cpus") or ()
                  if any(of_slices(p) for p in c.get("periodic") or ()))  # fmt: skip
