"""Why a cell's runs or a benchmark's iterations differ, in short sentences
from the numbers the analysis kept (experiments.spread, experiments.iterations):
a sentence a fact, the method and what was not measured said once. An
analysis stored before the numbers were kept has its sentence, said as it is."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from quietcore.safe import plain
from quietcore.stats.said import p_phrase


def figure(value: float) -> str:
    """A score as a person reads it: 297,105 ops/s, 12.5 ns/op, 0.0031 s/op."""
    return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:,.4g}"


def ms(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 10 else f"{value:.2f}"


#: Iterations a source took most in, named.
HIT_SHOWN = 5
#: Runs or iterations named, the slowest first.
NAMED = 5


def pct(value: float, fmt: str = ".0%") -> str:
    """A share as a percentage, never "-0%"."""
    said = format(value, fmt)
    return said[1:] if said.startswith("-") and not any(c in "123456789" for c in said) else said


def interval(low: float, high: float, fmt: str = ".0%") -> str:
    """One way to write an interval, everywhere: "[82%, 94%]"; no minus zero."""
    return f"[{pct(low, fmt)}, {pct(high, fmt)}]"


def _listed(items: Sequence[str], most: int = NAMED) -> str:
    shown = list(items[:most])
    said = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]
    return said + (f", and {len(items) - most} more" if len(items) > most else "")


def lines(spread: Iterable[Mapping[str, Any]]) -> list[str]:
    """The sentences of every cell, then each method used and what was not measured, once."""
    out, methods, missing = [], [], []
    over = set()
    for s in spread:
        over.add(str(s.get("over", "runs")))
        if "slow_runs" in s or "why_not" in s:
            out.append(" ".join(runs(s)))  # a cell's sentences, one paragraph
        elif "slow_where" in s or "forks" in s:
            out += [" ".join(said)] if (said := iterations(s)) else []
        elif s.get("sentence"):  # stored before the numbers were kept
            out.append(plain(str(s["sentence"])))
        if s.get("forks", {}).get("sentence"):
            out.append(f"{plain(str(s['cell']))}: {plain(str(s['forks']['sentence']))}")
        if s.get("method") and s["method"] not in methods:
            methods.append(s["method"])
        missing += [m for m in s.get("not_measured") or () if m not in missing]
    if not out:
        return []
    if missing:
        out.append(f"Not measured: {'; '.join(missing)}.")
    out += [f"Method: {m}." for m in methods]
    return [f"Why {' and '.join(sorted(over))} differ:", *out]


def runs(s: Mapping[str, Any]) -> list[str]:
    """A cell's runs, timed: the slow ones, what they had more of, and how much of their excess it is."""
    cell = plain(str(s["cell"]))
    if "why_not" in s:
        said = [f"{cell}: intrusions are not accounted, since {plain(str(s['why_not']))}."]
        return said + _covariates(cell, s)
    slow = [str(n) for n in s.get("slow") or ()]
    which = f"run {slow[0]} was the slowest" if len(slow) == 1 else f"runs {_listed(slow)} were the slowest"
    said = [f"{cell}: {which}, {s['excess_ms']:.2f} ms over the median."]
    source = s.get("source")
    if source:
        each = "It" if len(slow) == 1 else "They each"
        said.append(f"{each} had {source['slow_ms']:.2f} ms of {plain(source['name'])}; the other runs had "
                    f"{source['other_ms']:.2f} ms each.")  # fmt: skip
    share, bounds = s.get("share"), s.get("interval")
    if s.get("explained") and share is not None and bounds:
        said.append(f"Intrusions account for {pct(share)} of the excess, 95% interval {interval(*bounds)}.")
    elif share is not None and bounds and s.get("claim") is not None and bounds[1] < s["claim"]:
        said.append(f"Intrusions account for little of the excess: {pct(share)}, 95% interval {interval(*bounds)}.")
    elif share is not None and bounds:
        said.append(f"Intrusions do not surely account for it: {pct(share)} of the excess, 95% interval "
                    f"{interval(*bounds)}.")  # fmt: skip
    else:
        said.append("Nothing traced accounts for it.")
    return said + _covariates(cell, s)


def _covariates(cell: str, s: Mapping[str, Any]) -> list[str]:
    """What moves with the run time, a sentence each (in the cell's paragraph)."""
    out = []
    for c in s.get("covariates") or ():
        if isinstance(c, Mapping):
            what = str(c["what"])
            way = "rise together" if c["rho"] > 0 else "move opposite ways"  # a verb for "steal time" and "faults"
            out.append(f"{what[:1].upper()}{what[1:]} and the run time {way}: Spearman rho {c['rho']:.2f}, "
                       f"{p_phrase(c['p'])} after Holm.")  # fmt: skip
        else:  # stored as words before the numbers were kept
            out.append(f"{plain(str(c))}.")
    return out


def iterations(s: Mapping[str, Any]) -> list[str]:
    """A benchmark's slow iterations (or runs, its samples summed): how far under, what took their time,
    the workload's own threads, and how much of the shortfall the time taken accounts for."""
    cell = plain(str(s["cell"]))
    said: list[str] = []
    where = s.get("slow_where") or []
    what = "run" if s.get("over") == "runs" else "iteration"
    if where:
        named = _listed([plain(w) for w in where])
        lead = f"the slowest {what}s, {named}, were" if len(where) > 1 else f"the slowest {what}, {named}, was"
        said.append(f"{cell}: {lead} {s['under']:.1%} under the median {plain(str(s.get('unit', '')))}.")
        if not s.get("traced", True):
            said.append("Intrusions were not traced, so they are not accounted.")
            return said + _forks(cell, s)
    source = s.get("source")
    if source and source.get("noted"):
        each = "They each had" if len(where) > 1 else "It had"
        said.append(f"{each} {ms(source['slow_ms'])} ms of {plain(source['name'])}, the rest {ms(source['other_ms'])} "
                    "ms.")  # fmt: skip
        if source.get("hit_said") and source.get("hit"):
            took = [f"{plain(h['where'])} ({ms(h['ms'])} ms)" for h in source["hit"]]
            said.append(f"{plain(source['name'])} took most in {_listed(took, HIT_SHOWN)}.")
    own = s.get("own_threads")
    if own and own.get("noted"):
        others = ", ".join(plain(o) for o in own["others"][:3])
        said.append(f"The workload's own threads beside {plain(own['main'])}, {others}, took {ms(own['slow_ms'])} ms "
                    f"in each, the rest {ms(own['other_ms'])} ms. A JVM's JIT and GC are the workload's own, not "
                    "intruders.")  # fmt: skip
    share = s.get("share")
    if s.get("explained") and share is not None:
        their = "their" if len(where) > 1 else "its"
        said.append(f"The time taken accounts for {share:.0%} of {their} shortfall.")
        slope = s.get("slope")
        if slope:
            lo, hi = slope["ci"]
            said.append(f"Score lost per unit of time taken: {slope['value']:.2f}, 95% interval "
                        f"{interval(lo, hi, '.2f')}.")  # fmt: skip
    elif where:
        # A share under 1% (or below nought, where the slow had less taken than the rest) is none of it
        part = "none" if share is None or share < 0.005 else f"only {share:.0%}"
        said.append(f"No intruder accounts for it: the time taken accounts for {part} of the shortfall.")
    return said + _forks(cell, s)


def _forks(cell: str, s: Mapping[str, Any]) -> list[str]:
    f = s.get("forks")
    if not f or "h" not in f or "odd_median" not in f:
        return []
    said = [f"{cell}: the forks {'differ' if f['differ'] else 'do not differ'} beyond their iterations' spread: "
            f"Kruskal-Wallis H {f['h']:.1f}, permutation p {f['p']:.3g}, {f['forks']} forks."]  # fmt: skip
    if f["differ"]:
        (mine, rest), (steal, steal_rest) = f["intruders_ms"], f["steal_ms"]
        said.append(f"{plain(f['odd'])}'s median is {figure(f['odd_median'])}, the rest's {figure(f['rest_median'])}. "
                    f"Its iterations had {ms(mine)} ms of intruders and {ms(steal)} ms of steal each, the rest "
                    f"{ms(rest)} and {ms(steal_rest)}.")  # fmt: skip
        ran, ran_rest = f.get("ran") or ("", "")
        if ran and ran_rest and ran != ran_rest:
            said.append(f"It ran on CPU {ran}, the rest on {ran_rest}.")
    return said
