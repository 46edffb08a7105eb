"""How an intruder came to a watched CPU, in words: who woke, queued or sent
it, where, and from which call site (attribution.intruders.Came holds it as
data). One way a source came on several CPUs is one phrase, with their list."""

from __future__ import annotations

from collections.abc import Iterable

from quietcore.attribution.intruders import HERE, MOVED, QUEUED, SAID, SAMPLED, SENT, WOKEN, Came
from quietcore.facts.cpulist import cpus_phrase
from quietcore.safe import plain


def words(came: Came, cpus: Iterable[int] | None = None) -> str:
    """ "woken by watchdog_timer_fn on CPU 4", "sent by python3 (705) on CPU 0 from smp_call_function";
    `cpus`: where `by` ran, when it is one way on several CPUs (the came's own CPU otherwise)."""
    if came.how == SAID:
        return plain(came.by)
    if came.how == HERE:
        return "already here: its affinity includes this CPU"
    if came.how == SAMPLED:
        return "sampled: last seen on this CPU"
    if came.how == MOVED:
        return f"moved from CPU {came.moved}"
    where = set(cpus) if cpus is not None else ({came.cpu} if came.cpu is not None else set())
    on = f" on {cpus_phrase(frozenset(where))}" if where else ""
    work = f" in work {plain(came.work)}" if came.work else ""
    verb = {WOKEN: "woken by", QUEUED: "queued by", SENT: "sent by"}.get(came.how, came.how)
    said = f"{verb} {plain(came.by)}{work}{on}"
    if came.site:
        said += f" from {plain(came.site)}"
    if came.moved is not None:
        said += f", moved from CPU {came.moved}"
    return said


def key(came: Came) -> Came:
    """One way a source came whatever the CPU it came from: its came without the CPU."""
    return Came(came.how, came.by, None, came.work, came.site, came.moved)
