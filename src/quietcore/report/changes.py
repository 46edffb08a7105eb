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
TICK = ("the tick and its timers", "cpu.nohz_full")
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


@dataclass(frozen=True)
class Shares:
    """A session's lost time over every CPU it measured, and the two shares every place that says the
    session gives, one figure each (lab, results show, audit, the report, simulate): the tick and the
    timers it runs (what nohz_full would remove), and what no setting of the guest removes (the account's
    rest and steal: on a VM, the host)."""

    lost_ns: float
    tick: float
    host: float
    virtualized: bool
    #: whether any CPU's gaps came with counters or a trace: an imported trace's have neither, and its
    #: shares would read "the tick 0%, firmware 100%"
    known: bool = True

    def line(self, cpus: str, session: int | None = None) -> str:
        """ "In session 3, the tick and its timers took 50% of the time CPUs 0-1 lost; the host took 46%." """
        if not self.known:
            where = f"session {session}'s" if session is not None else "these"
            return f"No counter or trace came with {where} gaps, so nothing says what took the time {cpus} lost."
        where = f"In session {session}, the" if session is not None else "The"
        host = "the host" if self.virtualized else "what nothing names, firmware or SMIs,"
        return (f"{where} tick and its timers took {self.tick:.0%} of the time {cpus} lost; {host} took "
                f"{self.host:.0%}.")  # fmt: skip


def shares(accounts: Iterable[Account], virtualized: bool) -> Shares:
    """The session's Shares, from its CPUs' accounts."""
    total = tick = host = 0.0
    known = False
    for a in accounts:
        known = known or not a.uncounted
        total += a.lost_ns
        host += a.rest.ns
        for row in a.rows:
            if row.name == "steal":
                host += row.ns
            elif change_of(row.name) == TICK:
                tick += row.ns
    return Shares(total, tick / total if total else 0.0, min(host / total, 1.0) if total else 0.0, virtualized,
                  known)  # fmt: skip


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


def lines(accounts: Iterable[Account], findings: Iterable[Mapping[str, Any]], virtualized: bool, cpus: str,
          session: int | None = None) -> list[str]:  # fmt: skip
    """What to change first, for lab's end and the report's start: the session's shares (`cpus`: which
    CPUs, as a phrase), then a short list, each change with the audit's finding, its summary and fix."""
    accounts = list(accounts)
    changes, total, _ = rank(accounts, findings)
    if not total:
        return []
    share = shares(accounts, virtualized)
    out = [share.line(cpus, session), "What to change first, by the time each would remove at most:"]
    for k, c in enumerate(changes, start=1):
        out.append(f"  {k}. {c.what}: up to {c.share:.0%} of the lost time. {c.finding}: {c.summary}.")
        if c.fix:
            out.append(f"     Fix: {c.fix.rstrip('.')}.")
    if not changes:
        out.append(f"  Nothing named would remove {WORTH:.0%} of the lost time or more.")
    if virtualized:
        out.append(f"No setting of this guest removes the host's {share.host:.0%}. Compare runs on the same host "
                   "and VM size, or measure on bare metal.")  # fmt: skip
    else:
        out.append(f"No kernel setting removes the {share.host:.0%} that nothing names: firmware, SMIs.")
    return out
