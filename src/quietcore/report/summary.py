"""A noise run of many CPUs, said in a screen: CPUs that share a finding are
one line with a CPU list, and a CPU that differs from its group is an
outlier, named with its detail.

Groups: the isolated (isolcpus, nohz_full) CPUs and the others, as the
node's facts have them (one group where nothing is isolated). An outlier:
a CPU whose lost share stands over its group's median by more than six
median absolute deviations (scaled to a normal's sigma) of the group's half
under its median, or of the whole group where that is less, and half a percent
of the CPU, or one with a periodic source, of half a percent of the CPU or
more, that at most OWN_SHARE of its group's CPUs have (the same frequency,
lengths within SAME_SOURCE of each other, as the shared sources' lines take
them). A source more of a group's CPUs share is their line, saying how many
of the run's CPUs they are: 17 CPUs of 64 with a source were 17 outliers. The
per-CPU table stays whole up to FULL_UP_TO CPUs; above, a row per group
(min / median / max) and the outliers' own rows.

Where the run kept where its CPUs sit (a socket, a NUMA node, an L3 group:
facts.topology.places), a group of them noisier than the rest is a line
of its own (`apart`): a rank test of its CPUs' losses against the rest of
the smallest group holding it, finest level first, so a noisy L3 group is
not said again as a noisier socket."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from rich.table import Table

from quietcore.facts.cpulist import brief_cpulist, cpus_phrase, figure_range, figure_spread, parse_cpulist
from quietcore.facts.topology import LEVEL_NAMES, LEVELS
from quietcore.report import sources
from quietcore.report.account import UNCOUNTED, Account, rest_words
from quietcore.report.text import noise_table, outside_words
from quietcore.runs.analysis import (
    FREQ_MATCH,
    SAME_SOURCE,
    SLICES,
    TICK,
    CpuAnalysis,
    Named,
    Periodic,
    same_source,
)
from quietcore.stats.percentiles import lower_mad, scaled_mad
from quietcore.stats.rank import mann_whitney

#: Up to this many CPUs a run is told CPU by CPU (the README's tour); above, summed up, its outliers named.
DETAIL_UP_TO = 4
#: Up to this many CPUs the table keeps a row per CPU; above, a row per group.
FULL_UP_TO = 32
#: How far over its group's median (in scaled MADs, and at least in share of the CPU) an outlier's loss stands.
MADS, FLOOR = 6.0, 0.005
#: Or how many times its group's median an outlier's loss is (and FLOOR over it), whatever the group's spread: a
#: group of a few kinds has a MAD of half the distance between them (this VM's 64-CPU replays, four kinds of
#: 1.09-1.31 %: 0.29 %, a bar at 3.1 %), and a CPU losing twice the median (2.63 %) went unnamed.
TIMES = 1.5
#: Shared sources under this share of a CPU are counted in one line, not told one a line.
SOURCE_FLOOR = 0.001
#: A source its group lacks makes an outlier when it costs this share of the CPU at least, as a loss must
#: stand FLOOR over its group's: a weak train is found on some CPUs of a group and missed on others (100 Hz
#: x 2 µs, 0.02 % of a CPU here; and past the scouts, whose search stops at the node's floor, the host's
#: 100 Hz x 29 µs, 0.23 %, found on 1 of 63 CPUs replaying one CPU's trace).
LACKS_FLOOR = 0.005
#: A source on at most this share of a group's CPUs (one at least) is each one's own, an outlier; on more, the
#: CPUs share it, one line (17 of 64 CPUs with one source were 17 outliers). Not one CPU alone: a planted 100 Hz
#: x 200 µs matched a host's 100 Hz train on one other CPU of 64 (lengths within SAME_SOURCE), in a CI run.
OWN_SHARE = 0.05
#: A source found on one CPU alone, under LACKS_FLOOR of it, still has its line where it takes this share of the
#: CPU's lost time: a 37 Hz x 60 µs train, 0.22 % of a CPU and 11 % of its lost time, found on one of 384 CPUs
#: where the search missed it on the other that had it, was on no line (issue 62). So is a source CPUs share
#: under SOURCE_FLOOR of a CPU, where it takes this share of their lost time (the median).
OWN_LOST = 0.05
#: Lines of sources on one CPU each, at most; the rest are counted in a line.
ONE_CPU_LINES = 8


@dataclass(frozen=True)
class Group:
    name: str
    cpus: tuple[int, ...]


def groups(cpus: Sequence[int], facts: Mapping[str, Any]) -> list[Group]:
    """The isolated CPUs and the others, where the facts say which; else all as one."""
    cpu = facts.get("cpu") or {}
    apart: frozenset[int] = frozenset()
    for key in ("isolated", "nohz_full"):
        try:
            apart |= parse_cpulist(str(cpu.get(key) or ""))
        except ValueError:
            continue
    mine = sorted(cpus)
    isolated = tuple(c for c in mine if c in apart)
    rest = tuple(c for c in mine if c not in apart)
    if not isolated or not rest:
        return [Group("all", tuple(mine))]
    return [Group("isolated", isolated), Group("housekeeping", rest)]


def _lost_share(row: Mapping[str, Any]) -> float:
    measured = float(row.get("measured_ns") or 0.0)
    return float(row["lost_ns"]) / measured if measured else 0.0


#: How an outlier's own source is told.
LACKS = "a periodic source its group lacks: "


class Why(str):
    """Why a CPU is an outlier, as its line says it, and what that is: `loss`, its
    loss stands out (outlying_groups gathers a group of such CPUs); `source`, the
    periodic source only it has (periodic_lines leaves it out of the lines CPUs
    share). A str, so it is printed and compared as its text."""

    loss: bool
    source: Periodic | None

    def __new__(cls, text: str, *, loss: bool = False, source: Periodic | None = None) -> Why:
        why = super().__new__(cls, text)
        why.loss, why.source = loss, source
        return why


def _sources(p: Periodic) -> str:
    return f"{p.frequency_hz:,.0f} Hz x {p.median_duration_ns / 1000:,.1f} µs"


def _alike(p: Periodic, q: Periodic) -> bool:
    """One source on two CPUs (runs.analysis.same_source)."""
    return same_source(p.frequency_hz, p.median_duration_ns, q.frequency_hz, q.median_duration_ns)


def outliers(rows: Sequence[Mapping[str, Any]], analyses: Mapping[int, CpuAnalysis], found: list[Group],
             away: Sequence[frozenset[int]] = ()) -> dict[int, list[Why]]:  # fmt: skip
    """Each outlier CPU, with why: its loss against its group's, a source its group lacks.
    `away`: the sockets, NUMA nodes or L3 groups said apart (apart_groups): their CPUs'
    loss is their group's, neither an outlier's nor counted in the median's spread, and a
    source most of such a group has is theirs (their gaps are longer together)."""
    by_cpu = {int(r["cpu"]): r for r in rows}
    covered = frozenset().union(*away)
    home = {c: cpus for cpus in away for c in cpus}
    out: dict[int, list[Why]] = {}
    for g in found:
        mine = [c for c in g.cpus if c in by_cpu]
        if len(mine) < 3:
            continue  # two CPUs cannot say which of them is the odd one
        usual = [c for c in mine if c not in covered] or mine
        shares = np.array([_lost_share(by_cpu[c]) for c in usual])
        median = float(np.median(shares))
        # The spread of the group's lower half: what sets CPUs apart also widens the whole MAD (see lower_mad).
        # Or the whole MAD where it is the smaller: where a group's CPUs are of two kinds, the fewer (a quarter
        # to a half of them) below the median, the lower half holds most of them and spreads over both kinds, where
        # the whole MAD is the spread of the many about the median.
        mad = min(lower_mad(shares), scaled_mad(shares))
        losing: set[int] = set()  # the group's CPUs set apart by their loss
        for c, share in zip(usual, shares.tolist(), strict=True):
            if c not in covered and share - median > FLOOR and (share - median > MADS * mad or share > TIMES * median):
                out.setdefault(c, []).append(Why(f"loses {share:.2%} of its time, its group's median {median:.2%}",
                                                 loss=True))  # fmt: skip
                losing.add(c)
        # every source of the group as arrays, so a source's CPUs are counted in one pass (by CPU
        # and source it was 0.4 s at 384 CPUs)
        sources = [(o, q) for o in mine if (oa := analyses.get(o)) is not None for q in oa.periodic]
        freq = np.array([q.frequency_hz for _, q in sources])
        length = np.array([q.median_duration_ns for _, q in sources])
        owner = np.array([o for o, _ in sources], dtype=np.int64)
        for c in mine:
            a = analyses.get(c)
            lost = _lost_share(by_cpu[c])
            for p in a.periodic if a is not None else ():
                if (p.share_of_lost or 0.0) * lost < LACKS_FLOOR:
                    continue
                # _alike(p, q) for every source q at once
                ratio = p.median_duration_ns / np.where(length > 0, length, np.nan)
                alike = np.abs(p.frequency_hz - freq) <= FREQ_MATCH * freq
                alike &= (ratio >= 1 / SAME_SOURCE) & (ratio <= SAME_SOURCE)  # one source, as its line says
                alike &= p.median_duration_ns > 0
                owners = np.unique(owner[alike])
                if c in home and int(np.isin(owners, list(home[c])).sum()) >= len(home[c]) / 2:
                    continue  # its group apart has it too
                # CPUs said apart vouch for no other CPU's source: their gaps are longer. A group said apart: a
                # host's 100 Hz x 27 µs doubled there (55 µs) made a planted 100 Hz x 200 µs on a CPU beside it
                # "alike" on 18 of 64 CPUs (bench/manycpu.py's 64-CPU replay); a CPU set apart by its loss: at
                # 16 CPUs the doubled L3 group is four such outliers, too few for a rank test.
                vouching = owners[~np.isin(owners, list(((covered if c not in home else set()) | losing) - {c}))]
                having = int(vouching.size)
                if having <= max(1, OWN_SHARE * len(mine)):  # on more it is a finding they share: their line
                    share = f", {p.share_of_lost:.0%} of its lost time" if p.share_of_lost is not None else ""
                    # a co-runner's turns are said as such here too: a "source" the CPU's detail says is no noise
                    turns = f", {SLICES}" if p.slices else ""
                    out.setdefault(c, []).append(Why(f"{LACKS}{_sources(p)}{turns}{share}", source=p))
    return out


def outlying_groups(rows: Sequence[Mapping[str, Any]], odd: Mapping[int, list[Why]],
                    where: Mapping[str, Mapping[str, int]], away: Sequence[frozenset[int]] = ()
                    ) -> tuple[list[tuple[str, frozenset[int]]], dict[int, list[Why]]]:  # fmt: skip
    """A line per socket, NUMA node or L3 group every CPU of which is an outlier by
    its loss (two CPUs at least, not the whole run), the coarsest first, each with
    its CPUs; and the outliers without those CPUs' losses, which are the group's
    line's (what else sets such a CPU apart stays its own). A group too small for
    apart's rank test: an L3 group of 4 CPUs beside 4 others has no p under 0.03
    (16 CPUs of two sockets), where each of them stands out alone. Or a group of
    SEPARATE_MIN CPUs or more each of which loses more than every other CPU that
    is no outlier by its loss, the group's median APART_FACTOR times theirs and
    FLOOR more (see SEPARATE_MIN). `away`: the groups apart_groups said, whose
    CPUs are neither such a group's nor the others it is set against."""
    shares = {int(r["cpu"]): _lost_share(r) for r in rows}
    losing = {c for c, why in odd.items() if any(w.loss for w in why)}
    covered = frozenset().union(*away)
    run = frozenset(shares)
    out: list[tuple[str, frozenset[int]]] = []
    said: set[int] = set()
    for level in LEVELS:  # coarsest first: a socket of outliers is said, not its L3 groups one by one
        for g, cpus in _level_groups(where, level, shares).items():
            if len(cpus) < 2 or cpus == run or cpus & said or cpus & covered:
                continue
            mine = [shares[c] for c in cpus]
            rest = float(np.median([v for c, v in shares.items() if c not in cpus]))
            name = LEVEL_NAMES[level]
            if cpus <= losing:
                how = "each an outlier by it"
            elif _over_the_others(cpus, shares, losing | covered):
                how = "each more than any other CPU but the outliers"
            else:
                continue
            line = (f"{cpus_phrase(cpus)} ({name} {g}): a noisier {name}. They lose {min(mine) * 100:.2f}-"
                    f"{max(mine):.2%} of their time, {how}; the other CPUs' median is {rest:.2%}.")  # fmt: skip
            out.append((line, cpus))
            said |= cpus
    left = {c: [w for w in why if not (c in said and w.loss)] for c, why in odd.items()}
    return out, {c: why for c, why in left.items() if why}


#: A group of this many CPUs or more, each of which loses more than every other CPU that is no outlier by its
#: loss, is noisier without each being an outlier (outlying_groups): were the CPUs' losses alike, a given 4 of
#: 14 would be the 4 highest once in C(14, 4) = 1,001, and their median must also be APART_FACTOR times the
#: others' and FLOOR more, as apart's is. bench/manycpu.py's 16-CPU replay of one of this VM's templates,
#: four kinds of CPU at 1.17-1.64 %: the doubled L3 group's CPUs of the quieter kinds lost 2.33 % (1.42 times
#: the median, under TIMES), those of the louder 3.17 %, and the group came out as two outliers of four.
SEPARATE_MIN = 4


def _over_the_others(cpus: frozenset[int], shares: Mapping[int, float], outside: Iterable[int]) -> bool:
    """Whether the group `cpus` is SEPARATE_MIN CPUs or more, each losing more than every CPU neither in it
    nor `outside` (the outliers by their loss, the groups already said), with its median APART_FACTOR times
    theirs and FLOOR more."""
    left_out = set(outside)
    mine = [shares[c] for c in cpus]
    others = [v for c, v in shares.items() if c not in cpus and c not in left_out]
    if len(cpus) < SEPARATE_MIN or len(others) < SEPARATE_MIN:
        return False
    m, r = float(np.median(mine)), float(np.median(others))
    return min(mine) > max(others) and _louder(m, r)


def _louder(mine: float, rest: float) -> bool:
    """Whether a group's median share lost (`mine`) stands far enough over the others' (`rest`) to be said
    noisier, whatever test set it apart: APART_FACTOR times theirs, and FLOOR of the CPU more."""
    return mine >= APART_FACTOR * rest and mine - rest >= FLOOR


#: A group of CPUs is apart when a rank test sets its losses over the rest's at this level (Bonferroni over
#: the level's groups), its median is APART_FACTOR times theirs, and FLOOR of the CPU more.
APART_ALPHA, APART_FACTOR = 0.001, 1.5


def apart(rows: Sequence[Mapping[str, Any]], where: Mapping[str, Mapping[str, int]]) -> list[str]:
    """A line per socket, NUMA node or L3 group whose CPUs lose more than the
    run's other CPUs: "CPUs 24-31 (L3 group 24): lose 3.10% of their time
    (median), the other CPUs 1.55%, rank test p = 2e-09"."""
    return [line for line, _ in apart_groups(rows, where)]


def _level_groups(where: Mapping[str, Mapping[str, int]], level: str, cpus: Iterable[int]) -> dict[int, frozenset[int]]:
    """The run's CPUs (`cpus`) in each group of one topology level, by the group's id, as
    facts.topology.places keeps them (CPU numbers as text)."""
    mine = set(cpus)
    members: dict[int, set[int]] = {}
    for c, g in (where.get(level) or {}).items():
        if str(c).isdigit() and int(c) in mine:
            members.setdefault(int(g), set()).add(int(c))
    return {g: frozenset(m) for g, m in sorted(members.items())}


def apart_groups(rows: Sequence[Mapping[str, Any]],
                 where: Mapping[str, Mapping[str, int]]) -> list[tuple[str, frozenset[int]]]:  # fmt: skip
    """apart's lines, each with its CPUs. Finest level first, each group against
    the other CPUs of the smallest coarser group holding it (its socket for an L3
    group; the run for a socket), with the CPUs of groups already said left out
    of both sides: a noisy L3 group is said once, not again as its noisier socket,
    and a noisy socket's L3 groups are like their siblings, so the socket is said."""
    shares = {int(r["cpu"]): _lost_share(r) for r in rows}
    sets: list[tuple[str, int, frozenset[int]]] = []  # (level, id, CPUs), finest first
    for level in reversed(LEVELS):
        sets += [(level, g, cpus) for g, cpus in _level_groups(where, level, shares).items()]
    # one CPU set, one name, the coarsest: a NUMA node that is its socket is the socket
    coarsest = {cpus: (lv, g) for lv, g, cpus in sets}  # later (coarser) levels overwrite
    sets = [(lv, g, cpus) for lv, g, cpus in sets if coarsest[cpus] == (lv, g)]
    run = frozenset(shares)
    said: set[int] = set()
    out: list[tuple[str, frozenset[int]]] = []
    for level in reversed(LEVELS):
        mine_level = [(g, cpus) for lv, g, cpus in sets if lv == level and cpus != run]
        tests = []
        for g, cpus in mine_level:
            # its parent: the smallest coarser group strictly holding it (a NUMA node that is its socket is skipped)
            parent = min((p for lv, _, p in sets if LEVELS.index(lv) < LEVELS.index(level) and cpus < p),
                         key=len, default=run)  # fmt: skip
            inside, others = cpus - said, parent - cpus - said
            if len(inside) >= 3 and len(others) >= 3:
                tests.append((g, inside, others))
        for g, inside, others in tests:
            mine = [shares[c] for c in sorted(inside)]
            rest = [shares[c] for c in sorted(others)]
            _, p = mann_whitney(mine, rest)
            m, r = float(np.median(mine)), float(np.median(rest))
            if p * len(tests) < APART_ALPHA and _louder(m, r):
                name = LEVEL_NAMES[level]
                line = (f"{cpus_phrase(inside)} ({name} {g}): a noisier {name}. They lose {m:.2%} of their time "
                        f"(median), the CPUs beside them {r:.2%}; rank test p = {p * len(tests):.1g}.")  # fmt: skip
                out.append((line, inside))
                said |= inside
    return out


@dataclass(frozen=True)
class Shared:
    """A periodic source two CPUs or more share: its CPUs (of `total`), and each one's Periodic."""

    members: tuple[tuple[int, Periodic], ...]
    total: int
    share: float | None  # of those CPUs' lost time: the tick's as their accounts give it, another's the median

    @property
    def cpus(self) -> frozenset[int]:
        return frozenset(c for c, _ in self.members)

    @property
    def first(self) -> Periodic:
        return self.members[0][1]


def shared_sources(analyses: Sequence[CpuAnalysis], odd: Mapping[int, list[Why]],
                   accounts: Mapping[int, Account] | None = None) -> tuple[list[Shared], int, int]:  # fmt: skip
    """The periodic sources two CPUs or more share, most CPUs first (one source: one kind whatever each
    CPU counted, and lengths within SAME_SOURCE), then those found on one CPU that take OWN_LOST of its
    lost time (ONE_CPU_LINES of them); how many more are each under SOURCE_FLOOR of a CPU; how many more
    on one CPU are past ONE_CPU_LINES."""
    total = len({a.cpu for a in analyses})
    found: list[list[tuple[int, Periodic]]] = []
    for a in analyses:
        own = [why.source for why in odd.get(a.cpu, ()) if why.source is not None]
        for p in a.periodic:
            if p in own:
                continue  # told as its CPU's own, on the outlier's line: not in a line of sources CPUs share
            key = p.named.key if p.named is not None else None
            same = next((f for f in found if (f[0][1].named.key if f[0][1].named else None) == key
                         and _alike(f[0][1], p)), None)  # fmt: skip
            if same is None:
                found.append([(a.cpu, p)])
            else:
                same.append((a.cpu, p))
    out, slight, alone = [], 0, 0
    ordered = sorted(found, key=lambda f: (-len({c for c, _ in f}), -float(np.median([_duty(p) for _, p in f]))))
    for members in ordered:
        shares = [p.share_of_lost for _, p in members if p.share_of_lost is not None]
        share = float(np.median(shares)) if shares else None
        dear = share is not None and share >= OWN_LOST
        if len({c for c, _ in members}) < 2:
            # a CPU's own source over LACKS_FLOOR is told with it, as an outlier; under it, here where it is
            # dear to that CPU, else counted: a line each was most of a 384-CPU screen
            if dear:
                alone += 1
                if alone <= ONE_CPU_LINES:
                    out.append(Shared(tuple(members), total, share))
            continue
        if np.median([_duty(p) for _, p in members]) < SOURCE_FLOOR and not dear:
            slight += 1  # a line each was most of a 384-CPU screen, for sources of 0 % of the lost time
            continue
        first = members[0][1]
        ticks = [accounts[c] for c in {c for c, _ in members} if accounts and c in accounts]
        if first.named is not None and first.named.kind == TICK and ticks and all(a.tick() for a in ticks):
            share = sum(t.ns for a in ticks if (t := a.tick()) is not None) / sum(a.lost_ns for a in ticks)
        out.append(Shared(tuple(members), total, share))
    return out, slight, max(alone - ONE_CPU_LINES, 0)


def shared_table(found: Sequence[Shared], slight: int, alone: int = 0) -> Table:
    """The periodic sources of the screen (shared_sources), a row each: which CPUs, the rate, what it
    is, the evidence summed over them, the range of its length and its share of their lost time."""
    table = Table(title="Periodic sources", title_justify="left")
    for name, justify in (("CPUs", "left"), ("Hz", "right"), ("source", "left"), ("basis", "left"),
                          ("µs each", "right"), ("share of lost", "right")):  # fmt: skip
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for f in found:
        cpus = brief_cpulist(f.cpus) + (f" ({len(f.cpus)} of {f.total})" if len(f.cpus) < f.total else "")
        lengths = [p.median_duration_ns / 1000 for _, p in f.members]
        share = "-" if f.share is None else f"{f.share:.0%}"
        table.add_row(cpus, f"{f.first.frequency_hz:,.2f}", sources.label(f.first.named), _summed_basis(f),
                      figure_range(lengths, ",.1f"), share)  # fmt: skip
    if slight:
        table.add_row(f"{slight} more", "", f"each under {SOURCE_FLOOR:.1%} of a CPU", "--per-cpu names them", "", "")
    if alone:
        table.add_row(f"{alone} more", "", f"each on one CPU, {OWN_LOST:.0%} of its lost time or more",
                      "--per-cpu names them", "", "")  # fmt: skip
    return table


def _summed_basis(f: Shared) -> str:
    """The evidence of a source CPUs share: the trace's counts summed, or the range of the counted rates."""
    named = [p.named for _, p in f.members if p.named is not None]
    if not named or len({(n.by, n.event, n.counter) for n in named}) > 1:
        return sources.basis(f.first.named)
    first = named[0]
    if first.by == "trace":
        held, of = sum(n.held for n in named), sum(n.of for n in named)
        return sources.basis(Named(**{**first.__dict__, "held": held, "of": of}))
    return sources.basis(first, figure_range([n.rate for n in named], ",.0f"))


def _duty(p: Periodic) -> float:
    """The share of its CPU a periodic source takes: its gaps over its periods."""
    period = p.period_ns or (1e9 / p.frequency_hz if p.frequency_hz else 0.0)
    return p.events * p.median_duration_ns / (p.expected * period) if p.expected and period else 0.0


def group_table(rows: Sequence[Mapping[str, Any]], found: list[Group], odd: Mapping[int, list[Why]]) -> Table:
    """The per-CPU table folded: a row per group (min / median / max of each
    figure), then each outlier's own row."""
    by_cpu = {int(r["cpu"]): r for r in rows}
    table = Table(title="OS noise by group of CPUs (min / median / max; outliers on their own rows)",
                  title_justify="left")  # fmt: skip
    for name in ("CPUs", "available %", "events/s", "worst gap µs", "lost ms"):
        table.add_column(name, justify="left" if name == "CPUs" else "right")

    for g in found:
        mine = [by_cpu[c] for c in g.cpus if c in by_cpu]
        if not mine:
            continue
        table.add_row(f"{brief_cpulist(frozenset(g.cpus))} ({g.name}, {len(mine)})",
                      figure_spread([float(r["available_pct"]) for r in mine], ".3f"),
                      figure_spread([float(r["events_per_s"]) for r in mine], ",.0f"),
                      figure_spread([float(r["max_gap_ns"]) / 1000 for r in mine], ",.1f"),
                      figure_spread([float(r["lost_ns"]) / 1e6 for r in mine], ",.2f"))  # fmt: skip
    for c in sorted(odd):
        r = by_cpu.get(c)
        if r is not None:
            table.add_row(f"{c} (outlier)", f"{float(r['available_pct']):.3f}", f"{float(r['events_per_s']):,.0f}",
                          f"{float(r['max_gap_ns']) / 1000:,.1f}", f"{float(r['lost_ns']) / 1e6:,.2f}")  # fmt: skip
    return table


def group_account(accounts: Sequence[Account]) -> list[tuple[str, float, float]]:
    """The accounts of a group's CPUs summed: (source, lost ns, share of the group's lost time), the rest last."""
    total = sum(a.lost_ns for a in accounts)
    by: dict[str, float] = {}
    rest: dict[str, float] = {}
    for a in accounts:
        for r in a.rows:
            by[r.name] = by.get(r.name, 0.0) + r.ns
        rest[a.rest.name] = rest.get(a.rest.name, 0.0) + a.rest.ns
    ranked = sorted(by.items(), key=lambda kv: -kv[1])
    return [(n, ns, ns / total if total else 0.0) for n, ns in [*ranked, *rest.items()]]


def group_account_table(label: str, accounts: Sequence[Account], shown: int = 8) -> Table:
    """The accounts of a group's CPUs (`label`: which, as _summed_label says them) summed: its sources,
    biggest first, and the rest."""
    summed = group_account(accounts)
    lost = sum(a.lost_ns for a in accounts)
    by = "by the trace" if accounts[0].traced else "by the kernel's counters"
    table = Table(title=f"{label}: where {lost / 1e6:,.2f} ms went, {by}", title_justify="left")
    for name in ("source", "lost ms", "share"):
        table.add_column(name, justify="left" if name == "source" else "right")
    for name, ns, share in [*summed[:shown], *summed[-1:]] if len(summed) > shown + 1 else summed:
        table.add_row(name, f"{ns / 1e6:,.2f}", f"{share:.0%}")
    return table


def _summed_label(g: Group, summed: frozenset[int], left: frozenset[int]) -> str:
    """Which of a group's CPUs its account sums: "CPUs 0-15 (all)", or without its outliers (`left`), "CPUs
    1-15 (all but CPU 0, an outlier below)"."""
    name = "" if g.name == "all" else f", {g.name}"
    if not left:
        return f"{cpus_phrase(summed)}{name}"
    named = cpus_phrase(left)
    return f"{cpus_phrase(summed)}{name}, without {named}, {'an outlier' if len(left) == 1 else 'outliers'} below"


def group_verdict(label: str, cpus: frozenset[int], accounts: Sequence[Account],
                  analyses: Sequence[CpuAnalysis], virtualized: bool) -> str:  # fmt: skip
    """The sentence under a group's summed account, as text.account_verdict's under one CPU's: what the rest
    is, and what of the group's lost time the periodic sources placed outside the guest kernel hold (the GPU
    node's 12 CPUs: unexplained 81 %, and the host's trains, said above the table, about 70 % of it: two
    figures a reader had to join, one of them a median of three lines)."""
    lost = sum(a.lost_ns for a in accounts)
    rest = min(sum(a.rest.ns for a in accounts) / lost, 1.0) if lost > 0 else 0.0
    held = (
        sum(p.lost_ns for a in analyses if a.cpu in cpus for p in a.periodic if p.outside_guest) / lost if lost else 0.0
    )
    return f"{label}: {rest_words(rest, accounts[0].traced)}. {outside_words(held, rest, virtualized)}".rstrip()


def findings(rows: Sequence[Mapping[str, Any]], analyses: Sequence[CpuAnalysis], facts: Mapping[str, Any],
              where: Mapping[str, Mapping[str, int]] | None
              ) -> tuple[list[Group], list[tuple[str, frozenset[int]]], dict[int, list[Why]]]:  # fmt: skip
    """The run's groups, its topology groups said apart (apart_groups, then
    outlying_groups: each line with its CPUs) and its outliers with why."""
    found = groups([a.cpu for a in analyses], facts)
    away = apart_groups(rows, where or {})
    odd = outliers(rows, {a.cpu: a for a in analyses}, found, [cpus for _, cpus in away])
    outlying, odd = outlying_groups(rows, odd, where or {}, [cpus for _, cpus in away])
    return found, away + outlying, odd


@dataclass(frozen=True)
class Said:
    """What the screen says of many CPUs, in order (tables and lines), and its outliers with why."""

    items: list[Any]
    outliers: dict[int, list[Why]]
    #: each CPU's periodic sources a line names: an outlier's own, or a row of the sources table
    told_sources: dict[int, list[Periodic]] = field(default_factory=dict)

    def closing(self, cpus: int) -> str:
        """The line under it: how many CPUs and outliers, and how to see more."""
        odd = len(self.outliers)
        named = f"{odd} {'outlier' if odd == 1 else 'outliers'}" if odd else "no outlier"
        return f"{cpus} CPUs, {named}. --per-cpu gives every CPU's detail, --cpu N one CPU's."


def outlier_table(odd: Mapping[int, list[Why]]) -> Table:
    """A row per outlier: why, a line a reason."""
    table = Table(title="Outliers", title_justify="left")
    table.add_column("CPU", justify="right")
    table.add_column("why", justify="left")
    for cpu, why in sorted(odd.items()):
        table.add_row(str(cpu), "\n".join(why))
    return table


def screen(rows: Sequence[Mapping[str, Any]], analyses: Sequence[CpuAnalysis], accounts: Mapping[int, Account],
           facts: Mapping[str, Any], notes: Sequence[str], detail: str,
           with_accounts: bool = True, where: Mapping[str, Mapping[str, int]] | None = None) -> Said:  # fmt: skip
    """Many CPUs in a screen, what `noise`, `results show` and `lab` print: the table
    (a row per CPU up to FULL_UP_TO, else per group), `notes`, a line per socket, NUMA node
    or L3 group apart (`where`: the run's context's "topology"), the sources CPUs share,
    each group's account summed (`with_accounts`), and the outliers with why, and
    `detail` (how to see one CPU: `detail.format(cpu=N)`)."""
    found, away, odd = findings(rows, analyses, facts, where)
    out: list[Any] = [group_table(rows, found, odd) if len(rows) > FULL_UP_TO else noise_table(rows)]
    out += [*notes, *(line for line, _ in away)]
    shared, slight, alone = shared_sources(analyses, odd, accounts)
    if shared or slight or alone:
        out.append(shared_table(shared, slight, alone))
        out += sources.notes(p.named for f in shared for _, p in f.members[:1])
    virtual = bool((facts.get("virtualization") or {}).get("virtualized"))
    for g in found if with_accounts else ():
        mine = [accounts[c] for c in g.cpus if c in accounts]
        if mine and all(a.uncounted for a in mine):  # a table of one row, "unexplained 100%", said nothing
            lost = sum(a.lost_ns for a in mine)
            out.append(f"{cpus_phrase(frozenset(g.cpus))}: {UNCOUNTED} (imported traces). Only the periodic sources "
                       f"above say where their {lost / 1e6:,.2f} ms went.")  # fmt: skip
        elif mine:
            # its outliers left out, each said below with its own cause: the GPU node's check had a task sharing
            # CPU 0 (255 ms of the 16 CPUs' 360), and the sum said "preempted by another task 70 %" of them all
            kept = frozenset(c for c in g.cpus if c not in odd and c in accounts) or frozenset(a.cpu for a in mine)
            summed = [accounts[c] for c in sorted(kept)]
            label = _summed_label(g, kept, frozenset(c for c in g.cpus if c in odd) - kept)
            out += [group_account_table(label, summed), group_verdict(label, kept, summed, analyses, virtual)]
    if odd:
        out += [outlier_table(odd), f"One outlier's detail: {detail.format(cpu='N')}."]
    told: dict[int, list[Periodic]] = {}
    for c, why in odd.items():
        told.setdefault(c, []).extend(w.source for w in why if w.source is not None)
    for f in shared:
        for c, p in f.members:
            told.setdefault(c, []).append(p)
    return Said(out, odd, told)
