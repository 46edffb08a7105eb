"""The check's verdict: this node's short measurement against its reference,
by a stated test, and against any fixed limits.

Per CPU, the lost ratio of each 100 ms window of the check (but for the
window's longest gap: fleet.baseline.window_lost says why) is compared with
the reference's windows by a one-sided Mann-Whitney U test (is the check's
noise stochastically larger?), Holm-adjusted over the CPUs. A CPU fails when
the adjusted p is under ALPHA *and* the shift between the two sets of windows
(the Hodges-Lehmann estimate: the median of every check-minus-reference
difference) is over --tolerance of the CPU: significance alone would fail a
node for a difference too small to matter, a threshold alone for one run's
bad luck, and a shift of the windows' middle, unlike a total, is not moved by
one long stall of a vCPU by its host. On a virtual machine, a shift the
guest's own events do not account for (counted: their rates' rise times
an event's cost is no more than the tolerance; a task's preemptions count
only as far as they rose over the CPUs that share its tasks, since the
scheduler moves it among them) is the host's: its timer,
its other work, in episodes of minutes here; it is named, but fails the
CPU only with --host-noise fail, for no setting of the node removes it; so
is a new periodic source the analysis places outside the guest kernel, and
a reference's source grown dearer, each when none of the guest's counters
rose by half the source's frequency (the host's timer landing in the tick
makes it dearer; a task of the guest's at that rate adds its events). A periodic
source the reference does not have (at a frequency it lacks, or costing more
than the tolerance over its sources at that frequency) fails the CPU when it
costs more than the tolerance on its own; a smaller one is named. Fixed limits fail on their own."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from quietcore.facts.cpulist import brief_cpulist, counted, cpus_phrase, parse_cpulist
from quietcore.facts.fingerprint import changed
from quietcore.runs.analysis import same_frequency
from quietcore.runs.reference import WINDOW_S, CpuNoise, GuestCount, Periodic, Reference
from quietcore.stats.compare import holm
from quietcore.stats.rank import mann_whitney
from quietcore.stats.said import lost_pct as pct
from quietcore.stats.said import p_phrase

ALPHA = 0.001
TOLERANCE = 0.005  # of the CPU's time: 0.5 % more lost than the reference
#: Up to this many failing CPUs the line gives each one's reasons; past it, the three that lost most and a count.
FAILED_EACH_UP_TO = 4


HOST_NOISE = ("report", "fail")


@dataclass(frozen=True)
class Limits:
    tolerance: float = TOLERANCE
    max_lost_ratio: float | None = None
    max_gap_s: float | None = None
    max_events_per_s: float | None = None
    host_noise: str = "report"  # on a VM: the host's noise, which no setting of the node removes, is reported


@dataclass
class CpuVerdict:
    cpu: int
    passed: bool
    lost_ratio: float
    reference_lost_ratio: float | None
    p: float | None  # Holm-adjusted, one-sided
    shift: float | None = None  # Hodges-Lehmann shift of the windows' lost ratio over the reference's
    reasons: list[str] = field(default_factory=list)  # why it failed
    notes: list[str] = field(default_factory=list)  # what was seen but does not fail it
    new_sources: list[Periodic] = field(default_factory=list)
    #: the new sources among them that fail the CPU, each with its reason (one of `reasons`)
    failing: list[tuple[Periodic, str]] = field(default_factory=list)
    host_rose: bool = False  # on a VM: the windows shifted, the guest's counters did not (reported, not failed)


@dataclass
class Verdict:
    passed: bool
    cpus: list[CpuVerdict]
    reference: Reference | None
    drift: list[str]
    node: list[str] = field(default_factory=list)  # why the node fails apart from any CPU (the audit)
    first: str | None = None  # the first measurement's FAIL line, when a second one was taken to confirm it

    def fail_node(self, why: str) -> None:
        self.node.append(why)
        self.passed = False

    def line(self) -> str:
        """The one line a health check prints: PASS or FAIL and why."""
        failed = [c for c in self.cpus if not c.passed]
        if not failed and not self.node:
            head = self._pass()
        else:
            # A health check's one line (a Slurm reason, an NHC message): at 384 CPUs failing together, every
            # CPU's reasons were a line of 17,663 characters. Past FAILED_EACH_UP_TO, the worst few and a count.
            told = failed if len(failed) <= FAILED_EACH_UP_TO else sorted(failed, key=lambda c: -c.lost_ratio)[:3]
            parts = [*self.node, *(f"CPU {c.cpu}: {'; '.join(c.reasons)}" for c in told)]
            if len(told) < len(failed):
                rest = frozenset(c.cpu for c in failed) - {c.cpu for c in told}
                parts.append(f"and {len(rest)} more failed: {brief_cpulist(rest)}")
            head = "FAIL " + "; ".join(parts)
        if self.first is not None and failed:
            head += "; so did a second measurement"
        hosts = frozenset(c.cpu for c in self.cpus if c.host_rose)
        if hosts:
            head += f"; the host's noise rose on {cpus_phrase(hosts)}, reported, not failed: not this node's"
        if self.drift:
            head += f"; configuration drift since the reference: {', '.join(self.drift)}"
        return head

    def headline(self) -> str:
        """The first line on a screen: PASS or FAIL, then one figure per CPU that failed; why is below it
        (below()), one reason a line. line() keeps everything in one line for Slurm's reason."""
        failed = [c for c in self.cpus if not c.passed]
        if not failed and not self.node:
            return self._pass()
        parts = [counted(len(self.node), "failed audit finding")] if self.node else []
        if failed:
            worst = max(failed, key=lambda c: c.lost_ratio)
            against = f", reference {pct(worst.reference_lost_ratio)}" if worst.reference_lost_ratio is not None else ""
            figure = f"{pct(worst.lost_ratio)} lost{against}"
            parts.append(f"CPU {worst.cpu} {figure}" if len(failed) == 1 else
                         f"{len(failed)} CPUs, the most CPU {worst.cpu} {figure}")  # fmt: skip
        return "FAIL " + "; ".join(parts)

    def told(self) -> tuple[list[CpuVerdict], frozenset[int]]:
        """The failed CPUs said one by one, and the rest, counted: past FAILED_EACH_UP_TO, the three that lost
        most."""
        failed = [c for c in self.cpus if not c.passed]
        told = failed if len(failed) <= FAILED_EACH_UP_TO else sorted(failed, key=lambda c: -c.lost_ratio)[:3]
        return told, frozenset(c.cpu for c in failed) - {c.cpu for c in told}

    def _pass(self) -> str:
        """The worst CPU named, and its own reference: `reference set` gives each CPU's figure so."""
        worst = max(self.cpus, key=lambda c: c.lost_ratio)
        against = (f" against its reference's {pct(worst.reference_lost_ratio)}"
                   if worst.reference_lost_ratio is not None else "")  # fmt: skip
        return (
            f"PASS {counted(len(self.cpus), 'CPU')}: at most {pct(worst.lost_ratio)} lost, on CPU {worst.cpu}{against}"
        )

    def below(self) -> list[str]:
        """The sentences under the headline that are about the whole check, not one CPU."""
        out = [f"{why}." for why in self.node]
        _, rest = self.told()
        if rest:
            out.append(f"{cpus_phrase(rest)} failed too. --json gives each one's reasons.")
        if self.first is not None and not self.passed:
            out.append("A second measurement failed too.")
        hosts = frozenset(c.cpu for c in self.cpus if c.host_rose)
        if hosts:
            out.append(f"The host's noise rose on {cpus_phrase(hosts)}. That is reported, not failed: it is not "
                       "this node's.")  # fmt: skip
        if self.drift:
            out.append(f"The configuration changed since the reference: {', '.join(self.drift)}.")
        return out


def one_sided_larger(check: tuple[float, ...], ref: tuple[float, ...]) -> float:
    """p of 'the check's windows are stochastically larger than the reference's'."""
    u1, two_sided = mann_whitney(check, ref)
    half = two_sided / 2
    return half if u1 > len(check) * len(ref) / 2 else 1.0 - half


def hodges_lehmann(check: tuple[float, ...], ref: tuple[float, ...]) -> float:
    """The median of every pairwise difference check - reference: the shift the rank test tests."""
    diffs = np.subtract.outer(np.asarray(check, dtype=float), np.asarray(ref, dtype=float))
    return float(np.median(diffs))


def known_sources(s: Periodic, ref: CpuNoise) -> list[Periodic]:
    """The reference's sources at the check source's frequency (same_frequency)."""
    return [r for r in ref.periodic if same_frequency(s.frequency_hz, r.frequency_hz)]


def new_sources(check: CpuNoise, ref: CpuNoise, tolerance: float = TOLERANCE) -> list[Periodic]:
    """The check's periodic sources the reference does not have: at a frequency it
    lacks, or at one it has but costing more than `tolerance` of the CPU over what
    the reference's sources at that frequency cost together. Not by burst length
    alone: a tick's bursts double when the host's timer lands in them (seen here,
    8 to 30 µs at 250 Hz), and a planted source can share a frequency with the
    host's own (a 100 Hz source on one host here)."""
    out = []
    for s in check.periodic:
        known = known_sources(s, ref)
        if not known or s.lost_ratio - sum(r.lost_ratio for r in known) > tolerance:
            out.append(s)
    return out


def _source_words(s: Periodic, ref: CpuNoise) -> str:
    known = known_sources(s, ref)
    if not known:
        return f"a new periodic source, {s.label()}, {pct(s.lost_ratio)} of the CPU"
    was = " + ".join(r.label() for r in known)
    return (f"a periodic source of {s.label()}, {pct(s.lost_ratio)} of the CPU, where the reference had {was}, "
            f"{pct(sum(r.lost_ratio for r in known))}")  # fmt: skip


def guest_rise(c: CpuNoise, ref: CpuNoise, moved: dict[str, float] | None = None) -> float | None:
    """How much more of the CPU than in the reference the guest's own events took:
    each counter's change in rate times what one event costs. Counted, not timed:
    on a VM the host's time lands inside the guest's events (its timer in the tick,
    which then doubles), so the guest's time alone rises with the host's noise; the
    number of the guest's interrupts and preemptions does not. An interrupt is priced
    at the reference's cost of it, a preemption at this measurement's (a planted task's
    burst is the guest's). `moved` caps a preemption counter's rise at what its CPUs'
    class gained in all (switch_rises): a task that moved in from a sibling CPU is not
    new. None when either lacks the counts (a reference stored before they were kept:
    its shift is judged whole)."""
    if c.guest is None or ref.guest is None:
        return None
    before = {g.name: g for g in ref.guest}
    rise = 0.0
    for g in c.guest:
        was = before.pop(g.name, None)
        cost = g.cost_s if g.kind == "switch" or was is None else was.cost_s
        rise += _more_per_s(g, was, moved) * cost
    return rise - sum(g.per_s * g.cost_s for g in before.values())


def _more_per_s(g: GuestCount, was: GuestCount | None, moved: dict[str, float] | None) -> float:
    """How many more of a counter's events a second than the reference's; a preemption
    counter's no more than its CPUs' class gained in all (switch_rises), when known."""
    more = g.per_s - (was.per_s if was else 0.0)
    if g.kind == "switch" and moved is not None and more > 0:
        more = min(more, max(moved.get(g.name, more), 0.0))
    return more


def _classes(reference: Reference) -> list[frozenset[int]]:
    """The reference's CPUs in classes that share their tasks: the isolated and
    tickless ones (isolcpus, nohz_full: the boot's) and the rest."""
    cpu = reference.facts.get("cpu") or {}
    apart = frozenset().union(*(parse_cpulist(str(cpu.get(k) or "")) for k in ("isolated", "nohz_full")))
    return [k for k in (frozenset(reference.cpus) & apart, frozenset(reference.cpus) - apart) if k]


def switch_rises(check: list[CpuNoise], reference: Reference) -> dict[int, dict[str, float]]:
    """Per CPU, how much each preemption counter rose over its whole class (the CPUs
    that share tasks: _classes), in events a second. An unpinned task preempts the
    probe on whichever CPU the scheduler gave it: seen here, the node's daemons at
    about 20 a second on CPU 0 in one run and on CPU 1 in the next, which counted
    as a rise of 0.5 % of CPU 1 where none of the node's work had changed."""
    out: dict[int, dict[str, float]] = {}
    now = {c.cpu: c for c in check}
    for members in _classes(reference):
        total: dict[str, float] = {}
        for cpu in members:
            c, ref = now.get(cpu), reference.cpus[cpu]
            if c is None or c.guest is None or ref.guest is None:
                continue
            for g in c.guest:
                if g.kind == "switch":
                    total[g.name] = total.get(g.name, 0.0) + g.per_s
            for g in ref.guest:
                if g.kind == "switch":
                    total[g.name] = total.get(g.name, 0.0) - g.per_s
        for cpu in members:
            out[cpu] = total
    return out


def _guest_rose_at(c: CpuNoise, ref: CpuNoise, hz: float, moved: dict[str, float] | None = None) -> bool:
    """Whether one of the guest's counters rose by half a source's frequency or more: a source of the
    guest's at that rate adds about an event a period (a task's preemption, an interrupt), and one that
    did not rise cannot have made the source dearer. Other counters may rise (a busy daemon preempting
    the probe now and then) without making the host's 1 kHz timer the guest's. True when unknown."""
    if c.guest is None or ref.guest is None:
        return True
    before = {g.name: g for g in ref.guest}
    return any(_more_per_s(g, before.get(g.name), moved) >= 0.5 * hz for g in c.guest)


def _hosts(c: CpuNoise, ref: CpuNoise, limits: Limits, virtual: bool,
           moved: dict[str, float] | None = None) -> float | None:  # fmt: skip
    """On a VM, how much more of the CPU than the reference's the guest's own events took, when the
    rest is the host's to report rather than to fail on; None when the shift is to be judged whole."""
    if not virtual or limits.host_noise == "fail":
        return None
    guest = guest_rise(c, ref, moved)
    return guest if guest is not None and guest <= limits.tolerance else None


def _hosts_source(c: CpuNoise, ref: CpuNoise, s: Periodic, limits: Limits, virtual: bool,
                  moved: dict[str, float] | None = None) -> bool:  # fmt: skip
    """On a VM, whether a source the reference lacks or had cheaper may be the host's: none of the
    guest's counters rose by half its frequency (see _guest_rose_at), and it is outside the guest
    kernel or the reference's own source grown dearer."""
    if not virtual or limits.host_noise == "fail" or not (s.outside_guest or known_sources(s, ref)):
        return False
    return not _guest_rose_at(c, ref, s.frequency_hz, moved)


def judge(check: list[CpuNoise], reference: Reference | None, limits: Limits, drift: list[str],
          virtual: bool = False) -> Verdict:  # fmt: skip
    """The verdict of every checked CPU (see the module's text for the rule)."""
    compared = [c for c in check if reference is not None and c.cpu in reference.cpus and c.windows]
    raw = [one_sided_larger(c.windows, reference.cpus[c.cpu].windows) for c in compared] if reference else []
    adjusted = dict(zip((c.cpu for c in compared), holm(raw) if raw else [], strict=True))
    moved = switch_rises(check, reference) if reference is not None else {}
    out = []
    for c in check:
        ref = reference.cpus.get(c.cpu) if reference is not None else None
        v = CpuVerdict(c.cpu, True, c.lost_ratio, ref.lost_ratio if ref else None, adjusted.get(c.cpu))
        if ref is not None and v.p is not None:
            v.shift = hodges_lehmann(c.windows, ref.windows)
            host = _hosts(c, ref, limits, virtual, moved.get(c.cpu))
            if v.p < ALPHA and v.shift > limits.tolerance:
                words = f"{pct(c.lost_ratio)} lost against its reference's {pct(ref.lost_ratio)}, {p_phrase(v.p)}"
                if host is None:
                    v.reasons.append(words)
                else:
                    v.host_rose = True
                    # the guest's events' change may be a fall: "account for -0.011 %" said it oddly
                    said = (f"rose by {host * 100:.2g}% of the CPU" if host > 0 else
                            "did not rise" if host == 0 else f"fell by {-host * 100:.2g}% of the CPU")  # fmt: skip
                    v.notes.append(f"{words}, but the guest's own events, counted, {said}: the host's noise rose, not "
                                   "this node's. --host-noise fail counts it")  # fmt: skip
            for s in new_sources(c, ref, limits.tolerance):
                hosts = s.lost_ratio > limits.tolerance and _hosts_source(c, ref, s, limits, virtual, moved.get(c.cpu))
                if hosts and s.outside_guest:
                    v.notes.append(f"{_source_words(s, ref)}: the host's, outside the guest kernel")
                elif hosts:
                    # the reference's source, dearer with no more of the guest's events at its rate: the host's
                    # time inside them (the tick when the host's timer lands in it)
                    v.host_rose = True
                    v.notes.append(f"{_source_words(s, ref)}: longer, not more often: the host's")
                elif s.lost_ratio > limits.tolerance:
                    v.reasons.append(_source_words(s, ref))
                    v.failing.append((s, v.reasons[-1]))
                else:
                    v.notes.append(f"{_source_words(s, ref)}, under the tolerance")
                v.new_sources.append(s)
        elif reference is not None:
            v.notes.append("not in the reference: held to the fixed limits only")
        if limits.max_lost_ratio is not None and c.lost_ratio > limits.max_lost_ratio:
            v.reasons.append(f"{pct(c.lost_ratio)} lost, over --max-lost-ratio {limits.max_lost_ratio:g}")
        if limits.max_gap_s is not None and c.max_gap_s > limits.max_gap_s:
            v.reasons.append(f"a gap of {c.max_gap_s * 1e6:.0f} µs, over --max-gap-us {limits.max_gap_s * 1e6:g}")
        if limits.max_events_per_s is not None and c.events_per_s > limits.max_events_per_s:
            v.reasons.append(f"{c.events_per_s:.0f} events/s, over --max-events-per-s {limits.max_events_per_s:g}")
        v.passed = not v.reasons
        out.append(v)
    return Verdict(all(v.passed for v in out), out, reference, drift)


def drift(before: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """The facts that differ between the reference's node and this one, by dotted
    name (`boot_params.nohz_full`, `thp.enabled`), the volatile evidence left out."""
    return [name for name, _, _ in changed(before, now)]


def confirm(first: Verdict, second: Verdict) -> Verdict:
    """A failed check measured again: a CPU fails only if it failed both times.
    A gate must not drain a node for a transient: on this VM the host now and then
    steals a further 1 % of a vCPU for half a second, in every window at once
    (seen once in 20 quiet checks in a CI run); a source that stays, stays."""
    before = {c.cpu: c for c in first.cpus}
    for c in second.cpus:
        was = before.get(c.cpu)
        if not c.passed and was is not None and not was.passed:
            # Failed twice: what either measurement found explains it. A source the periodicity search
            # found once can be missed in the next half second: seen here, a 100 Hz source in step with
            # the host's 1 kHz timer, its bursts among the timer's.
            why = {id(src): words for src, words in was.failing}
            for src in was.new_sources:
                if not any(same_frequency(n.frequency_hz, src.frequency_hz) for n in c.new_sources):
                    c.new_sources.append(src)
                    if id(src) in why and why[id(src)] not in c.reasons:
                        c.reasons.append(why[id(src)])
                        c.failing.append((src, why[id(src)]))
        if not c.passed and was is not None and was.passed:
            c.notes.append(f"failed in a second measurement, not in the first: {'; '.join(c.reasons)}")
            c.reasons, c.passed = [], True
        elif c.passed and before.get(c.cpu) is not None and not before[c.cpu].passed:
            c.notes.append(f"a transient: it failed in a first measurement, not in a second. The first: "
                           f"{'; '.join(before[c.cpu].reasons)}")  # fmt: skip
    second.passed = all(c.passed for c in second.cpus) and not second.node
    second.first = first.line()
    return second


def to_json(v: Verdict) -> dict[str, object]:
    """The verdict as stored with the check's run and printed by --json."""
    ref = v.reference
    return {
        "verdict": "pass" if v.passed else "fail",
        "line": v.line(),
        "headline": v.headline(),
        "reference": None
        if ref is None
        else {
            "id": ref.id,
            "name": ref.name,
            "host": ref.host,
            "fingerprint": ref.fingerprint,
            "session": ref.session_id,
        },
        "drift": v.drift,
        "node": v.node,
        "measurements": 1 if v.first is None else 2,
        "first": v.first,
        "test": f"one-sided Mann-Whitney U on the lost ratio of {WINDOW_S * 1e3:g} ms windows (each but for its "
        f"longest gap), Holm over the CPUs, alpha {ALPHA:g}, and a Hodges-Lehmann shift over the tolerance",
        "cpus": [
            {
                "cpu": c.cpu,
                "passed": c.passed,
                "lost_ratio": c.lost_ratio,
                "reference_lost_ratio": c.reference_lost_ratio,
                "p": c.p,
                "shift": c.shift,
                "reasons": c.reasons,
                "notes": c.notes,
                "host_rose": c.host_rose,
                "new_sources": [
                    {
                        "frequency_hz": s.frequency_hz,
                        "median_duration_s": s.median_duration_s,
                        "lost_ratio": s.lost_ratio,
                    }
                    for s in c.new_sources
                ],
            }
            for c in v.cpus
        ],
    }
