"""What to change first: at most three changes, ranked by the time each
would remove, as the account of every measured CPU measured it, each with
the audit's finding that checks it and its fix; and the host's share, said
as what no setting of the guest removes.

A source's time goes to the change that removes it (the tick and its
timers to nohz_full, load balancing to isolcpus=domain, RCU's callbacks to
rcu_nocbs, a task or a device IRQ on the CPU to moving it off). "Would
remove" is the most it could: on the CPUs made targets, with one task on
each. What nothing in the guest removes (the host on a VM, firmware on bare
metal) is not a change, and is said apart."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from quietcore.report.account import Account

#: A change that would remove less of the lost time than this is not worth a line.
WORTH = 0.01

#: The change that removes a source: (what it is, the audit finding that checks and fixes it).
TICK = ("the tick and the timers it runs", "cpu.nohz_full")
BALANCING = ("the scheduler's load balancing", "cpu.isolcpus")
RCU = ("RCU's callbacks", "cpu.rcu_nocbs")
TASKS = ("other tasks on the measured CPUs", "task.placement")
KTHREADS = ("kernel threads that may move", "kthread.placement")
IRQS = ("device interrupts", "irq.affinity")

#: Every finding a change names.
FINDINGS = tuple(dict.fromkeys(f for _, f in (TICK, BALANCING, RCU, TASKS, KTHREADS, IRQS)))

_BY_NAME = (
    (re.compile(r"^(local_timer|LOC\b|timer_expire|hrtimer_expire|irq_work|IWI\b|softirq (TIMER|HRTIMER))"), TICK),
    (re.compile(r"^task kworker/\d+:"), TICK),  # per-CPU work: vmstat and the like, which nohz_full quiets
    (re.compile(r"^(softirq SCHED|task migration/)"), BALANCING),
    (re.compile(r"^(softirq RCU|task rcu)"), RCU),
    (re.compile(r"^task (kworker/u|kcompactd|kswapd|khugepaged|kdamond)"), KTHREADS),
    (re.compile(r"^(task |preempted by another task|reschedule|RES\b|TLB\b)"), TASKS),
    (re.compile(r"^(irq \d+|\d+ |softirq )"), IRQS),
)


@dataclass(frozen=True)
class Change:
    what: str
    finding: str
    ns: float
    share: float  # of the time lost on every CPU measured
    summary: str  # the finding's, as the audit says it
    fix: str  # its first piece of advice; empty when the audit has none


def change_of(name: str) -> tuple[str, str] | None:
    """The change that removes a source of an account, by its row's name; None for none."""
    return next((change for pattern, change in _BY_NAME if pattern.search(name)), None)


def rank(accounts: Iterable[Account], findings: Iterable[Mapping[str, Any]], limit: int = 3
         ) -> tuple[list[Change], float, float]:  # fmt: skip
    """(the changes worth a line (WORTH), biggest first, at most `limit`; the time lost on every CPU;
    the part no change removes: the accounts' rest, steal, and what no change is
    known for)."""
    by_finding = {str(f["id"]): f for f in findings}
    total, apart = 0.0, 0.0
    ns: dict[str, float] = {}
    what: dict[str, str] = {}
    for a in accounts:
        total += a.lost_ns
        apart += a.rest.ns
        for row in a.rows:
            change = change_of(row.name)
            if change is None:
                apart += row.ns
                continue
            what[change[1]] = change[0]
            ns[change[1]] = ns.get(change[1], 0.0) + row.ns
    out = []
    for finding, spent in sorted(ns.items(), key=lambda kv: -kv[1]):
        if not total or spent / total < WORTH:
            continue
        f = by_finding.get(finding, {})
        advice = f.get("advice") or []
        out.append(Change(what[finding], finding, spent, spent / total if total else 0.0,
                          str(f.get("summary", "")), str(advice[0]) if advice else ""))  # fmt: skip
    return out[:limit], total, apart


def lines(accounts: Iterable[Account], findings: Iterable[Mapping[str, Any]], virtualized: bool) -> list[str]:
    """What to change first, as a few sentences, for lab's end and the report's start."""
    accounts = list(accounts)
    changes, total, apart = rank(accounts, findings)
    if not total:
        return []
    out = ["What to change first, by the time each would remove (at most: on the CPUs made targets, one task each):"]
    for k, c in enumerate(changes, start=1):
        fix = f": {c.fix}" if c.fix else ""
        said = f" ({c.finding}: {c.summary})" if c.summary else f" ({c.finding})"
        out.append(f"  {k}. {c.what}: {c.share:.0%} of the lost time{said}{fix}")
    if not changes:
        out.append(
            f"  nothing that would remove {WORTH:.0%} of the lost time or more: the account names no such source"
        )
    where = ("the host's (vCPU preemption, its own timers): no setting of this guest removes it; compare runs of "
             "the same host and VM size, or measure on bare metal") if virtualized else (
             "what neither the trace nor the counters name (firmware, SMIs): no kernel setting removes it")  # fmt: skip
    out.append(f"  and {apart / total:.0%} of the lost time is {where}.")
    return out
