"""`--explain-above US` as a person reads it: a table a CPU, a row a gap
(when it came, how long, how much no traced event covers, and what ran in
it), each kernel stack once, numbered, in a legend under the tables; what
ran inside what ran before it ("inside vector local_timer") said so. What
the trace gave stays whole in --json (attribution.explain stores it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.table import Table

from quietcore.attribution.explain import EACH_CPU_UP_TO
from quietcore.attribution.intruders import came_of
from quietcore.facts.cpulist import cpus_phrase
from quietcore.report import came
from quietcore.safe import plain

#: Frames of a stack the legend gives, innermost first.
FRAMES = 6


def items(explained: Mapping[str, Any], what: str = "gaps") -> list[str | Table]:
    """The explanation: a line that says what follows, a table per CPU with gaps (past EACH_CPU_UP_TO
    such CPUs, one table of the node's longest), the stacks' legend and what a row's figures mean."""
    above = f"{explained['above_ns'] / 1e3:g} µs"
    over = [cpu for cpu in explained["cpus"] if cpu["over"]]
    quiet = [int(cpu["cpu"]) for cpu in explained["cpus"] if not cpu["over"]]
    out: list[str | Table] = []
    if quiet:  # the CPUs with none in one line: a line each was 384 lines of "none" on a quiet node
        out.append(f"{cpus_phrase(quiet)}: no {what} over {above}.")
    stacks: dict[tuple[str, ...], int] = {}
    if len(over) > EACH_CPU_UP_TO:
        # Past a few CPUs, the node's longest, not each CPU's: 384 CPUs with gaps over the bar were up to 7,680
        # gaps told, each with its episodes. --json keeps every CPU's.
        every = [(gap, int(cpu["cpu"])) for cpu in over for gap in cpu["gaps"]]
        longest = sorted(every, key=lambda t: -t[0]["duration_ns"])[: explained["limit"]]
        total = sum(int(c["over"]) for c in over)
        title = (f"{cpus_phrase([int(c['cpu']) for c in over])}: {total:,} {what} over {above}; the node's "
                 f"{len(longest)} longest, in the order they came. --json gives each CPU's.")  # fmt: skip
        out.append(_table(title, sorted(longest, key=lambda t: t[0]["start_ns"]), explained, stacks, with_cpu=True))
    for cpu in over if len(over) <= EACH_CPU_UP_TO else ():
        n, shown = int(cpu["over"]), len(cpu["gaps"])
        if n == 1:
            title = f"CPU {cpu['cpu']}: 1 {_one(what)} over {above}."
        elif shown == n:
            title = f"CPU {cpu['cpu']}: {n:,} {what} over {above}, in the order they came."
        else:
            title = f"CPU {cpu['cpu']}: {n:,} {what} over {above}; the {shown} longest, in the order they came."
        out.append(_table(title, [(gap, int(cpu["cpu"])) for gap in cpu["gaps"]], explained, stacks))
    if over:
        out += _notes(explained, stacks)
    return out


def _one(what: str) -> str:
    """ "gaps" as one: "gap"; "stretches the intruders took": "stretch the intruders took"."""
    first, _, rest = what.partition(" ")
    one = first[:-2] if first.endswith("ches") else first[:-1] if first.endswith("s") else first
    return f"{one} {rest}".strip()


def _table(title: str, gaps: Sequence[tuple[Mapping[str, Any], int]], explained: Mapping[str, Any],
           stacks: dict[tuple[str, ...], int], with_cpu: bool = False) -> Table:  # fmt: skip
    table = Table(title=title, title_justify="left")
    columns = [("CPU", "right")] if with_cpu else []
    columns += [("at s", "right"), ("µs", "right"), ("untraced µs", "right"), ("what ran in it", "left")]
    for name, justify in columns:
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for gap, cpu in gaps:
        at = (gap["start_ns"] - explained.get("origin_ns", 0.0)) / 1e9
        ran = "\n".join(_ran(gap, stacks)) or "nothing traced"
        cells = [f"{at:.6f}", f"{gap['duration_ns'] / 1e3:,.1f}", f"{gap['untraced_ns'] / 1e3:,.1f}", ran]
        table.add_row(*([str(cpu)] if with_cpu else []), *cells)
    return table


def _ran(gap: Mapping[str, Any], stacks: dict[tuple[str, ...], int]) -> list[str]:
    """A line per thing that ran in the gap: when it began from the gap's start, what it was, how long it ran
    in the gap, what it ran inside of, how it came, and its stack's number in the legend."""
    out = []
    inside: list[tuple[float, float, str]] = []  # (began, ended, who) of those before it, to say nesting
    for ep in gap["inside"]:
        name = ep["name"] if ep["name"].startswith(ep["kind"]) else f"{ep['kind']} {ep['name']}"
        who = plain(name) + (f" ({ep['pid']})" if ep.get("pid") is not None else "")
        began, ended = float(ep["at_ns"]), float(ep["at_ns"]) + float(ep["ns"])
        outer = next((w for b, e, w in reversed(inside) if b <= began and ended <= e + 1.0), None)
        line = f"{began / 1e3:+,.1f} {who}, {float(ep['ns']) / 1e3:,.1f} µs"
        if outer is not None:
            line += f", inside {outer}"
        ways = came_of(ep["came"])
        if ways:
            line += ", " + "; ".join(came.words(c) for c, _ in ways)
        if ep.get("stack"):
            key = tuple(plain(f) for f in ep["stack"][:FRAMES])
            line += f" [{stacks.setdefault(key, len(stacks) + 1)}]"
        out.append(line)
        inside.append((began, ended, who))
    if gap.get("more"):
        out.append(f"and {gap['more']} more")
    return out


def _notes(explained: Mapping[str, Any], stacks: Mapping[tuple[str, ...], int]) -> list[str | Table]:
    """What the rows' figures mean, once, and the stacks' legend."""
    out: list[str | Table] = [
        "What ran in a gap: when it began, in µs from the gap's start, what it was, and how long it ran inside "
        "the gap. A negative start: it began before the gap and ran into it.",
        "Untraced µs: the part of the gap no traced event covers; on a VM, the host's.",
    ]
    if stacks:
        legend = Table(title="Kernel stacks, innermost frame first", title_justify="left")
        legend.add_column("#", justify="right")
        legend.add_column("frames", justify="left")
        for frames, n in sorted(stacks.items(), key=lambda kv: kv[1]):
            legend.add_row(f"[{n}]", " < ".join(frames))
        out.append(legend)
    return out
